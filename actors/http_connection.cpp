#include <spdlog/spdlog.h>
#include <strings.h>

#include <array>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>

#include "actors/http_server_state.hpp"

namespace sloserve::http {

namespace beast = boost::beast;
namespace bhttp = boost::beast::http;

std::optional<std::string> percent_decoded(std::string_view path) {
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  std::string out;
  out.reserve(path.size());
  for (size_t i = 0; i < path.size(); ++i) {
    if (path[i] != '%') {
      out += path[i];
      continue;
    }
    int hi = i + 2 < path.size() ? hex(path[i + 1]) : -1, lo = hi >= 0 ? hex(path[i + 2]) : -1;
    if (lo < 0) return std::nullopt;
    out += static_cast<char>(hi * 16 + lo);
    i += 2;
  }
  return out;
}

const std::string* request::header(std::string_view name) const {
  for (auto& [k, v] : headers)
    if (k.size() == name.size() && strncasecmp(k.data(), name.data(), k.size()) == 0) return &v;
  return nullptr;
}

std::string error_json(std::string_view what) {
  std::string out = "{\"error\":\"";
  for (char c : what) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"}";
}

void responder::operator()(response r) const {
  x_->answer([r = std::move(r)]() mutable { return std::move(r); });
}

void responder::operator()(std::function<response()> make) const {
  x_->answer(std::move(make));
}

void responder::backstop(std::chrono::milliseconds after, std::function<response()> fallback) const {
  {
    std::lock_guard g(x_->lock);
    if (x_->done || !x_->watch) return;
    x_->fallback = std::move(fallback);
    x_->deadline = std::chrono::steady_clock::now() + after;
  }
  x_->watch->add(*x_);
}

namespace detail {

exchange::~exchange() {
  if (watch) watch->remove(*this);
}

void exchange::answer(std::function<response()> make) {
  std::shared_ptr<session_base> s;
  {
    std::lock_guard g(lock);
    if (done) return;
    done = true;
    s = std::move(session);
  }
  if (watch) watch->remove(*this);
  if (s) s->deliver(std::move(make));
}

}  // namespace detail

namespace {

using plain_stream = beast::basic_stream<tcp, asio::io_context::executor_type>;
using tls_stream = beast::ssl_stream<plain_stream>;

template <class Stream>
class session final : public session_base, public std::enable_shared_from_this<session<Stream>> {
 public:
  static constexpr bool tls = !std::is_same_v<Stream, plain_stream>;

  session(std::shared_ptr<server::impl> srv, std::shared_ptr<asio::io_context> io, Stream stream, std::string remote)
      : srv_(std::move(srv)), io_(std::move(io)), stream_(std::move(stream)), remote_(std::move(remote)) {}
  ~session() override { srv_->release(remote_); }

  void start() {
    if constexpr (tls) {
      lowest().expires_after(srv_->opts.request_timeout);
      stream_.async_handshake(asio::ssl::stream_base::server, [self = this->shared_from_this()](error_code ec) {
        if (ec) {
          self->srv_->refused("tls_handshake");
          return self->shut();
        }
        self->read();
      });
    } else {
      read();
    }
  }

  void deliver(std::function<response()> make) override {
    asio::post(stream_.get_executor(), [self = this->shared_from_this(), make = std::move(make)]() mutable {
      response r;
      try {
        r = make();
      } catch (const std::exception& e) {
        r = {500, error_json(e.what())};
      }
      self->write(std::move(r), self->keep_alive_);
    });
  }

  void close() override {
    asio::post(stream_.get_executor(), [self = this->shared_from_this()] { self->shut(); });
  }

 private:
  auto& lowest() { return beast::get_lowest_layer(stream_); }

  void read() {
    parser_.emplace();
    parser_->body_limit(srv_->opts.max_body_bytes);
    parser_->header_limit(64 * 1024);
    // The whole request, headers and body, within the timeout from now: a client that trickles
    // it, or keeps the connection idle, loses the connection.
    lowest().expires_after(srv_->opts.request_timeout);
    bhttp::async_read_header(stream_, buffer_, *parser_,
                             [self = this->shared_from_this()](error_code ec, size_t) { self->on_header(ec); });
  }

