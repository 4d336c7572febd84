#include "actors/http_ingress.hpp"

#include <spdlog/spdlog.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <future>
#include <nlohmann/json.hpp>
#include <set>

#include "actors/bounded_pool.hpp"
#include "actors/http_models.hpp"
#include "actors/http_server.hpp"
#include "actors/http_settings.hpp"
#include "actors/http_shared_memory.hpp"
#include "actors/kserve_call.hpp"
#include "ingress/shm_regions.hpp"
#include "messages/curve.hpp"
#include "messages/kserve_v2.hpp"

namespace sloserve {

namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

using http::request;
using http::responder;

http::response reply(int code, std::string body, const char* type = "application/json") {
  return {code, std::move(body), type};
}

http::response refusal(int code, const std::string& reason) {
  return reply(code, kserve::error_body(reason));
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
  std::shared_ptr<config_source> source;  // what the node runs now (`sloserve apply` swaps it)
  frontend_actor frontend;
  std::string node;
  std::function<std::string()> metrics;
  std::function<void(std::string_view, std::string_view)> count_reply;
  statistics_source statistics;
  std::function<void(std::string_view)> count_refusal;
  // What waits (readiness, statistics, metrics) runs here, off the connections' threads; past
  // its queue, such requests are refused with 503.
  bounded_pool waiting{4, 256};
  std::unique_ptr<http::server> server;
  kserve::token_table tokens;               // bearer tokens admitted (none: no token needed) and their tenants
  std::shared_ptr<shm::registry> regions;   // clients' shared memory; null or off: refused
  std::shared_ptr<tracing::tracer> tracer;  // Triton's trace extension; null: none
  kserve::intake_admit intake;              // the node's intake gate; empty: none
  std::atomic<uint64_t> next_id{1};

  bool shared_memory_on() const { return regions && regions->enabled(); }

  std::optional<msg::status_reply> readiness(const std::string& pipeline) {
    return ask<msg::status_reply>(
        [&](auto sink) {
          caf::anon_send(frontend, status_query{"http", msg::status_request{0}, pipeline, std::move(sink)});
        },
        2000ms);
  }

  http::response ready(const std::string& pipeline) {
    auto r = readiness(pipeline);
    if (!r) return refusal(503, "the frontend did not answer within 2 s");
    if (!r->ready) return refusal(503, r->detail);
    return reply(200, json{{"ready", true}}.dump());
  }

  // Triton's statistics extension: every pipeline's counts and durations (or `name`'s alone).
  http::response model_statistics(const std::string& name) {
    auto cfg = source->get();
    if (!name.empty() && !cfg->find_pipeline(name)) return refusal(404, "no pipeline '" + name + "'");
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
                          {"cache_hit", d(st.cache_hit)},
                          {"cache_miss", d(st.cache_miss)}}},
                        {"batch_stats", json::array()}});
    }
    return reply(200, json{{"model_stats", models}}.dump());
  }

  // Triton's repository extension: every pipeline, its version and whether it serves now (with
  // the reason when not); a body {"ready": true} lists the ready ones alone.
  http::response repository_index(const request& req) {
    auto cfg = source->get();
    bool ready_only = false;
    if (!req.body.empty()) {
      auto body = json::parse(req.body, nullptr, false);
      if (body.is_discarded() || !body.is_object()) return refusal(400, "the index request must be a JSON object");
      if (body.contains("ready") && !body["ready"].is_boolean()) return refusal(400, "'ready' must be a boolean");
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
    return reply(200, out.dump());
  }

  // Checks and sends the request to the frontend; `respond` answers once it replies (on the
  // frontend's thread), or once the backstop passes.
  void infer(const std::string& name, request& req, responder respond, uint32_t version) {
    auto cfg = source->get();
    auto* p = cfg->find_pipeline(name);
    if (!p) return respond(refusal(400, "unknown pipeline '" + name + "'"));
    std::optional<size_t> header_length;
    if (auto* v = req.header("Inference-Header-Content-Length")) {
      try {
        size_t used = 0;
        if (v->empty() || (*v)[0] == '-' || (*v)[0] == '+') throw std::invalid_argument(*v);
        header_length = std::stoull(*v, &used);
        if (used != v->size()) throw std::invalid_argument(*v);
      } catch (const std::exception&) {
        return respond(refusal(400, "Inference-Header-Content-Length '" + *v + "' is not a byte count"));
      }
    }
    // The body moves into the inputs it carries: binary tensors are views of it, not copies.
    auto parsed = kserve::parse_infer_body(bytes(std::move(req.body)), header_length);
    if (!parsed) return respond(refusal(400, parsed.error()));
    auto shared = kserve::take_shared_memory(shared_memory_on() ? regions.get() : nullptr,
                                             kserve::shm_owner(tokens, req.header("Authorization")), parsed->inputs,
                                             parsed->shm_inputs, parsed->shm_outputs);
    if (!shared) return respond(refusal(400, shared.error()));
    auto call = kserve::prepare_call(
        *cfg, *p, std::move(parsed->inputs), 0,
        {parsed->start_layer, parsed->slo_ms, std::move(parsed->outputs), version, std::move(parsed->classification)});
    if (!call) return respond(refusal(400, call.error()));
    auto tenant = kserve::tenant_of(tokens, req.header("Authorization"), req.header("Sloserve-Tenant"));
    for (auto& r : call->requests) r.request_id = next_id++, r.tenant = tenant;
    // The frontend answers every request by its deadline and reply_grace_ms; this is a backstop.
    auto wait = std::chrono::milliseconds(static_cast<int64_t>(p->slo_ms) + 2 * cfg->runtime.reply_grace_ms + 5000);
    respond.backstop(wait, [wait] {
      return refusal(504, "no reply from the frontend within " + std::to_string(wait.count()) + " ms");
    });
    auto requests = std::move(call->requests);
    // The replies are combined and written out on the connection's thread, not the frontend's.
    auto made = std::make_shared<kserve::prepared_call>(std::move(*call));
    auto outputs_shared = std::make_shared<kserve::shared_outputs>(std::move(*shared));
    auto gather =
        kserve::gather_replies(requests.size(), [cfg = cfg, p, made, id = parsed->id, binary = parsed->binary_outputs,
                                                 binary_of = parsed->binary_of, respond,
                                                 outputs_shared](std::vector<msg::client_reply> replies) {
          respond(std::function<http::response()>([=, replies = std::move(replies)]() mutable {
            auto r = kserve::combine_replies(*cfg, *p, *made, std::move(replies));
            if (r.code != msg::status::ok) return refusal(http_status_of(r), r.reason);
            if (auto written = kserve::write_shared_outputs(*outputs_shared, r.outputs); !written)
              return refusal(400, written.error());
            auto timing = kserve::timing_of(r);
            auto out =
                kserve::make_infer_response(p->name, id, r.outputs, binary, &timing, &outputs_shared->refs, &binary_of);
            if (!out.header_length) return reply(200, std::move(out.body));
            auto res = reply(200, std::move(out.body), "application/octet-stream");
            res.headers.emplace_back("Inference-Header-Content-Length", std::to_string(*out.header_length));
            return res;
          }));
        });
    for (size_t i = 0; i < requests.size(); ++i)
      if (auto sink = gather(i); kserve::admitted(intake, requests[i], p->slo_ms, sink))
        caf::anon_send(frontend, ingress{"http " + req.remote, std::move(requests[i]), std::move(sink)});
  }

  // Under security, everything but the health probes needs one of the bearer tokens. Checked
  // once the request is read whole, so that a refused client reads its 401 on a connection that
  // goes on.
  std::optional<http::response> refused_token(const request& req) {
    auto auth = req.header("Authorization");
    auto why = kserve::refused_token(tokens, auth);
    if (why.empty()) return std::nullopt;
    auto res = refusal(401, why);
    res.headers.emplace_back("WWW-Authenticate", "Bearer");
    return res;
  }

  // Runs `make` on the pool of what waits, and answers what it makes; 503 when the pool is full.
  void off_thread(responder respond, std::function<http::response()> make) {
    if (!waiting.try_enqueue([respond, make = std::move(make)] { respond(make()); }))
      respond(refusal(503, "too many requests waiting for the frontend; try again"));
  }

  // Every route: the health probes, /metrics, and with a frontend the KServe v2 paths and
  // Triton's extensions (before the model paths: a pipeline named "stats" is shadowed). Each
  // model path also under /versions/{v}: the pipelines' one version, "1". What waits on the
  // frontend or the node runs off the connection's thread.
  void route(request req, responder respond) {
    auto& path = req.path;
    bool get = req.method == "GET", post = req.method == "POST";
    if (get && path == "/v2/health/live") return respond(reply(200, json{{"live", true}}.dump()));
    if (get && path == "/metrics" && metrics) {
      if (auto no = refused_token(req)) return respond(std::move(*no));
      return off_thread(respond, [this] { return reply(200, metrics(), "text/plain; version=0.0.4; charset=utf-8"); });
    }
    if (!frontend) return respond(not_found());
    if (get && path == "/v2/health/ready") return off_thread(respond, [this] { return ready(""); });
    if (path == "/v2" || path.rfind("/v2/", 0) == 0)
      if (auto no = refused_token(req)) return respond(std::move(*no));
    if (get && path == "/v2") {
      json extensions = {"binary_tensor_data", "classification", "statistics", "model_repository", "logging"};
      if (tracer) extensions.push_back("trace");
      if (shared_memory_on()) extensions.push_back("system_shared_memory");
      if (shared_memory_on() && regions->cuda_unavailable().empty()) extensions.push_back("cuda_shared_memory");
      return respond(
          reply(200, json{{"name", "sloserve"}, {"version", SLOSERVE_VERSION}, {"extensions", extensions}}.dump()));
    }
    // Triton's logging and trace extensions.
    if (auto r = http::settings_call(req, tracer.get(), *source->get())) return respond(std::move(*r));
    if (auto shm = http::shared_memory_path(path)) {
      if (shm->what == "status" ? !get : !post) return respond(not_found());
      return respond(http::shared_memory_call(shared_memory_on() ? regions.get() : nullptr,
                                              kserve::shm_owner(tokens, req.header("Authorization")), req, *shm));
    }
    if (get && path == "/v2/models/stats") return off_thread(respond, [this] { return model_statistics(""); });
    if (post && path == "/v2/repository/index")
      return off_thread(respond, [this, req] { return repository_index(req); });
    auto parts = model_path(path);
    if (!parts) return respond(not_found());
    auto& [name, version, what] = *parts;
    if (!(what == "/infer" ? post : get)) return respond(not_found());
    uint32_t asked = 0;  // the version the path names; 0: none
    if (!version.empty()) {
      auto cfg = source->get();
      auto* p = cfg->find_pipeline(name);
      if (!p) return respond(refusal(404, "no pipeline '" + name + "'"));
      auto v = kserve::version_of(*p, version);
      if (!v) return respond(refusal(404, kserve::no_version(*p, version)));
      asked = *v;
    }
    if (what == "/stats") return off_thread(respond, [this, name] { return model_statistics(name); });
    if (what.empty()) return respond(http::model_metadata(*source->get(), name));
    if (what == "/config") return respond(http::model_configuration(*source->get(), name));
    if (what == "/ready") {
      if (!source->get()->find_pipeline(name)) return respond(refusal(404, "no pipeline '" + name + "'"));
      return off_thread(respond, [this, name] { return ready(name); });
    }
    infer(name, req, std::move(respond), asked);
  }

  struct model_route {
    std::string name, version, what;  // what: empty, /stats, /ready, /infer or /config
  };
  // /v2/models/NAME[/versions/VERSION][/stats|/ready|/infer|/config], names without '/'.
  static std::optional<model_route> model_path(std::string_view path) {
    static constexpr std::string_view prefix = "/v2/models/";
    if (path.substr(0, prefix.size()) != prefix) return std::nullopt;
    std::vector<std::string_view> seg;
    for (auto rest = path.substr(prefix.size());;) {
      auto slash = rest.find('/');
      seg.push_back(rest.substr(0, slash));
      if (seg.back().empty()) return std::nullopt;
      if (slash == std::string_view::npos) break;
      rest = rest.substr(slash + 1);
    }
    model_route r{std::string(seg[0]), "", ""};
    size_t next = 1;
    if (seg.size() > 2 && seg[1] == "versions") {
      r.version = seg[2];
      next = 3;
    }
    if (next + 1 < seg.size()) return std::nullopt;
    if (next < seg.size()) {
      if (seg[next] != "stats" && seg[next] != "ready" && seg[next] != "infer" && seg[next] != "config")
        return std::nullopt;
      r.what = "/" + std::string(seg[next]);
    }
    return r;
  }

  static http::response not_found() {
    return refusal(404, "Not Found: the KServe v2 paths are under /v2, metrics at /metrics");
  }
};

