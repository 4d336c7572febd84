#include "actors/http_ingress.hpp"

#include <httplib.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <future>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "actors/bounded_pool.hpp"
#include "actors/kserve_call.hpp"
#include "messages/curve.hpp"
#include "messages/kserve_v2.hpp"

namespace sloserve {

namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

// Threads serving connections. A connection holds one while it is open (keep-alive), so this is
// also how many clients are served at once; up to `waiting_connections` more wait for one, and
// past them the server accepts no more until one is taken (the kernel's backlog holds the rest).
constexpr size_t pool_threads = 64;
constexpr size_t waiting_connections = 256;

// httplib's task queue over a bounded_pool.
class connection_pool final : public httplib::TaskQueue {
 public:
  connection_pool() : pool_(pool_threads, waiting_connections) {}
  void enqueue(std::function<void()> fn) override { pool_.enqueue(std::move(fn)); }
  void shutdown() override { pool_.shutdown(); }

 private:
  bounded_pool pool_;
};

void reply(httplib::Response& res, int code, const std::string& body, const char* type = "application/json") {
  res.status = code;
  res.set_content(body, type);
}

void refuse(httplib::Response& res, int code, const std::string& reason) {
  reply(res, code, kserve::error_body(reason));
}

// Sends what `send` builds with a sink for the reply and waits for it; nullopt past `timeout`.
template <class Reply, class Send>
std::optional<Reply> ask(Send send, std::chrono::milliseconds timeout) {
  auto promise = std::make_shared<std::promise<Reply>>();
  auto future = promise->get_future();
  send(std::make_shared<const std::function<void(Reply)>>([promise](Reply r) { promise->set_value(std::move(r)); }));
  if (future.wait_for(timeout) != std::future_status::ready) return std::nullopt;
  return future.get();
}

json tensor_metadata(const std::string& name, const tensor_spec& t) {
  return {{"name", name}, {"datatype", kserve::datatype_name(t.type)}, {"shape", t.shape}};
}

}  // namespace

int http_status_of(const msg::client_reply& r) {
  switch (r.code) {
    case msg::status::ok:
      return 200;
    case msg::status::dropped:
      return 503;
    case msg::status::overloaded:
      return 429;
    case msg::status::error:
      return r.reason.rfind("not ready", 0) == 0 ? 503 : 500;
  }
  return 500;
}

struct http_ingress::impl {
  std::shared_ptr<const cluster_config> cfg;
  frontend_actor frontend;
  std::string node;
  std::function<std::string()> metrics;
  std::function<void(std::string_view, std::string_view)> count_reply;
  statistics_source statistics;
  std::unique_ptr<httplib::Server> owned;  // httplib::SSLServer under TLS
  httplib::Server* server_ptr = nullptr;
  std::set<std::string> tokens;  // bearer tokens admitted; empty: no token needed
  std::thread thread;
  std::atomic<uint64_t> next_id{1};

  std::optional<msg::status_reply> readiness(const std::string& pipeline) {
    return ask<msg::status_reply>(
        [&](auto sink) {
          caf::anon_send(frontend, status_query{"http", msg::status_request{0}, pipeline, std::move(sink)});
        },
        2000ms);
  }

  void ready(const std::string& pipeline, httplib::Response& res) {
    auto r = readiness(pipeline);
    if (!r) return refuse(res, 503, "the frontend did not answer within 2 s");
    if (!r->ready) return refuse(res, 503, r->detail);
    reply(res, 200, json{{"ready", true}}.dump());
  }

  // Triton's statistics extension: every pipeline's counts and durations (or `name`'s alone).
  void model_statistics(const std::string& name, httplib::Response& res) {
    if (!name.empty() && !cfg->find_pipeline(name)) return refuse(res, 404, "no pipeline '" + name + "'");
    auto d = [](const pipeline_statistics::duration& x) { return json{{"count", x.count}, {"ns", x.ns}}; };
    json none{{"count", 0}, {"ns", 0}};
    json models = json::array();
    for (auto& st : statistics ? statistics(name) : std::vector<pipeline_statistics>{}) {
      models.push_back({{"name", st.name},
                        {"version", "1"},
                        {"last_inference", st.last_inference_ms},
                        {"inference_count", st.inference_count},
                        {"execution_count", st.execution_count},
                        {"inference_stats",
                         {{"success", d(st.success)},
                          {"fail", d(st.fail)},
                          {"queue", d(st.queue)},
                          {"compute_input", none},
                          {"compute_infer", d(st.compute)},
                          {"compute_output", none},
                          {"cache_hit", none},
                          {"cache_miss", none}}},
                        {"batch_stats", json::array()}});
    }
    reply(res, 200, json{{"model_stats", models}}.dump());
  }

