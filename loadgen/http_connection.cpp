#include "loadgen/http_connection.hpp"

#include <httplib.h>

#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>

#include "loadgen/answer_queue.hpp"
#include "messages/codec.hpp"
#include "messages/kserve_v2.hpp"

namespace sloserve {
namespace {

using json = nlohmann::json;

class http_connection final : public load_connection {
 public:
  http_connection(const load_options& o, size_t connections) : o_(o), connections_(std::max<size_t>(1, connections)) {
    input_names_[o.pipeline] = o.input_name;
    for (auto& m : o.mix) input_names_[m.pipeline] = m.input_name;
  }

  ~http_connection() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    work_cv_.notify_all();
    for (auto& t : workers_) t.join();
  }

  status connect() override {
    auto probe = client();
    if (!probe->Get("/v2/health/live"))
      return fail("no KServe v2 HTTP ingress answers at " + o_.address + " (nodes[].http)");
    for (size_t i = 0; i < connections_; ++i) workers_.emplace_back([this] { serve(); });
    return {};
  }

  void send(bytes frame) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      work_.push_back(std::move(frame));
    }
    work_cv_.notify_one();
  }

  bool recv(std::string& out, int timeout_ms) override { return answers_.pop(out, timeout_ms); }

  std::string refused() override { return {}; }

 private:
  std::unique_ptr<httplib::Client> client() const {
    auto c = std::make_unique<httplib::Client>((o_.http_ca.empty() ? "http://" : "https://") + o_.address);
    if (!o_.http_ca.empty()) c->set_ca_cert_path(o_.http_ca.c_str());
    if (!o_.http_token.empty()) c->set_bearer_token_auth(o_.http_token.c_str());
    c->set_keep_alive(true);
    c->set_tcp_nodelay(true);
    c->set_read_timeout(std::chrono::milliseconds(static_cast<int64_t>(o_.grace_ms) + 60000));
    return c;
  }

  // One keep-alive connection: a request at a time.
  void serve() {
    auto c = client();
    msg::decode_limits limits;
    limits.max_payload_bytes = 1ULL << 32;
    while (true) {
      bytes frame;
      {
        std::unique_lock<std::mutex> lock(mu_);
        work_cv_.wait(lock, [&] { return stopping_ || !work_.empty(); });
        if (stopping_) return;
        frame = std::move(work_.front());
        work_.pop_front();
      }
      auto d = msg::decode(frame.view(), limits);
      if (!d.value) continue;
      std::string answer;
      if (auto* r = std::get_if<msg::client_request>(&d.value->content))
        answer = msg::encode_frame({{}, infer(*c, *r)}).str();
      else if (auto* s = std::get_if<msg::status_request>(&d.value->content))
        answer = msg::encode_frame({{}, ready(*c, s->token)}).str();
      else
        continue;
      answers_.push(std::move(answer));
    }
  }

  msg::status_reply ready(httplib::Client& c, uint64_t token) {
    auto r = c.Get("/v2/health/ready");
    if (!r) return {token, false, "no answer from " + o_.address + ": " + httplib::to_string(r.error())};
    if (r->status == 200) return {token, true, "ready"};
    return {token, false, error_of(r->body)};
  }

  static std::string error_of(const std::string& body) {
    auto j = json::parse(body, nullptr, false);
    return j.is_object() && j.contains("error") && j["error"].is_string() ? j["error"].get<std::string>() : body;
  }

  msg::client_reply infer(httplib::Client& c, const msg::client_request& req) {
    msg::client_reply out;
    out.request_id = req.request_id;
    auto& t = req.inputs.front();
    auto name = input_names_.count(req.pipeline) ? input_names_.at(req.pipeline) : std::string("input");
    auto header = json{{"id", std::to_string(req.request_id)},
                       {"inputs",
                        {{{"name", name},
                          {"shape", t.shape},
                          {"datatype", kserve::datatype_name(t.type)},
                          {"parameters", {{"binary_data_size", t.data.size()}}}}}},
                       {"parameters", {{"binary_data_output", true}}}}
                      .dump();
    std::string body = header;
    body += t.data.view();
    httplib::Headers h{{"Inference-Header-Content-Length", std::to_string(header.size())}};
    auto r = c.Post("/v2/models/" + req.pipeline + "/infer", h, body, "application/octet-stream");
    if (!r) {
      out.code = msg::status::error;
      out.reason = "http: " + httplib::to_string(r.error());
      return out;
    }
    switch (r->status) {
      case 200: {
        out.code = msg::status::ok;
        // The server's timing, for the breakdown of where the time went.
        std::optional<size_t> header;
        if (r->has_header("Inference-Header-Content-Length"))
          header = std::strtoull(r->get_header_value("Inference-Header-Content-Length").c_str(), nullptr, 10);
        if (auto t = kserve::response_timing(r->body, header)) kserve::apply_timing(*t, out);
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
    out.reason = "HTTP " + std::to_string(r->status) + ": " + error_of(r->body);
    return out;
  }

  const load_options& o_;
  size_t connections_;
  std::map<std::string, std::string> input_names_;
  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable work_cv_;
  std::deque<bytes> work_;
  answer_queue answers_;
  bool stopping_ = false;
};

}  // namespace

std::unique_ptr<load_connection> make_http_connection(const load_options& o, size_t connections) {
  return std::make_unique<http_connection>(o, connections);
}

size_t http_connections(const load_options& o) {
  return o.concurrency > 0 ? static_cast<size_t>(o.concurrency) : 64;
}

}  // namespace sloserve
