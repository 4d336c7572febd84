#pragma once
// Spawning the actors of each role.

#include <chrono>
#include <functional>
#include <memory>

#include "actors/link.hpp"
#include "config/cluster_config.hpp"
#include "config/knob_format.hpp"

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
  // The controller's planner; empty: a detached planner_actor (spawn_planner). Tests inject one.
  std::function<planner_actor(caf::actor_system&)> planner{};
};

frontend_actor spawn_frontend(caf::actor_system& sys, actor_args args);
// The devices of this node's worker, by index (node: nodes[].devices, in order).
std::vector<device_actor> spawn_devices(caf::actor_system& sys, const actor_args& args);
// The worker over `devices`; they stop with it.
worker_actor spawn_worker(caf::actor_system& sys, actor_args args, std::vector<device_actor> devices);
// A device of `kind` (emulated, cpu, cuda). One whose executor cannot be made serves nothing and
// answers every invocation with the reason.
device_actor spawn_device(caf::actor_system& sys, actor_args args, uint32_t index, device_kind kind);
// A device over a given executor (tests: executors with a given behaviour).
device_actor spawn_device(caf::actor_system& sys, actor_args args, uint32_t index,
                          std::unique_ptr<device_executor> executor);
controller_actor spawn_controller(caf::actor_system& sys, actor_args args);
// Plans one request with sched::plan_scaled_epoch (`r.input` is moved into the result).
planned_epoch run_plan_request(plan_request& r);
// Plans each request it gets; `detached` gives it a thread of its own.
planner_actor spawn_planner(caf::actor_system& sys, bool detached = true);
// The next epoch's request: `models` (the config's, with measured profiles), the devices of the
// workers `up` says are up, the planning rates of `rates` with the scheduler's headroom (the last
// window's where larger when `surge`), and the plan before it.
plan_request epoch_request(const cluster_config& cfg, std::shared_ptr<const std::vector<model_spec>> models,
                           const sched::pipeline_rates& rates, std::shared_ptr<const planned_epoch> previous,
                           const std::function<bool(const std::string&)>& up, bool surge = false);
monitor_actor spawn_monitor(caf::actor_system& sys, actor_args args);
scaler_actor spawn_scaler(caf::actor_system& sys, actor_args args);
node_agent_actor spawn_node_agent(caf::actor_system& sys, actor_args args);

}  // namespace sloserve