  // The header is in. A body of a known length is read straight into its string, in reads as
  // large as the socket gives (through the parser it would be copied out of the read buffer, in
  // reads as small as that buffer); a client that asked for "100 Continue" gets it first.
  void on_header(error_code ec) {
    if (ec || parser_->is_done()) return on_read(ec);
    auto length = parser_->content_length();
    if (!length || parser_->chunked()) return read_rest();
    if (auto e = parser_->get().find(bhttp::field::expect);
        e != parser_->get().end() && beast::iequals(e->value(), "100-continue") && buffer_.size() == 0) {
      static const std::string go_on = "HTTP/1.1 100 Continue\r\n\r\n";
      return asio::async_write(stream_, asio::buffer(go_on), [self = this->shared_from_this()](error_code ec, size_t) {
        if (ec) return self->shut();
        self->read_body();
      });
    }
    read_body();
  }

  void read_rest() {
    bhttp::async_read(stream_, buffer_, *parser_,
                      [self = this->shared_from_this()](error_code ec, size_t) { self->on_read(ec); });
  }

  // The body's memory is reserved, and committed a piece at a time as its bytes arrive: a client
  // that declares a large body and sends little of it holds little.
  void read_body() {
    auto length = static_cast<size_t>(*parser_->content_length());
    body_.clear();
    body_.reserve(length);
    auto have = std::min(length, buffer_.size());
    body_.resize(have);
    asio::buffer_copy(asio::buffer(body_.data(), have), buffer_.data());
    buffer_.consume(have);
    read_more(length);
  }

  void read_more(size_t length) {
    constexpr size_t piece = 64 * 1024;
    auto have = body_.size();
    if (have == length) return on_read({});
    auto want = std::min(piece, length - have);
    body_.resize(have + want);
    stream_.async_read_some(asio::buffer(body_.data() + have, want),
                            [self = this->shared_from_this(), have, length](error_code ec, size_t n) {
                              self->body_.resize(have + n);
                              // A body cut short is a message the parser would call partial.
                              if (ec) return self->on_read(ec == asio::error::eof ? bhttp::error::partial_message : ec);
                              self->read_more(length);
                            });
  }

  void on_read(error_code ec) {
    if (ec == bhttp::error::end_of_stream || ec == asio::error::eof || ec == asio::error::connection_reset)
      return shut();
    if (ec == beast::error::timeout) {
      // A request begun and not finished is a refusal; an idle keep-alive connection just ends.
      if (parser_->got_some()) srv_->refused("request_timeout");
      return shut();
    }
    if (ec) {
      // Refused before it was read whole: the answer goes, then what the client still sends is
      // read and dropped until it stops (or the timeout), so that it reads the answer.
      keep_alive_ = false;
      linger_ = true;
    }
    if (ec == bhttp::error::body_limit) {
      srv_->refused("too_large");
      return write({413, error_json("Payload Too Large: over runtime.max_payload_bytes")}, false);
    }
    if (ec == bhttp::error::header_limit) {
      srv_->refused("too_large");
      return write({431, error_json("Request Header Fields Too Large")}, false);
    }
    if (ec) {
      // What the parser refuses is the client's fault, and told; the transport's errors end it.
      if (ec.category() != bhttp::make_error_code(bhttp::error::bad_target).category() ||
          ec == bhttp::error::partial_message)
        return shut();
      srv_->refused("bad_request");
      return write({400, error_json("Bad Request: " + ec.message())}, false);
    }
    auto& m = parser_->get();
    keep_alive_ = m.keep_alive();
    version_ = m.version();
    request r;
    r.method = std::string(m.method_string());
    auto target = std::string_view(m.target().data(), m.target().size());
    auto path = percent_decoded(target.substr(0, target.find('?')));
    if (!path) {
      srv_->refused("bad_request");
      return write({400, error_json("Bad Request: a '%' in the path that is not followed by two hex digits")}, false);
    }
    r.path = std::move(*path);
    r.body = parser_->is_done() ? std::move(m.body()) : std::exchange(body_, {});
    r.remote = remote_;
    for (auto& f : m) r.headers.emplace_back(std::string(f.name_string()), std::string(f.value()));
    lowest().expires_never();  // the handler's time is its own (responder::backstop)
    auto x = std::make_shared<detail::exchange>();
    x->watch = srv_->backstops;
    x->session = this->shared_from_this();
    try {
      srv_->on_request(std::move(r), responder{x});
    } catch (const std::exception& e) {
      spdlog::warn("http: {}", e.what());
      responder{x}(response{500, error_json(e.what())});
    }
  }

