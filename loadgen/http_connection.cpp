#include "loadgen/http_connection.hpp"

#include <array>
#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
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
#include "loadgen/http_reader.hpp"
#include "messages/codec.hpp"
#include "messages/kserve_v2.hpp"

namespace sloserve {
namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using error_code = boost::system::error_code;
using json = nlohmann::json;
using clock_type = std::chrono::steady_clock;
using http1::answer;

// A request as it goes on the wire: the request line, headers and the start of the body written
// by hand, then the tensor's bytes by reference (no copy into the request).
struct outgoing {
  std::string head;
  bytes tail;
};
// Why the exchange failed (empty: it did not), and the response.
using done_fn = std::function<void(const std::string& why, answer&)>;

// Where the channels connect and how long an exchange may take.
struct endpoint {
  tcp::resolver::results_type at;
  std::string host;                   // for TLS: the name (or address) the certificate must name
  asio::ssl::context* tls = nullptr;  // null: plaintext
  std::chrono::milliseconds timeout{60000};
};

// One keep-alive connection with one exchange at a time, opened on first use and again after the
// server closed it. A request on a reused connection that the server had closed meanwhile (its
// idle timeout) is sent once more on a fresh one: the server read none of it. An exchange past
// its deadline is ended by expire(), which the connection calls for every channel twice a second.
class channel {
 public:
  virtual ~channel() = default;
  virtual void exchange(std::shared_ptr<const outgoing> req, done_fn done) = 0;
  virtual void expire(clock_type::time_point now) = 0;
};

template <class Stream>
class channel_on final : public channel, public std::enable_shared_from_this<channel_on<Stream>> {
 public:
  static constexpr bool tls = !std::is_same_v<Stream, tcp::socket>;

  channel_on(asio::io_context& io, const endpoint& ep) : io_(io), ep_(ep) {}

  void exchange(std::shared_ptr<const outgoing> req, done_fn done) override {
    req_ = std::move(req);
    done_ = std::move(done);
    deadline_ = clock_type::now() + ep_.timeout;
    if (stream_) {
      reused_ = true;
      return write();
    }
    open();
  }

  // Closing the socket ends the pending operation, which then reports the timeout.
  void expire(clock_type::time_point now) override {
    if (!done_ || now < deadline_ || !stream_) return;
    timed_out_ = true;
    error_code ignored;
    lowest().close(ignored);
  }

 private:
  tcp::socket& lowest() {
    if constexpr (tls)
      return stream_->next_layer();
    else
      return *stream_;
  }

