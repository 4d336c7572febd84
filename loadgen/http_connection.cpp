#include "loadgen/http_connection.hpp"

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/steady_timer.hpp>
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
#include "loadgen/http_channel.hpp"
#include "messages/codec.hpp"
#include "messages/kserve_v2.hpp"

namespace sloserve {
namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using error_code = boost::system::error_code;
using json = nlohmann::json;
using http1::answer;
using http1::channel;
using http1::clock_type;
using http1::endpoint;
using http1::outgoing;

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
      idle_.push_back(http1::make_channel(io_, ep_));
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

  // On the I/O thread: an answer for the lane. Those made while the thread works through what is
  // ready go over together, with one wake-up of the lane (not one per answer).
  void hand_over(std::string frame) {
    made_.push_back(std::move(frame));
    if (std::exchange(hand_over_posted_, true)) return;
    asio::post(io_, [this] {
      hand_over_posted_ = false;
      answers_.push_all(made_);
    });
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
        hand_over(msg::encode_frame({{}, std::move(reply)}).str());
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
        ch->exchange(request("GET", s->pipeline.empty() ? std::string("/v2/health/ready")
                                                        : "/v2/models/" + percent_encoded(s->pipeline) + "/ready"),
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
  std::vector<std::string> made_;  // answers not yet handed over
  bool hand_over_posted_ = false;
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
