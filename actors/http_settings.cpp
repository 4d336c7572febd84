#include "actors/http_settings.hpp"

#include <string>
#include <string_view>

#include "ingress/log_settings.hpp"
#include "ingress/trace_settings.hpp"
#include "messages/kserve_v2.hpp"

namespace sloserve::http {
namespace {

response answer(const expected<std::string>& body) {
  if (body) return {200, *body, "application/json"};
  return {400, kserve::error_body(body.error()), "application/json"};
}

// The pipeline of /v2/trace/setting ("": the global settings) or /v2/models/NAME/trace/setting.
std::optional<std::string> trace_path(std::string_view path) {
  static constexpr std::string_view global = "/v2/trace/setting", models = "/v2/models/", own = "/trace/setting";
  if (path == global) return std::string();
  if (path.substr(0, models.size()) != models || path.size() <= models.size() + own.size() ||
      path.substr(path.size() - own.size()) != own)
    return std::nullopt;
  auto name = path.substr(models.size(), path.size() - models.size() - own.size());
  if (name.find('/') != std::string_view::npos) return std::nullopt;
  return std::string(name);
}

expected<std::string> trace_call(const request& req, tracing::tracer& tracer, const std::string& pipeline) {
  if (req.method == "GET") return tracing::to_json(tracer.settings(pipeline));
  auto c = tracing::changes_from_json(req.body);
  if (!c) return fail(c.error());
  auto after = tracer.update(pipeline, *c);
  if (!after) return fail(after.error());
  return tracing::to_json(*after);
}

expected<std::string> logging_call(const request& req) {
  if (req.method == "GET") return logs::to_json(logs::current());
  auto c = logs::from_json(req.body);
  if (!c) return fail(c.error());
  auto after = logs::update(*c);
  if (!after) return fail(after.error());
  return logs::to_json(*after);
}

}  // namespace

std::optional<response> settings_call(const request& req, tracing::tracer* tracer, const cluster_config& cfg) {
  if (req.method != "GET" && req.method != "POST") return std::nullopt;
  if (req.path == "/v2/logging") return answer(logging_call(req));
  auto pipeline = trace_path(req.path);
  if (!pipeline) return std::nullopt;
  if (!tracer) return answer(fail("this node traces nothing"));
  if (!pipeline->empty() && !cfg.find_pipeline(*pipeline))
    return response{404, kserve::error_body("no pipeline '" + *pipeline + "'"), "application/json"};
  return answer(trace_call(req, *tracer, *pipeline));
}

}  // namespace sloserve::http
