#pragma once
// Spawning the actors of each role.

#include <chrono>
#include <functional>
#include <memory>

#include "actors/link.hpp"
#include "config/cluster_config.hpp"

namespace sloserve {

class device_executor;

inline int64_t system_wall_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

struct actor_args {
  std::shared_ptr<const cluster_config> cfg;
  std::shared_ptr<link> net;
  uint64_t incarnation = 1;  // differs on every start of the node
  // The node's wall clock (µs since the Unix epoch), for clients' send times; tests inject one.
  std::function<int64_t()> wall_us = system_wall_us;
};

frontend_actor spawn_frontend(caf::actor_system& sys, actor_args args);
worker_actor spawn_worker(caf::actor_system& sys, actor_args args);
device_actor spawn_device(caf::actor_system& sys, actor_args args, uint32_t index,
                          std::string kind);
// A device whose executor `make` builds (tests: executors with a given behaviour). It runs on the
// scheduler like an emulated device.
device_actor spawn_device(caf::actor_system& sys, actor_args args, uint32_t index,
                          std::function<std::unique_ptr<device_executor>()> make);
controller_actor spawn_controller(caf::actor_system& sys, actor_args args);
monitor_actor spawn_monitor(caf::actor_system& sys, actor_args args);
scaler_actor spawn_scaler(caf::actor_system& sys, actor_args args);
node_agent_actor spawn_node_agent(caf::actor_system& sys, actor_args args);

// Static placement used until a scheduler replaces it: every device of `node` runs every model
// it may serve, at the model's largest batch.
msg::schedule static_schedule(const cluster_config& cfg, const node_spec& node, uint64_t epoch);

}  // namespace sloserve