  // Triton's repository extension: every pipeline, its version and whether it serves now (with
  // the reason when not); a body {"ready": true} lists the ready ones alone.
  void repository_index(const httplib::Request& req, httplib::Response& res) {
    bool ready_only = false;
    if (!req.body.empty()) {
      auto body = json::parse(req.body, nullptr, false);
      if (body.is_discarded() || !body.is_object()) return refuse(res, 400, "the index request must be a JSON object");
      if (body.contains("ready") && !body["ready"].is_boolean()) return refuse(res, 400, "'ready' must be a boolean");
      ready_only = body.value("ready", false);
    }
    json out = json::array();
    for (auto& p : cfg->pipelines) {
      auto r = readiness(p.name);
      bool up = r && r->ready;
      if (ready_only && !up) continue;
      json e{{"name", p.name}, {"version", "1"}, {"state", up ? "READY" : "UNAVAILABLE"}};
      if (!up) e["reason"] = r ? r->detail : std::string("the frontend did not answer within 2 s");
      out.push_back(std::move(e));
    }
    reply(res, 200, out.dump());
  }

  void model_metadata(const std::string& name, httplib::Response& res) {
    auto* p = cfg->find_pipeline(name);
    if (!p) return refuse(res, 404, "no pipeline '" + name + "'");
    auto sig = kserve::signature_of(*cfg, *p);
    json outputs = json::array();
    for (auto& o : sig.outputs) outputs.push_back(tensor_metadata(o.name, o.spec));
    json j{{"name", p->name},
           {"versions", {"1"}},
           {"platform", "sloserve_pipeline"},
           {"inputs", {tensor_metadata(sig.input.name, sig.input.spec)}},
           {"outputs", outputs}};
    reply(res, 200, j.dump());
  }

  void infer(const std::string& name, const httplib::Request& req, httplib::Response& res) {
    auto* p = cfg->find_pipeline(name);
    if (!p) return refuse(res, 400, "unknown pipeline '" + name + "'");
    std::optional<size_t> header_length;
    if (req.has_header("Inference-Header-Content-Length")) {
      auto v = req.get_header_value("Inference-Header-Content-Length");
      try {
        size_t used = 0;
        header_length = std::stoull(v, &used);
        if (used != v.size()) throw std::invalid_argument(v);
      } catch (const std::exception&) {
        return refuse(res, 400, "Inference-Header-Content-Length '" + v + "' is not a byte count");
      }
    }
    auto parsed = kserve::parse_infer_request(req.body, header_length);
    if (!parsed) return refuse(res, 400, parsed.error());
    auto call = kserve::prepare_call(*cfg, *p, std::move(parsed->inputs), 0,
                                     {parsed->start_layer, parsed->slo_ms, std::move(parsed->outputs)});
    if (!call) return refuse(res, 400, call.error());
    for (auto& r : call->requests) r.request_id = next_id++;
    // The frontend answers every request by its deadline and reply_grace_ms; this is a backstop.
    auto wait = std::chrono::milliseconds(static_cast<int64_t>(p->slo_ms) + 2 * cfg->runtime.reply_grace_ms + 5000);
    auto r = ask<msg::client_reply>(
        [&](auto sink) {
          auto requests = std::move(call->requests);
          auto gather = kserve::gather_replies(
              requests.size(), [cfg = cfg, p, call = std::move(*call), sink](std::vector<msg::client_reply> replies) {
                (*sink)(kserve::combine_replies(*cfg, *p, call, std::move(replies)));
              });
          for (size_t i = 0; i < requests.size(); ++i)
            caf::anon_send(frontend, ingress{"http " + req.remote_addr, std::move(requests[i]), gather(i)});
        },
        wait);
    if (!r) return refuse(res, 504, "no reply from the frontend within " + std::to_string(wait.count()) + " ms");
    if (r->code != msg::status::ok) return refuse(res, http_status_of(*r), r->reason);
    auto timing = kserve::timing_of(r->total_ms, r->timings);
    auto out = kserve::make_infer_response(p->name, parsed->id, r->outputs, parsed->binary_outputs, &timing);
    if (out.header_length) {
      res.set_header("Inference-Header-Content-Length", std::to_string(*out.header_length));
      return reply(res, 200, out.body, "application/octet-stream");
    }
    reply(res, 200, out.body);
  }

