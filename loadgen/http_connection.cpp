#include "loadgen/http_connection.hpp"

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <deque>
#include <future>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>

#include "loadgen/answer_queue.hpp"
#include "messages/codec.hpp"
#include "messages/kserve_v2.hpp"

namespace sloserve {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = asio::ip::tcp;
using error_code = boost::system::error_code;
using json = nlohmann::json;
using request_t = bhttp::request<bhttp::string_body>;
using response_t = bhttp::response<bhttp::string_body>;
using done_fn = std::function<void(error_code, response_t&)>;
// The lane's one context by type (no type-erased executor on every read and write).
using plain_stream = beast::basic_stream<tcp, asio::io_context::executor_type>;

// Where the channels connect and how long an exchange may take.
struct endpoint {
  tcp::resolver::results_type at;
  std::string host;                   // for TLS: the name (or address) the certificate must name
  asio::ssl::context* tls = nullptr;  // null: plaintext
  std::chrono::milliseconds timeout{60000};
};

// One keep-alive connection with one exchange at a time, opened on first use and again after the
// server closed it. A request on a reused connection that the server had closed meanwhile (its
// idle timeout) is sent once more on a fresh one: the server read none of it.
class channel {
 public:
  virtual ~channel() = default;
  virtual void exchange(std::shared_ptr<request_t> req, done_fn done) = 0;
};

template <class Stream>
class channel_on final : public channel, public std::enable_shared_from_this<channel_on<Stream>> {
 public:
  static constexpr bool tls = !std::is_same_v<Stream, plain_stream>;

  channel_on(asio::io_context& io, const endpoint& ep) : io_(io), ep_(ep) {}

  void exchange(std::shared_ptr<request_t> req, done_fn done) override {
    req_ = std::move(req);
    done_ = std::move(done);
    res_ = {};
    if (stream_) {
      reused_ = true;
      return write();
    }
    open();
  }

 private:
  auto& lowest() { return beast::get_lowest_layer(*stream_); }

  void open() {
    reused_ = false;
    if constexpr (tls) {
      stream_.emplace(io_, *ep_.tls);
      error_code not_an_address;  // SNI names a host, never an address
      asio::ip::make_address(ep_.host, not_an_address);
      if (not_an_address && !SSL_set_tlsext_host_name(stream_->native_handle(), ep_.host.c_str()))
        return finish(error_code(static_cast<int>(::ERR_get_error()), asio::error::get_ssl_category()));
      stream_->set_verify_mode(asio::ssl::verify_peer);
      stream_->set_verify_callback(asio::ssl::host_name_verification(ep_.host));
    } else {
      stream_.emplace(io_);
    }
    lowest().expires_after(std::min(ep_.timeout, std::chrono::milliseconds(10000)));
    lowest().async_connect(ep_.at, [self = this->shared_from_this()](error_code ec, const tcp::endpoint&) {
      if (ec) return self->finish(ec);
      self->lowest().socket().set_option(tcp::no_delay(true));
      if constexpr (tls) {
        self->stream_->async_handshake(asio::ssl::stream_base::client, [self](error_code ec) {
          if (ec) return self->finish(ec);
          self->write();
        });
      } else {
        self->write();
      }
    });
  }

  void write() {
    lowest().expires_after(ep_.timeout);
    bhttp::async_write(*stream_, *req_, [self = this->shared_from_this()](error_code ec, size_t) {
      if (ec) return self->failed(ec);
      self->parser_.emplace();
      self->parser_->body_limit(std::numeric_limits<uint64_t>::max());
      bhttp::async_read(*self->stream_, self->buffer_, *self->parser_,
                        [self](error_code ec, size_t) { self->failed(ec); });
    });
  }

  // After the exchange: a stale keep-alive connection is opened again and the request resent.
  void failed(error_code ec) {
    bool stale = ec == bhttp::error::end_of_stream || ec == asio::error::eof || ec == asio::error::connection_reset ||
                 ec == asio::error::broken_pipe;
    if (ec && reused_ && stale && !(parser_ && parser_->got_some())) {
      drop();
      return open();
    }
    if (!ec) res_ = parser_->release();
    finish(ec);
  }

