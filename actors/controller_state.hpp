#pragma once
// The controller's state and the parts of it in actors/controller_plans.cpp (epochs, the scaler's
// deployments, a policy's rounds); actors/controller.cpp holds the rest and the behaviour.

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "actors/roles.hpp"
#include "actors/route_publisher.hpp"
#include "actors/worker_registry.hpp"
#include "scheduling/policies/registry.hpp"
#include "scheduling/policies/rounds.hpp"

namespace sloserve::control {

using clock_time = caf::actor_clock::time_point;

struct controller_state {
  static inline const char* name = "controller";

  std::shared_ptr<const cluster_config> cfg;
  const sched::scheduling_policy* policy = nullptr;  // scheduler.policy's
  std::shared_ptr<link> net;
  std::vector<model_spec> models;                // the file's, with profiles workers measured for those without
  std::map<std::string, double> profile_scales;  // models planned at their profile x this (online refresh)
  bool told_unprofiled = false;
  worker_registry workers;
  std::set<std::string> frontends;
  // Nodes this one does not hear now. Hearing fewer than half of the others, the controller is
  // more likely cut off than they are all gone: it keeps the placement and routing it has
  // (plans and tables made now would reach the frontends late, and wrong) until it hears them.
  std::set<std::string> unheard;
  bool held = false;                                    // a plan or a table was held back while cut off
  std::set<std::string> slow;                           // workers behind slow links (the monitor's): planned without
  std::map<std::string, std::vector<std::string>> far;  // per worker, models too large for its link
  uint64_t epoch_base = 0;                              // numbering of this controller's epochs
  uint64_t epoch = 0;                                   // current schedule and routing epoch
  cluster_placement current;
  route_publisher publisher;
  std::pair<uint64_t, size_t> said_routing;  // the routing epoch and serving workers logged last
  worker_set told_scaler;
  // Epochs.
  sched::pipeline_rates rates;  // the monitor's, as of the last beacon
  clock_time last_epoch;
  planner_actor planner;                      // plans off this actor's thread
  std::shared_ptr<const planned_epoch> plan;  // the plan applied; null: the static placement serves
  bool plan_pending = false;
  bool replan = false;  // what it plans for changed while a plan was pending: that plan is stale
  // `scheduler.cost_budget` (MCDNN): what was spent, charged at each beacon's rates; planned with
  // what is left. `budget_price`: the cluster's mean price per device-hour.
  std::optional<sched::budget_account> budget;
  double budget_price = 1;
  // The scaler's.
  deployment deployed;
  std::map<std::pair<std::string, uint32_t>, uint32_t> cores;  // threads last sent per device
  // The policy's own placement rounds (scheduling_policy::rounds), if it has them.
  std::shared_ptr<sched::client_rounds> rounds;
  clock_time last_round;
  std::chrono::nanoseconds round_cost{0};  // what the last one took to decide (CPU, steady clock)
  bool round_deferred = false;             // a client's move came too soon after one: a round follows
  // The configuration applied last (`sloserve apply`): its revision (0: the file the controller
  // started with), text and file, sent again to nodes that register with another revision.
  uint64_t revision = 0;
  std::string revision_text, revision_file;
  // Applies sent to the nodes whose callers wait for what the nodes made of them: answered once
  // every node heard now has acknowledged (msg::config_ack), or when apply_wait is over.
  struct pending_apply {
    std::string client;  // the caller's routing identity
    msg::apply_reply reply;
    std::set<std::string> waiting;            // nodes not acknowledged yet
    std::map<std::string, std::string> said;  // per node, its line of the answer
  };
  std::vector<pending_apply> applying;
  static constexpr std::chrono::seconds apply_wait{20};
  // Pipelines an apply added that no load has reached yet: planned for unmeasured_rate meanwhile,
  // so that their first requests find their models loaded.
  std::set<std::string> unmeasured;
  static constexpr double unmeasured_rate = 1;  // queries/s
};

using self_ptr = controller_actor::stateful_pointer<controller_state>;

// Whether epochs re-plan as workers come and go (a plan is in force or on its way).
bool replans(const controller_state& st);
// Whether scheduler epochs place sessions (not the static placement, the scaler or a policy's rounds).
bool plans_epochs(const controller_state& st);
// Whether it hears fewer than half of the other nodes (then it holds plans and tables back).
bool cut_off(const controller_state& st);
// The pipelines with the variants the plan in force runs (the file's before any plan chose).
const std::vector<pipeline>& running_pipelines(const controller_state& st);
inline double seconds_since_epoch(clock_time t) {
  return std::chrono::duration<double>(t.time_since_epoch()).count();
}
// Makes `p` the current placement: workers that are up get their schedules of a new epoch first
// (a device keeps serving what it loses until it drains, so frontends that still route there
// lose nothing), then frontends get the table.
void adopt(self_ptr self, cluster_placement p);

// One scheduler epoch on the monitor's rates and the workers up, planned by the planner, one at a
// time; `surge`: for the last window's rate where it is above the smoothed one.
void run_epoch(self_ptr self, bool surge = false);
// Why an epoch is due now, if it is.
sched::epoch_reason epoch_due(const controller_state& st, clock_time now);
// The scaler's deployment: its instances placed, their threads sent.
void on_deployment(self_ptr self, deployment& d);
// Threads of the scaler's instances on `node` it does not run yet (all when `force`: a restart).
void send_resizes(self_ptr self, const std::string& node, bool force);
// Asks the monitor for the clients and runs the policy's round on them.
void ask_clients(self_ptr self);
// The monitor's rates with the floor of pipelines an apply added and no load reached yet.
void floor_unmeasured(controller_state& st);
// An operator's apply (actors/controller_apply.cpp): checked, answered, and when it applies, sent
// to every node and planned at once.
void on_apply(self_ptr self, admin_call& call);
// A node's acknowledgement of an apply; the apply's caller is answered once all nodes have given theirs.
void on_config_ack(self_ptr self, const msg::config_ack& ack);
// The wait for the nodes of the apply that `token` made is over: answered with what came.
void on_apply_wait_over(self_ptr self, uint64_t token);

}  // namespace sloserve::control