  void open() {
    reused_ = false;
    reader_.reset();
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
    deadline_ = clock_type::now() + std::min(ep_.timeout, std::chrono::milliseconds(10000));
    asio::async_connect(lowest(), ep_.at, [self = this->shared_from_this()](error_code ec, const tcp::endpoint&) {
      if (ec) return self->finish(ec);
      self->lowest().set_option(tcp::no_delay(true), ec);
      self->deadline_ = clock_type::now() + self->ep_.timeout;
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
    std::array<asio::const_buffer, 2> parts{asio::buffer(req_->head),
                                            asio::buffer(req_->tail.data(), req_->tail.size())};
    asio::async_write(*stream_, parts, [self = this->shared_from_this()](error_code ec, size_t) {
      if (ec) return self->failed(ec);
      self->read();
    });
  }

  void read() {
    size_t n = reader_.want();
    stream_->async_read_some(asio::buffer(reader_.prepare(n), n),
                             [self = this->shared_from_this()](error_code ec, size_t got) {
                               self->reader_.commit(got);
                               if (ec == asio::error::eof || ec == asio::ssl::error::stream_truncated) {
                                 self->reader_.end();
                               } else if (ec) {
                                 return self->failed(ec);
                               }
                               switch (self->reader_.parse()) {
                                 case http1::response_reader::progress::done:
                                   self->res_ = self->reader_.take();
                                   return self->finish({});
                                 case http1::response_reader::progress::bad:
                                   self->bad_ = true;
                                   return self->finish(asio::error::invalid_argument);
                                 case http1::response_reader::progress::more:
                                   if (ec) return self->failed(ec);
                                   return self->read();
                               }
                             });
  }

  // A stale keep-alive connection is opened again and the request resent.
  void failed(error_code ec) {
    bool stale = ec == asio::error::eof || ec == asio::ssl::error::stream_truncated ||
                 ec == asio::error::connection_reset || ec == asio::error::broken_pipe;
    if (reused_ && stale && !timed_out_ && !reader_.got_some()) {
      drop();
      return open();
    }
    finish(ec);
  }

  void finish(error_code ec) {
    std::string why;
    if (timed_out_)
      why = "no answer within " + std::to_string(ep_.timeout.count()) + " ms";
    else if (bad_)
      why = reader_.why();
    else if (ec)
      why = ec.message();
    if (!why.empty() || !res_.keep_alive) drop();
    timed_out_ = bad_ = false;
    auto done = std::move(done_);
    done_ = nullptr;
    req_.reset();
    if (!why.empty()) res_ = {};
    done(why, res_);
    res_ = {};
  }

  void drop() {
    if (!stream_) return;
    error_code ignored;
    lowest().shutdown(tcp::socket::shutdown_both, ignored);
    lowest().close(ignored);
    stream_.reset();
    reader_.reset();
  }

  asio::io_context& io_;
  const endpoint& ep_;
  std::optional<Stream> stream_;
  http1::response_reader reader_;
  std::shared_ptr<const outgoing> req_;
  answer res_;
  done_fn done_;
  clock_type::time_point deadline_;
  bool reused_ = false, timed_out_ = false, bad_ = false;
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
        idle_.push_back(std::make_shared<channel_on<asio::ssl::stream<tcp::socket>>>(io_, ep_));
      else
        idle_.push_back(std::make_shared<channel_on<tcp::socket>>(io_, ep_));
    }
    all_ = idle_;
    common_ = "Host: " + o_.address + "\r\n";
    if (!o_.http_token.empty()) common_ += "Authorization: Bearer " + o_.http_token + "\r\n";
    if (!o_.tenant.empty()) common_ += "Sloserve-Tenant: " + o_.tenant + "\r\n";
    expire_every_half_second();
    thread_ = std::thread([this] { io_.run(); });
    std::promise<std::string> probed;
    asio::post(io_, [this, &probed] {
      auto ch = idle_.back();
      idle_.pop_back();
      ch->exchange(request("GET", "/v2/health/live"), [this, ch, &probed](const std::string& why, answer&) {
        idle_.push_back(ch);
        probed.set_value(why);
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
  // `method` `target` with the headers every request carries, `headers` (each ending in CRLF),
  // and a body of `body` followed by `tail`.
  std::shared_ptr<const outgoing> request(std::string_view method, std::string_view target,
                                          std::string_view headers = {}, std::string_view body = {},
                                          bytes tail = {}) const {
    auto r = std::make_shared<outgoing>();
    auto& h = r->head;
    h.reserve(128 + common_.size() + headers.size() + body.size());
    h.append(method).append(" ").append(target).append(" HTTP/1.1\r\n").append(common_).append(headers);
    if (method != "GET") h.append("Content-Length: ").append(std::to_string(body.size() + tail.size())).append("\r\n");
    h.append("\r\n").append(body);
    r->tail = std::move(tail);
    return r;
  }

  // Ends the exchanges past their deadline, twice a second while the connection lives.
  void expire_every_half_second() {
    expiry_.expires_after(std::chrono::milliseconds(500));
    expiry_.async_wait([this](error_code ec) {
      if (ec) return;
      auto now = clock_type::now();
      for (auto& ch : all_) ch->expire(now);
      expire_every_half_second();
    });
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
        ch->exchange(infer_request(*r), [this, id = r->request_id, answered](const std::string& why, answer& res) {
          answered(infer_reply(id, why, res));
        });
      } else if (auto* m = std::get_if<msg::shared_memory_request>(&d.value->content)) {
        ch->exchange(shared_memory_call(*m), [this, token = m->token, answered](const std::string& why, answer& res) {
          answered(shared_memory_reply_of(token, why, res));
        });
      } else if (auto* s = std::get_if<msg::status_request>(&d.value->content)) {
        ch->exchange(request("GET", "/v2/health/ready"),
                     [this, token = s->token, answered](const std::string& why, answer& res) {
                       answered(ready_reply(token, why, res));
                     });
      } else {
        idle_.push_back(ch);
      }
    }
  }

  msg::status_reply ready_reply(uint64_t token, const std::string& why, const answer& res) const {
    if (!why.empty()) return {token, false, "no answer from " + o_.address + ": " + why};
    if (res.status == 200) return {token, true, "ready"};
    return {token, false, error_of(res.body)};
  }

  // Triton's system shared-memory extension: register, unregister or status of a region.
  std::shared_ptr<const outgoing> shared_memory_call(const msg::shared_memory_request& m) const {
    std::string target = "/v2/systemsharedmemory";
    if (!m.name.empty()) target += "/region/" + percent_encoded(m.name);
    switch (m.op) {
      case msg::shared_memory_op::add:
        return request("POST", target + "/register", "Content-Type: application/json\r\n",
                       json{{"key", m.key}, {"offset", m.offset}, {"byte_size", m.byte_size}}.dump());
      case msg::shared_memory_op::remove:
        return request("POST", target + "/unregister");
      case msg::shared_memory_op::status:
        break;
    }
    return request("GET", target + "/status");
  }

  static msg::shared_memory_reply shared_memory_reply_of(uint64_t token, const std::string& why, const answer& res) {
    msg::shared_memory_reply out;
    out.token = token;
    if (!why.empty()) {
      out.reason = "http: " + why;
      return out;
    }
    if (res.status != 200) {
      out.reason = "HTTP " + std::to_string(res.status) + ": " + error_of(res.body);
      return out;
    }
    out.ok = true;
    auto listed = json::parse(res.body, nullptr, false);
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
  std::shared_ptr<const outgoing> infer_request(const msg::client_request& req) const {
    auto name = input_names_.count(req.pipeline) ? input_names_.at(req.pipeline) : std::string("input");
    // What the request says of itself: a partitioned model's start layer, its own SLO.
    std::string own;
    if (req.start_layer > 0) own = "\"start_layer\":" + std::to_string(req.start_layer);
    if (req.slo_ms > 0) own += (own.empty() ? "" : ",") + ("\"slo_ms\":" + std::to_string(std::llround(req.slo_ms)));
    auto target = "/v2/models/" + req.pipeline + "/infer";
    if (!req.shm_inputs.empty())
      return request(
          "POST", target, "Content-Type: application/json\r\n",
          kserve::shared_memory_request_body(std::to_string(req.request_id), name, req.shm_inputs.front(), own));
    auto& t = req.inputs.front();
    auto header = kserve::binary_request_header(std::to_string(req.request_id), name, t, own);
    return request("POST", target,
                   "Inference-Header-Content-Length: " + std::to_string(header.size()) +
                       "\r\nContent-Type: application/octet-stream\r\n",
                   header, t.data);
  }

  static msg::client_reply infer_reply(uint64_t id, const std::string& why, const answer& res) {
    msg::client_reply out;
    out.request_id = id;
    if (!why.empty()) {
      out.code = msg::status::error;
      out.reason = "http: " + why;
      return out;
    }
    switch (res.status) {
      case 200: {
        out.code = msg::status::ok;
        // The server's timing, for the breakdown of where the time went.
        if (auto t = kserve::response_timing(res.body, res.inference_header)) kserve::apply_timing(*t, out);
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
    out.reason = "HTTP " + std::to_string(res.status) + ": " + error_of(res.body);
    return out;
  }

  const load_options& o_;
  size_t connections_;
  std::map<std::string, std::string> input_names_;
  asio::io_context io_{1};
  asio::executor_work_guard<asio::io_context::executor_type> guard_;
  std::optional<asio::ssl::context> tls_;
  endpoint ep_;
  std::string common_;  // Host, and Authorization and Sloserve-Tenant where given, each with CRLF
  asio::steady_timer expiry_{io_};
  std::thread thread_;
  // Touched on the I/O thread only.
  std::vector<std::shared_ptr<channel>> all_, idle_;
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
