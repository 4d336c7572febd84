#pragma once
// The KServe v2 inference protocol over HTTP/REST on a frontend node (`nodes[].http`): health,
// server and model metadata, readiness and inference, every pipeline a "model" of the protocol;
// and Triton's statistics (/v2/models[/{m}]/stats) and repository index (/v2/repository/index).
// Requests go to the node's frontend actor like ZeroMQ clients' and get exactly one reply each.
// An event-driven server (actors/http_server.hpp) serves the connections: a request must come
// whole within runtime.http_request_timeout_ms, one address holds at most
// runtime.http_connections_per_address connections, bodies are bounded by
// runtime.max_payload_bytes.
// The same server serves Prometheus /metrics: beside the ingress, or alone (`nodes[].metrics`,
// any node) when it has no frontend.

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "actors/interfaces.hpp"
#include "actors/kserve_call.hpp"
#include "actors/metrics.hpp"
#include "config/live_apply.hpp"

namespace sloserve {

namespace shm {
class registry;
}
namespace tracing {
class tracer;
}

class http_ingress {
 public:
  // `frontend` invalid: no KServe v2 routes but the liveness probe. `metrics`, when set, renders
  // /metrics; `count_reply`, when set, is told each reply's status (protocol "http");
  // `statistics`, when set, gives the pipelines' statistics (Triton's statistics extension);
  // `count_refusal`, when set, is told why each connection or request was refused before it
  // reached a route (http::server_options::refused).
  http_ingress(std::shared_ptr<config_source> source, frontend_actor frontend, std::string node,
               std::function<std::string()> metrics = {},
               std::function<void(std::string_view protocol, std::string_view code)> count_reply = {},
               statistics_source statistics = {}, std::function<void(std::string_view why)> count_refusal = {});
  ~http_ingress();
  http_ingress(const http_ingress&) = delete;
  http_ingress& operator=(const http_ingress&) = delete;

  // The node's shared-memory regions (Triton's system shared-memory extension), before start().
  void set_shared_memory(std::shared_ptr<shm::registry> regions);
  // Triton's trace extension: the frontend's tracer, whose settings the ingress reads and changes.
  void set_tracer(std::shared_ptr<tracing::tracer> tracer);
  // The node's intake gate, which inference requests pass before the frontend, before start().
  void set_intake(kserve::intake_admit admit);

  // Binds HOST:PORT (port 0: any free one) and serves until stop(); the port it bound.
  expected<int> start(const std::string& host_port);
  void stop();

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

// The HTTP status of a frontend's reply: OK 200, DROPPED 503, OVERLOADED 429, ERROR 500 (the
// ingress answers the client's own faults with 400 before they reach the frontend), and a
// pipeline that is not ready yet 503.
int http_status_of(const msg::client_reply& r);

}  // namespace sloserve