  httplib::Server& server() { return *server_ptr; }

  // A path's /versions/{v}, where it has one, names a version the pipelines have.
  bool version_known(const httplib::Request& req, httplib::Response& res) {
    auto v = req.matches.size() > 2 ? req.matches[2].str() : std::string();
    if (kserve::known_version(v)) return true;
    refuse(res, 404, "pipeline '" + req.matches[1].str() + "' has no version '" + v + "'; its versions: 1");
    return false;
  }

  // Under security, everything but the health probes needs one of the bearer tokens. Checked
  // once the request is read whole, so that a refused client reads its 401 on a connection that
  // goes on.
  bool admitted(const httplib::Request& req, httplib::Response& res) {
    if (tokens.empty()) return true;
    auto auth = req.get_header_value("Authorization");
    if (auth.rfind("Bearer ", 0) == 0 && tokens.count(auth.substr(7))) return true;
    res.set_header("WWW-Authenticate", "Bearer");
    refuse(res, 401, auth.empty() ? "an Authorization: Bearer token is required" : "the bearer token is not admitted");
    return false;
  }

  void routes() {
    server().Get("/v2/health/live", [](const httplib::Request&, httplib::Response& res) {
      reply(res, 200, json{{"live", true}}.dump());
    });
    if (metrics)
      server().Get("/metrics", [this](const httplib::Request& req, httplib::Response& res) {
        if (admitted(req, res)) reply(res, 200, metrics(), "text/plain; version=0.0.4; charset=utf-8");
      });
    if (!frontend) return errors();
    server().Get("/v2/health/ready", [this](const httplib::Request&, httplib::Response& res) { ready("", res); });
    server().Get("/v2", [this](const httplib::Request& req, httplib::Response& res) {
      if (!admitted(req, res)) return;
      reply(res, 200,
            json{{"name", "sloserve"},
                 {"version", SLOSERVE_VERSION},
                 {"extensions", {"binary_tensor_data", "statistics", "model_repository"}}}
                .dump());
    });
    // Triton's extensions, before the model paths (a pipeline named "stats" is shadowed).
    server().Get("/v2/models/stats", [this](const httplib::Request& req, httplib::Response& res) {
      if (admitted(req, res)) model_statistics("", res);
    });
    server().Post("/v2/repository/index", [this](const httplib::Request& req, httplib::Response& res) {
      if (admitted(req, res)) repository_index(req, res);
    });
    // Each path also under /versions/{v}: the pipelines' one version, "1".
    const std::string model = R"(/v2/models/([^/]+)(?:/versions/([^/]+))?)";
    server().Get(model + "/stats", [this](const httplib::Request& req, httplib::Response& res) {
      if (admitted(req, res) && version_known(req, res)) model_statistics(req.matches[1], res);
    });
    server().Get(model, [this](const httplib::Request& req, httplib::Response& res) {
      if (admitted(req, res) && version_known(req, res)) model_metadata(req.matches[1], res);
    });
    server().Get(model + "/ready", [this](const httplib::Request& req, httplib::Response& res) {
      if (!admitted(req, res) || !version_known(req, res)) return;
      auto name = req.matches[1].str();
      if (!cfg->find_pipeline(name)) return refuse(res, 404, "no pipeline '" + name + "'");
      ready(name, res);
    });
    server().Post(model + "/infer", [this](const httplib::Request& req, httplib::Response& res) {
      if (admitted(req, res) && version_known(req, res)) infer(req.matches[1], req, res);
    });
    errors();
  }