  void finish(error_code ec) {
    if (ec || !res_.keep_alive()) drop();
    parser_.reset();
    auto done = std::move(done_);
    req_.reset();
    done(ec, res_);
  }

  void drop() {
    if (!stream_) return;
    error_code ignored;
    lowest().socket().shutdown(tcp::socket::shutdown_both, ignored);
    lowest().close();
    stream_.reset();
    buffer_.clear();
  }

  asio::io_context& io_;
  const endpoint& ep_;
  std::optional<Stream> stream_;
  beast::flat_buffer buffer_;
  std::shared_ptr<request_t> req_;
  std::optional<bhttp::response_parser<bhttp::string_body>> parser_;
  response_t res_;
  done_fn done_;
  bool reused_ = false;
};

std::string error_of(const std::string& body) {
  auto j = json::parse(body, nullptr, false);
  return j.is_object() && j.contains("error") && j["error"].is_string() ? j["error"].get<std::string>() : body;
}

// The lane's frames become HTTP requests on `connections` channels driven by one I/O thread;
// frames beyond the idle channels wait in order.
class http_connection final : public load_connection {
 public:
  http_connection(const load_options& o, size_t connections)
      : o_(o), connections_(std::max<size_t>(1, connections)), guard_(asio::make_work_guard(io_)) {
    input_names_[o.pipeline] = o.input_name;
    for (auto& m : o.mix) input_names_[m.pipeline] = m.input_name;
    ep_.timeout = std::chrono::milliseconds(static_cast<int64_t>(o.grace_ms) + 60000);
  }

  ~http_connection() override {
    guard_.reset();
    io_.stop();
    if (thread_.joinable()) thread_.join();
  }

  status connect() override {
    auto colon = o_.address.rfind(':');
    if (colon == std::string::npos) return fail("the KServe v2 HTTP ingress is HOST:PORT, not " + o_.address);
    ep_.host = o_.address.substr(0, colon);
    if (ep_.host.size() > 2 && ep_.host.front() == '[' && ep_.host.back() == ']')
      ep_.host = ep_.host.substr(1, ep_.host.size() - 2);
    error_code ec;
    ep_.at = tcp::resolver(io_).resolve(ep_.host, o_.address.substr(colon + 1), ec);
    if (ec) return fail("cannot resolve " + o_.address + ": " + ec.message());
    if (!o_.http_ca.empty()) {
      tls_.emplace(asio::ssl::context::tls_client);
      tls_->load_verify_file(o_.http_ca, ec);
      if (ec) return fail("cannot read the certificate " + o_.http_ca + ": " + ec.message());
      ep_.tls = &*tls_;
    }
    for (size_t i = 0; i < connections_; ++i) {
      if (tls_)
        idle_.push_back(std::make_shared<channel_on<beast::ssl_stream<plain_stream>>>(io_, ep_));
      else
        idle_.push_back(std::make_shared<channel_on<plain_stream>>(io_, ep_));
    }
    thread_ = std::thread([this] { io_.run(); });
    std::promise<std::string> probed;
    asio::post(io_, [this, &probed] {
      auto ch = idle_.back();
      idle_.pop_back();
      ch->exchange(request(bhttp::verb::get, "/v2/health/live"), [this, ch, &probed](error_code ec, response_t&) {
        idle_.push_back(ch);
        probed.set_value(ec ? ec.message() : "");
        pump();
      });
    });
    if (auto why = probed.get_future().get(); !why.empty())
      return fail("no KServe v2 HTTP ingress answers at " + o_.address + " (nodes[].http): " + why);
    return {};
  }

  void send(bytes frame) override {
    asio::post(io_, [this, frame = std::move(frame)]() mutable {
      waiting_.push_back(std::move(frame));
      pump();
    });
  }

