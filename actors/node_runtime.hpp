#pragma once
// One node: a CAF actor system, a ZeroMQ transport, and the actors of the node's roles.

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "actors/interfaces.hpp"
#include "actors/kserve_call.hpp"
#include "actors/log_limiter.hpp"
#include "config/cluster_config.hpp"
#include "messages/codec.hpp"
#include "pipelines/expected.hpp"

namespace sloserve {

class transport;
class link;
class zmq_link;
class http_ingress;
class grpc_ingress;
namespace shm {
class registry;
}

class node_runtime {
 public:
  // The gate on `l`'s intake as every ingress passes it (runtime.path_guard on): admits a request
  // (stamped when handed to the frontend) or counts it overloaded and says why.
  static kserve::intake_admit intake_gate_of(std::weak_ptr<link> l);
  node_runtime(std::shared_ptr<const cluster_config> cfg, std::string node);
  ~node_runtime();

  // Binds the node's address, spawns its actors and connects to its peers.
  status start();
  void stop();
  // A worker leaves routing before it stops: it asks the controller to plan without it, then
  // serves what it holds for up to the longest SLO plus runtime.reply_grace_ms. Other roles
  // return at once.
  void drain();

  // The bound ROUTER endpoint (with the real port when the config said 0).
  std::string endpoint() const;
  caf::actor_system& system();
  // The configuration the node runs with: the file's, plus profiles it measured at start-up.
  const cluster_config& config() const { return *cfg_; }
  const local_actors& actors() const;
  // The port of the KServe v2 HTTP ingress (`nodes[].http`); 0 when the node has none.
  int http_port() const { return http_port_; }
  // The port of the node's own /metrics server (`nodes[].metrics`); 0 when it has none.
  int metrics_port() const { return metrics_port_; }
  // The port of the KServe v2 gRPC ingress (`nodes[].grpc`); 0 when the node has none.
  int grpc_port() const { return grpc_port_; }

 private:
  // The parts of start(): the transport and the link (what each peer's key is, under CURVE,
  // into `peer_keys`); the actors of the node's roles; the ingresses and /metrics it serves.
  status start_transport(const node_spec& spec, std::map<std::string, std::string>& peer_keys);
  void spawn_roles(const node_spec& spec);
  status start_ingresses(const node_spec& spec);

  void on_frame(std::string_view id, const std::vector<bytes>& parts, std::string_view user);
  // Counts a rejection of `kind` in the metrics and logs `what`, rate-limited per `peer` and kind.
  void reject(std::string_view kind, const std::string& peer, const std::string& what);
  // A client's request past the intake gate: true to hand it to the frontend (stamped), false
  // when it was answered OVERLOADED here.
  bool intake(const std::string& identity, msg::client_request& rq);
  // A client's shared-memory call (register, unregister, status), answered here.
  void shared_memory_call(const std::string& identity, std::string_view user, const msg::shared_memory_request& rq);
  // A request's inputs in shared-memory regions, read into its inputs: false when one cannot be
  // (then it was answered ERROR with the reason).
  bool take_shared_inputs(const std::string& identity, std::string_view user, msg::client_request& rq);

  std::shared_ptr<const cluster_config> cfg_;
  msg::decode_limits limits_;
  std::map<std::string, std::string, std::less<>> node_of_key_;    // under CURVE: key -> node
  std::map<std::string, std::string, std::less<>> tenant_of_key_;  // under CURVE: a tenant's client key -> it
  std::string node_;
  std::unique_ptr<caf::actor_system_config> sys_cfg_;
  std::unique_ptr<caf::actor_system> sys_;
  std::shared_ptr<zmq_link> link_;
  kserve::intake_admit admit_;  // intake_gate_of(link_)
  std::unique_ptr<transport> transport_;
  std::unique_ptr<http_ingress> http_, metrics_http_;
  std::unique_ptr<grpc_ingress> grpc_;
  std::shared_ptr<shm::registry> shm_;  // clients' shared-memory regions (runtime.client_shared_memory)
  int http_port_ = 0, metrics_port_ = 0, grpc_port_ = 0;
  // Rejected input: a line a second per peer and reason, one per 2 s overall after a burst of 10.
  log_limiter rejections_{1.0, 2.0};
  bool started_ = false;
};

// A fresh 64-bit id for this process's start; peers use it to tell restarts apart.
uint64_t new_incarnation();

}  // namespace sloserve