  void errors() {
    // What httplib answers itself (413 for a body over the limit, 400 for a bad request line,
    // 404 for other paths) carries the protocol's error body too.
    server().set_error_handler([](const httplib::Request&, httplib::Response& res) {
      if (!res.body.empty()) return;
      std::string what = res.status == 413   ? "Payload Too Large: over runtime.max_payload_bytes"
                         : res.status == 404 ? "Not Found: the KServe v2 paths are under /v2, metrics at /metrics"
                         : res.status == 414 ? "URI Too Long"
                                             : "Bad Request";
      res.set_content(kserve::error_body(what), "application/json");
    });
    server().set_exception_handler([this](const httplib::Request&, httplib::Response& res, std::exception_ptr e) {
      std::string what = "internal error";
      try {
        std::rethrow_exception(e);
      } catch (const std::exception& x) {
        what = x.what();
      } catch (...) {
      }
      spdlog::warn("{}: http: {}", node, what);
      refuse(res, 500, what);
    });
  }
};

http_ingress::http_ingress(std::shared_ptr<const cluster_config> cfg, frontend_actor frontend, std::string node,
                           std::function<std::string()> metrics,
                           std::function<void(std::string_view, std::string_view)> count_reply,
                           statistics_source statistics)
    : impl_(std::make_unique<impl>()) {
  impl_->cfg = std::move(cfg);
  impl_->frontend = std::move(frontend);
  impl_->node = std::move(node);
  impl_->metrics = std::move(metrics);
  impl_->count_reply = std::move(count_reply);
  impl_->statistics = std::move(statistics);
}

http_ingress::~http_ingress() {
  stop();
}

expected<int> http_ingress::start(const std::string& host_port) {
  auto colon = host_port.rfind(':');
  auto host = host_port.substr(0, colon);
  int port = std::stoi(host_port.substr(colon + 1));
  if (host == "*") host = "0.0.0.0";
  auto& sec = impl_->cfg->security;
  if (sec.enabled() && !sec.tls_cert.empty()) {
    auto tls = std::make_unique<httplib::SSLServer>(sec.tls_cert.c_str(), sec.tls_key.c_str());
    if (!tls->is_valid()) return fail("http: cannot use TLS certificate " + sec.tls_cert + " with key " + sec.tls_key);
    impl_->owned = std::move(tls);
  } else {
    impl_->owned = std::make_unique<httplib::Server>();
  }
  impl_->server_ptr = impl_->owned.get();
  if (sec.enabled())
    for (auto& path : sec.tokens) {
      auto token = read_token_file(path);
      if (!token) return fail("http: " + token.error());
      impl_->tokens.insert(*token);
    }
  if (sec.enabled() && !sec.http_secured())
    spdlog::warn("{}: security is on but the HTTP ingress has no TLS certificate and tokens: it serves {} only",
                 impl_->node, host_port);
  auto& s = impl_->server();
  s.new_task_queue = [] { return new connection_pool(); };
  s.set_payload_max_length(static_cast<size_t>(impl_->cfg->runtime.max_payload_bytes));
  // Slow or stalled clients give their thread back.
  s.set_read_timeout(5s);
  s.set_write_timeout(5s);
  s.set_keep_alive_timeout(5);
  s.set_keep_alive_max_count(10000);
  s.set_tcp_nodelay(true);  // a reply goes out whole at once, not after a delayed ACK
  if (impl_->count_reply)
    s.set_logger([count = impl_->count_reply](const httplib::Request&, const httplib::Response& res) {
      count("http", std::to_string(res.status));
    });
  impl_->routes();
  int bound = port == 0 ? s.bind_to_any_port(host) : (s.bind_to_port(host, port) ? port : -1);
  if (bound <= 0) return fail("http: cannot bind " + host_port);
  impl_->thread = std::thread([this] { impl_->server().listen_after_bind(); });
  return bound;
}

void http_ingress::stop() {
  if (!impl_ || !impl_->thread.joinable()) return;
  impl_->server().stop();
  impl_->thread.join();
}

}  // namespace sloserve
