#pragma once
// Triton's logging and trace extensions over HTTP, for the KServe v2 ingress (actors/
// http_ingress): GET/POST /v2/logging (ingress/log_settings.hpp), and GET/POST /v2/trace/setting
// and /v2/models/P/trace/setting (ingress/trace_settings.hpp).

#include <optional>

#include "actors/http_server.hpp"
#include "config/cluster_config.hpp"

namespace sloserve {
namespace tracing {
class tracer;
}

namespace http {

// The answer to `req` when it is one of these calls (GET or POST on their paths): 200 with the
// settings after it, 400 with the reason, 404 for a pipeline `cfg` lacks; nullopt for anything
// else. `tracer` null: the node traces nothing (400).
std::optional<response> settings_call(const request& req, tracing::tracer* tracer, const cluster_config& cfg);

}  // namespace http
}  // namespace sloserve
