#include "actors/http_server.hpp"

#include <spdlog/spdlog.h>
#include <strings.h>

#include <atomic>
#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

namespace sloserve::http {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = asio::ip::tcp;
using error_code = boost::system::error_code;

const std::string* request::header(std::string_view name) const {
  for (auto& [k, v] : headers)
    if (k.size() == name.size() && strncasecmp(k.data(), name.data(), k.size()) == 0) return &v;
  return nullptr;
}

namespace {

// What every connection answers with when the server refuses it a request.
std::string error_json(std::string_view what) {
  std::string out = "{\"error\":\"";
  for (char c : what) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"}";
}

class session_base {
 public:
  virtual ~session_base() = default;
  // Makes the response on the connection's strand, then writes it.
  virtual void deliver(std::function<response()> make) = 0;
  virtual void close() = 0;
};

}  // namespace

namespace detail {

struct exchange {
  std::shared_ptr<asio::io_context> io;  // first: outlives the timer
  std::mutex lock;                       // guards what follows
  // The connection awaiting the answer: held until it is given (or the responder is dropped).
  std::shared_ptr<session_base> session;
  bool done = false;
  std::optional<asio::steady_timer> timer;

  void answer(std::function<response()> make) {
    std::shared_ptr<session_base> s;
    {
      std::lock_guard g(lock);
      if (done) return;
      done = true;
      s = std::move(session);
      if (timer) timer->cancel();
    }
    if (s) s->deliver(std::move(make));
  }
};

}  // namespace detail

void responder::operator()(response r) const {
  x_->answer([r = std::move(r)]() mutable { return std::move(r); });
}

void responder::operator()(std::function<response()> make) const {
  x_->answer(std::move(make));
}

void responder::backstop(std::chrono::milliseconds after, response fallback) const {
  std::lock_guard g(x_->lock);
  if (x_->done) return;
  x_->timer.emplace(*x_->io, after);
  std::weak_ptr<detail::exchange> weak = x_;
  x_->timer->async_wait([weak, fallback = std::move(fallback)](error_code ec) mutable {
    if (ec) return;
    if (auto x = weak.lock()) x->answer([fallback = std::move(fallback)]() mutable { return std::move(fallback); });
  });
}

struct server::impl : std::enable_shared_from_this<server::impl> {
  server_options opts;
  handler on_request;
  std::shared_ptr<asio::io_context> io = std::make_shared<asio::io_context>();
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work;
  std::optional<tcp::acceptor> acceptor;
  std::optional<asio::ssl::context> tls;
  std::vector<std::thread> threads;

  std::mutex lock;  // guards what follows
  std::map<std::string, int> per_address;
  int connections = 0;
  std::set<std::weak_ptr<session_base>, std::owner_less<>> open;
  bool stopping = false;

  void refused(std::string_view why) {
    if (opts.refused) opts.refused(why);
  }
  void accept();
  void on_accept(tcp::socket socket);
  // Takes a connection from `address` into the counts; false (nothing counted) past a limit, with why.
  bool admit(const std::string& address, std::string_view& why) {
    std::lock_guard g(lock);
    if (stopping) return why = "connections", false;
    if (connections >= opts.max_connections) return why = "connections", false;
    auto& n = per_address[address];
    if (opts.connections_per_address > 0 && n >= opts.connections_per_address) {
      if (n == 0) per_address.erase(address);
      return why = "connections_per_address", false;
    }
    ++n, ++connections;
    return true;
  }
  void release(const std::string& address) {
    std::lock_guard g(lock);
    --connections;
    if (auto it = per_address.find(address); it != per_address.end() && --it->second <= 0) per_address.erase(it);
  }
};

namespace {

template <class Stream>
class session final : public session_base, public std::enable_shared_from_this<session<Stream>> {
 public:
  static constexpr bool tls = !std::is_same_v<Stream, beast::tcp_stream>;

  session(std::shared_ptr<server::impl> srv, Stream stream, std::string remote)
      : srv_(std::move(srv)), stream_(std::move(stream)), remote_(std::move(remote)) {}
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
    bhttp::async_read(stream_, buffer_, *parser_,
                      [self = this->shared_from_this()](error_code ec, size_t) { self->on_read(ec); });
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
    auto target = std::string(m.target());
    r.path = target.substr(0, target.find('?'));
    r.body = std::move(m.body());
    r.remote = remote_;
    for (auto& f : m) r.headers.emplace_back(std::string(f.name_string()), std::string(f.value()));
    lowest().expires_never();  // the handler's time is its own (responder::backstop)
    auto x = std::make_shared<detail::exchange>();
    x->io = srv_->io;
    x->session = this->shared_from_this();
    try {
      srv_->on_request(std::move(r), responder{x});
    } catch (const std::exception& e) {
      spdlog::warn("http: {}", e.what());
      responder{x}(response{500, error_json(e.what())});
    }
  }