  bool recv(std::string& out, int timeout_ms) override { return answers_.pop(out, timeout_ms); }

  std::string refused() override { return {}; }

 private:
  std::shared_ptr<request_t> request(bhttp::verb verb, const std::string& target) const {
    auto r = std::make_shared<request_t>(verb, target, 11);
    r->set(bhttp::field::host, o_.address);
    r->keep_alive(true);
    if (!o_.http_token.empty()) r->set(bhttp::field::authorization, "Bearer " + o_.http_token);
    if (!o_.tenant.empty()) r->set("Sloserve-Tenant", o_.tenant);
    return r;
  }

  // On the I/O thread: the waiting frames go to idle channels.
  void pump() {
    msg::decode_limits limits;
    limits.max_payload_bytes = 1ULL << 32;
    while (!idle_.empty() && !waiting_.empty()) {
      auto d = msg::decode(waiting_.front().view(), limits);
      waiting_.pop_front();
      if (!d.value) continue;
      auto ch = idle_.back();
      idle_.pop_back();
      auto answered = [this, ch](msg::body reply) {
        answers_.push(msg::encode_frame({{}, std::move(reply)}).str());
        idle_.push_back(ch);
        pump();
      };
      if (auto* r = std::get_if<msg::client_request>(&d.value->content)) {
        ch->exchange(infer_request(*r), [this, id = r->request_id, answered](error_code ec, response_t& res) {
          answered(infer_reply(id, ec, res));
        });
      } else if (auto* m = std::get_if<msg::shared_memory_request>(&d.value->content)) {
        ch->exchange(shared_memory_call(*m), [this, token = m->token, answered](error_code ec, response_t& res) {
          answered(shared_memory_reply_of(token, ec, res));
        });
      } else if (auto* s = std::get_if<msg::status_request>(&d.value->content)) {
        ch->exchange(request(bhttp::verb::get, "/v2/health/ready"),
                     [this, token = s->token, answered](error_code ec, response_t& res) {
                       answered(ready_reply(token, ec, res));
                     });
      } else {
        idle_.push_back(ch);
      }
    }
  }

  msg::status_reply ready_reply(uint64_t token, error_code ec, const response_t& res) const {
    if (ec) return {token, false, "no answer from " + o_.address + ": " + ec.message()};
    if (res.result_int() == 200) return {token, true, "ready"};
    return {token, false, error_of(res.body())};
  }

  // Triton's system shared-memory extension: register, unregister or status of a region.
  std::shared_ptr<request_t> shared_memory_call(const msg::shared_memory_request& m) const {
    std::string target = "/v2/systemsharedmemory";
    if (!m.name.empty()) target += "/region/" + percent_encoded(m.name);
    switch (m.op) {
      case msg::shared_memory_op::add: {
        auto r = request(bhttp::verb::post, target + "/register");
        r->set(bhttp::field::content_type, "application/json");
        r->body() = json{{"key", m.key}, {"offset", m.offset}, {"byte_size", m.byte_size}}.dump();
        r->prepare_payload();
        return r;
      }
      case msg::shared_memory_op::remove: {
        auto r = request(bhttp::verb::post, target + "/unregister");
        r->prepare_payload();
        return r;
      }
      case msg::shared_memory_op::status:
        break;
    }
    return request(bhttp::verb::get, target + "/status");
  }

  static msg::shared_memory_reply shared_memory_reply_of(uint64_t token, error_code ec, const response_t& res) {
    msg::shared_memory_reply out;
    out.token = token;
    if (ec) {
      out.reason = "http: " + ec.message();
      return out;
    }
    if (res.result_int() != 200) {
      out.reason = "HTTP " + std::to_string(res.result_int()) + ": " + error_of(res.body());
      return out;
    }
    out.ok = true;
    auto listed = json::parse(res.body(), nullptr, false);
    if (!listed.is_array()) return out;
    for (auto& r : listed)
      if (r.is_object())
        out.regions.push_back({r.value("name", ""), r.value("key", ""), r.value("offset", uint64_t{0}),
                               r.value("byte_size", uint64_t{0})});
    return out;
  }

