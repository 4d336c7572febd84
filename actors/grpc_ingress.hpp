#pragma once
// The KServe v2 inference protocol over gRPC on a frontend node (`nodes[].grpc`): the
// GRPCInferenceService of messages/grpc_service.proto, every pipeline a model. Requests go to the
// node's frontend actor like those of the other ingresses and get exactly one reply each. It is
// event-driven (gRPC's callback API): no thread waits for a reply, so the number of requests in
// flight is bounded by the frontend's limits, not by a pool.

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

class grpc_ingress {
 public:
  // `count_reply`, when set, is told each reply's status (protocol "grpc", the code's name).
  grpc_ingress(std::shared_ptr<config_source> source, frontend_actor frontend, std::string node,
               std::function<void(std::string_view protocol, std::string_view code)> count_reply = {},
               statistics_source statistics = {});
  ~grpc_ingress();
  grpc_ingress(const grpc_ingress&) = delete;
  grpc_ingress& operator=(const grpc_ingress&) = delete;

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

}  // namespace sloserve