  // The status line and headers are written here, and go out with the body in one gather write
  // (under TLS, one buffer: Beast's TLS stream ends a write of several buffers over 16 KB after
  // the first of them).
  void write(response r, bool keep_alive) {
    auto out = std::make_shared<std::pair<std::string, std::string>>(head_of(r, keep_alive), std::move(r.body));
    if constexpr (tls) out->first.append(std::exchange(out->second, {}));
    if (srv_->opts.replied) srv_->opts.replied(r.status);
    lowest().expires_after(srv_->opts.write_timeout);
    std::array<asio::const_buffer, 2> parts{asio::buffer(out->first), asio::buffer(out->second)};
    asio::async_write(stream_, parts, [self = this->shared_from_this(), out, keep_alive](error_code ec, size_t) {
      if (!ec && self->linger_) return self->linger();
      if (ec || !keep_alive) return self->shut();
      self->read();
    });
  }

  // The head of `r` to a client of this connection's HTTP version; a status that has no body
  // (1xx, 204, 304) gets none.
  std::string head_of(response& r, bool keep_alive) const {
    bool bodiless = r.status < 200 || r.status == 204 || r.status == 304;
    if (bodiless) r.body.clear();
    auto reason = bhttp::obsolete_reason(static_cast<bhttp::status>(r.status));
    std::string h;
    h.reserve(128 + r.content_type.size() + 64 * r.headers.size());
    h.append(version_ == 10 ? "HTTP/1.0 " : "HTTP/1.1 ")
        .append(std::to_string(r.status))
        .append(" ")
        .append(reason.data(), reason.size())
        .append("\r\nServer: sloserve\r\nContent-Type: ")
        .append(r.content_type)
        .append("\r\n");
    for (auto& [k, v] : r.headers) h.append(k).append(": ").append(v).append("\r\n");
    if (!bodiless) h.append("Content-Length: ").append(std::to_string(r.body.size())).append("\r\n");
    if (version_ == 10 && keep_alive) h.append("Connection: keep-alive\r\n");
    if (version_ != 10 && !keep_alive) h.append("Connection: close\r\n");
    return h.append("\r\n");
  }

  void linger() {
    error_code ec;
    lowest().socket().shutdown(tcp::socket::shutdown_send, ec);
    lowest().expires_after(srv_->opts.request_timeout);
    scratch_.resize(16384);
    drain();
  }

  void drain() {
    lowest().async_read_some(asio::buffer(scratch_), [self = this->shared_from_this()](error_code ec, size_t) {
      if (ec) return self->shut();
      self->drain();
    });
  }

  void shut() {
    if (closed_) return;
    closed_ = true;
    // Under TLS too, without waiting for the peer's close_notify: the socket goes now.
    error_code ec;
    lowest().socket().shutdown(tcp::socket::shutdown_both, ec);
    lowest().close();
  }

  std::shared_ptr<server::impl> srv_;
  std::shared_ptr<asio::io_context> io_;  // the connection's thread's
  Stream stream_;
  std::string remote_;
  beast::flat_buffer buffer_;
  std::optional<bhttp::request_parser<bhttp::string_body>> parser_;
  std::string body_;  // a body of a known length, read past the parser
  bool keep_alive_ = false;
  bool linger_ = false;
  bool closed_ = false;
  std::vector<char> scratch_;  // what a refused request still sends, dropped
  unsigned version_ = 11;
};

}  // namespace

std::shared_ptr<session_base> start_session(std::shared_ptr<server::impl> srv, std::shared_ptr<asio::io_context> io,
                                            socket_t socket, std::string remote) {
  if (srv->tls) {
    auto one = std::make_shared<session<tls_stream>>(
        srv, std::move(io), tls_stream(plain_stream(std::move(socket)), *srv->tls), std::move(remote));
    one->start();
    return one;
  }
  auto one =
      std::make_shared<session<plain_stream>>(srv, std::move(io), plain_stream(std::move(socket)), std::move(remote));
  one->start();
  return one;
}

}  // namespace sloserve::http