  void write(response r, bool keep_alive) {
    auto res = std::make_shared<bhttp::response<bhttp::string_body>>();
    res->version(version_);
    res->result(static_cast<unsigned>(r.status));
    res->set(bhttp::field::server, "sloserve");
    res->set(bhttp::field::content_type, r.content_type);
    for (auto& [k, v] : r.headers) res->set(k, v);
    res->keep_alive(keep_alive);
    res->body() = std::move(r.body);
    res->prepare_payload();
    if (srv_->opts.replied) srv_->opts.replied(r.status);
    lowest().expires_after(srv_->opts.write_timeout);
    bhttp::async_write(stream_, *res, [self = this->shared_from_this(), res, keep_alive](error_code ec, size_t) {
      if (!ec && self->linger_) return self->linger();
      if (ec || !keep_alive) return self->shut();
      self->read();
    });
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
  Stream stream_;
  std::string remote_;
  beast::flat_buffer buffer_;
  std::optional<bhttp::request_parser<bhttp::string_body>> parser_;
  bool keep_alive_ = false;
  bool linger_ = false;
  bool closed_ = false;
  std::vector<char> scratch_;  // what a refused request still sends, dropped
  unsigned version_ = 11;
};

}  // namespace

void server::impl::accept() {
  acceptor->async_accept(asio::make_strand(*io), [self = shared_from_this()](error_code ec, tcp::socket socket) {
    if (ec == asio::error::operation_aborted || !self->acceptor->is_open()) return;
    if (!ec) self->on_accept(std::move(socket));
    self->accept();
  });
}

void server::impl::on_accept(tcp::socket socket) {
  error_code ec;
  auto peer = socket.remote_endpoint(ec);
  if (ec) return;
  auto address = peer.address().to_string();
  std::string_view why;
  if (!admit(address, why)) {
    refused(why);
    if (!tls) {
      // A plain client reads why, if it reads at once; nobody waits for it to.
      auto body = error_json("too many connections from " + address);
      auto text =
          "HTTP/1.1 429 Too Many Requests\r\nContent-Type: application/json\r\nConnection: close\r\n"
          "Content-Length: " +
          std::to_string(body.size()) + "\r\n\r\n" + body;
      socket.non_blocking(true, ec);
      socket.write_some(asio::buffer(text), ec);
      if (opts.replied) opts.replied(429);
    }
    socket.shutdown(tcp::socket::shutdown_both, ec);
    socket.close(ec);
    return;
  }
  socket.set_option(tcp::no_delay(true), ec);  // a reply goes out whole at once, not after a delayed ACK
  std::shared_ptr<session_base> s;
  if (tls) {
    auto one = std::make_shared<session<beast::ssl_stream<beast::tcp_stream>>>(
        shared_from_this(), beast::ssl_stream<beast::tcp_stream>(beast::tcp_stream(std::move(socket)), *tls), address);
    s = one;
    one->start();
  } else {
    auto one =
        std::make_shared<session<beast::tcp_stream>>(shared_from_this(), beast::tcp_stream(std::move(socket)), address);
    s = one;
    one->start();
  }
  std::lock_guard g(lock);
  std::erase_if(open, [](auto& w) { return w.expired(); });
  open.insert(s);
}

server::server(server_options options, handler h) : impl_(std::make_shared<impl>()) {
  impl_->opts = std::move(options);
  impl_->on_request = std::move(h);
}

server::~server() {
  stop();
}

expected<int> server::start(const std::string& host, int port) {
  auto& s = *impl_;
  try {
    if (!s.opts.tls_cert.empty() && !s.opts.tls_key.empty()) {
      s.tls.emplace(asio::ssl::context::tls_server);
      s.tls->set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 |
                         asio::ssl::context::no_sslv3 | asio::ssl::context::no_tlsv1 | asio::ssl::context::no_tlsv1_1);
      s.tls->use_certificate_chain_file(s.opts.tls_cert);
      s.tls->use_private_key_file(s.opts.tls_key, asio::ssl::context::pem);
    }
  } catch (const std::exception& e) {
    return fail("http: cannot use TLS certificate " + s.opts.tls_cert + " with key " + s.opts.tls_key + ": " +
                e.what());
  }
  try {
    tcp::resolver resolver(*s.io);
    auto found = resolver.resolve(host == "*" ? "0.0.0.0" : host, std::to_string(port), tcp::resolver::passive);
    if (found.empty()) return fail("http: cannot resolve " + host);
    s.acceptor.emplace(asio::make_strand(*s.io));
    auto endpoint = found.begin()->endpoint();
    s.acceptor->open(endpoint.protocol());
    s.acceptor->set_option(asio::socket_base::reuse_address(true));
    s.acceptor->bind(endpoint);
    s.acceptor->listen(asio::socket_base::max_listen_connections);
  } catch (const std::exception& e) {
    return fail("http: cannot bind " + host + ":" + std::to_string(port) + ": " + e.what());
  }
  int bound = s.acceptor->local_endpoint().port();
  s.work.emplace(s.io->get_executor());
  s.accept();
  for (int i = 0; i < std::max(1, s.opts.io_threads); ++i) s.threads.emplace_back([io = s.io] { io->run(); });
  return bound;
}

void server::stop() {
  auto& s = *impl_;
  if (s.threads.empty()) return;
  std::vector<std::shared_ptr<session_base>> open;
  {
    std::lock_guard g(s.lock);
    s.stopping = true;
    for (auto& w : s.open)
      if (auto one = w.lock()) open.push_back(one);
    s.open.clear();
  }
  asio::post(s.acceptor->get_executor(), [self = impl_] {
    error_code ec;
    self->acceptor->close(ec);
  });
  for (auto& one : open) one->close();
  open.clear();
  s.work.reset();
  s.io->stop();
  for (auto& t : s.threads) t.join();
  s.threads.clear();
  // What was queued (the closes, the aborted accept and reads) runs here; timers left waiting
  // are dropped with the context. Answers that come later find their connection gone.
  s.io->restart();
  s.io->poll();
}

}  // namespace sloserve::http