  // A region's name as one path segment: all but RFC 3986's unreserved characters escaped.
  static std::string percent_encoded(const std::string& s) {
    static const char* hex = "0123456789ABCDEF";
    std::string out;
    for (unsigned char c : s) {
      if (std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~') {
        out += static_cast<char>(c);
      } else {
        out += '%';
        out += hex[c >> 4];
        out += hex[c & 15];
      }
    }
    return out;
  }

  // The input through the binary tensor extension, or named in a shared-memory region; binary
  // outputs asked for.
  std::shared_ptr<request_t> infer_request(const msg::client_request& req) const {
    auto name = input_names_.count(req.pipeline) ? input_names_.at(req.pipeline) : std::string("input");
    // What the request says of itself: a partitioned model's start layer, its own SLO.
    std::string own;
    if (req.start_layer > 0) own = "\"start_layer\":" + std::to_string(req.start_layer);
    if (req.slo_ms > 0) own += (own.empty() ? "" : ",") + ("\"slo_ms\":" + std::to_string(std::llround(req.slo_ms)));
    if (!req.shm_inputs.empty()) {
      auto r = request(bhttp::verb::post, "/v2/models/" + req.pipeline + "/infer");
      r->set(bhttp::field::content_type, "application/json");
      r->body() = kserve::shared_memory_request_body(std::to_string(req.request_id), name, req.shm_inputs.front(), own);
      r->prepare_payload();
      return r;
    }
    auto& t = req.inputs.front();
    auto header = kserve::binary_request_header(std::to_string(req.request_id), name, t, own);
    auto r = request(bhttp::verb::post, "/v2/models/" + req.pipeline + "/infer");
    r->set("Inference-Header-Content-Length", std::to_string(header.size()));
    r->set(bhttp::field::content_type, "application/octet-stream");
    r->body() = std::move(header);
    r->body() += t.data.view();
    r->prepare_payload();
    return r;
  }

  static msg::client_reply infer_reply(uint64_t id, error_code ec, const response_t& res) {
    msg::client_reply out;
    out.request_id = id;
    if (ec) {
      out.code = msg::status::error;
      out.reason = "http: " + ec.message();
      return out;
    }
    switch (res.result_int()) {
      case 200: {
        out.code = msg::status::ok;
        // The server's timing, for the breakdown of where the time went.
        std::optional<size_t> header;
        if (auto h = res.find("Inference-Header-Content-Length"); h != res.end())
          header = std::strtoull(std::string(h->value()).c_str(), nullptr, 10);
        if (auto t = kserve::response_timing(res.body(), header)) kserve::apply_timing(*t, out);
        return out;
      }
      case 503:
        out.code = msg::status::dropped;
        break;
      case 429:
        out.code = msg::status::overloaded;
        break;
      default:
        out.code = msg::status::error;
    }
    out.reason = "HTTP " + std::to_string(res.result_int()) + ": " + error_of(res.body());
    return out;
  }

  const load_options& o_;
  size_t connections_;
  std::map<std::string, std::string> input_names_;
  asio::io_context io_{1};
  asio::executor_work_guard<asio::io_context::executor_type> guard_;
  std::optional<asio::ssl::context> tls_;
  endpoint ep_;
  std::thread thread_;
  // Touched on the I/O thread only.
  std::vector<std::shared_ptr<channel>> idle_;
  std::deque<bytes> waiting_;
  answer_queue answers_;
};

}  // namespace

std::unique_ptr<load_connection> make_http_connection(const load_options& o, size_t connections) {
  return std::make_unique<http_connection>(o, connections);
}

size_t http_connections(const load_options& o) {
  return o.concurrency > 0 ? static_cast<size_t>(o.concurrency) : 64;
}

}  // namespace sloserve