http_ingress::http_ingress(std::shared_ptr<config_source> source, frontend_actor frontend, std::string node,
                           std::function<std::string()> metrics,
                           std::function<void(std::string_view, std::string_view)> count_reply,
                           statistics_source statistics, std::function<void(std::string_view)> count_refusal)
    : impl_(std::make_unique<impl>()) {
  impl_->source = std::move(source);
  impl_->frontend = std::move(frontend);
  impl_->node = std::move(node);
  impl_->metrics = std::move(metrics);
  impl_->count_reply = std::move(count_reply);
  impl_->statistics = std::move(statistics);
  impl_->count_refusal = std::move(count_refusal);
}

http_ingress::~http_ingress() {
  stop();
}

expected<int> http_ingress::start(const std::string& host_port) {
  auto colon = host_port.rfind(':');
  auto host = host_port.substr(0, colon);
  int port = std::stoi(host_port.substr(colon + 1));
  auto cfg = impl_->source->get();
  auto& sec = cfg->security;
  auto& rt = cfg->runtime;
  auto tokens = kserve::read_tokens(sec);
  if (!tokens) return fail("http: " + tokens.error());
  impl_->tokens = std::move(*tokens);
  if (sec.enabled() && !sec.http_secured())
    spdlog::warn("{}: security is on but the HTTP ingress has no TLS certificate and tokens: it serves {} only",
                 impl_->node, host_port);
  http::server_options o;
  o.max_body_bytes = static_cast<size_t>(rt.max_payload_bytes);
  o.request_timeout = std::chrono::milliseconds(rt.http_request_timeout_ms);
  o.connections_per_address = rt.http_connections_per_address;
  if (sec.enabled()) o.tls_cert = sec.tls_cert, o.tls_key = sec.tls_key;
  if (impl_->count_refusal) o.refused = impl_->count_refusal;
  if (impl_->count_reply)
    o.replied = [count = impl_->count_reply](int status) { count("http", std::to_string(status)); };
  impl_->server = std::make_unique<http::server>(
      std::move(o), [this](request req, responder respond) { impl_->route(std::move(req), std::move(respond)); });
  return impl_->server->start(host, port);
}

void http_ingress::set_tracer(std::shared_ptr<tracing::tracer> tracer) {
  impl_->tracer = std::move(tracer);
}

void http_ingress::set_shared_memory(std::shared_ptr<shm::registry> regions) {
  impl_->regions = std::move(regions);
}

void http_ingress::set_intake(kserve::intake_admit admit) {
  impl_->intake = std::move(admit);
}

void http_ingress::stop() {
  if (impl_ && impl_->server) impl_->server->stop();
  if (impl_) impl_->waiting.shutdown();
}

}  // namespace sloserve
