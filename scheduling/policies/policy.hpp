#pragma once
// A scheduling policy (`scheduler.policy`): how scheduler epochs plan, and what the control plane
// does for it beside epochs. The controller, the frontend, the simulator and `sloserve plan`
// reach a policy only through this interface, from the registry (policies/registry.hpp). Each
// policy lives in scheduling/policies/<name>/; a new one is a new folder and a registry line.

#include <memory>
#include <string>

#include "config/cluster_config.hpp"
#include "config/knobs.hpp"
#include "pipelines/expected.hpp"
#include "scheduling/balancer.hpp"
#include "scheduling/epoch.hpp"
#include "scheduling/pipeline_load.hpp"
#include "scheduling/planner.hpp"

namespace sloserve::sched {

class client_rounds;  // scheduling/policies/rounds.hpp

// What frontends do with the clients that name themselves (scheduling_policy::clients).
struct client_tracking {
  double report_ms = 0;        // how often they report the clients' uplinks to the controller; 0: never
  double uplink_quantile = 1;  // the dips of an uplink its estimate stands for (client_registry::plan_dips)
  double miss_target = 0.025;  // > 0: each pipeline's quantile moves to keep its clients' misses near it
  double min_wait_share = 1;   // the least wait share the misses may lower lifts to (sched::dip_quantile)
};

// What `sloserve plan` prints: the plan as a JSON document, and as text for a terminal.
struct plan_report {
  std::string json;
  std::string text;
};

class scheduling_policy {
 public:
  virtual ~scheduling_policy() = default;

  // Its part of the cluster file: its own section under `scheduler:` and its demands on the rest
  // (config/policy_config.hpp). A built-in policy's is listed in policies/configs.cpp, so that
  // the config library knows it; register_policy brings a program's policy's.
  virtual policy_config config() const { return {}; }
  // Whether epochs place sessions. False: the file's static placement serves as it is.
  virtual bool plans_epochs() const { return true; }
  // Plans for the least cost of the load it measures: no spare multiple, no plan for what the
  // devices hold before there is load (plan_for_load), and nothing to plan with no load.
  virtual bool plans_least_cost() const { return false; }
  // Its own placement loop in the controller, in place of epochs (Jellyfish maps clients to
  // instances in rounds); null: none.
  virtual std::shared_ptr<client_rounds> rounds(const cluster_config& cfg) const { return nullptr; }
  // What frontends track of the clients that name themselves: by default their uplinks' dips at
  // client_tracking's defaults, reported to no one; a policy that places on clients has them
  // reported (besides when one moves much).
  virtual client_tracking clients(const cluster_config& cfg) const { return {}; }

  // The packer that places its epochs' sessions on devices.
  virtual std::unique_ptr<planner> packer() const { return std::make_unique<nexus_planner>(); }
  // One epoch for `in` (see plan_epoch): by default, the SLO split and the packing of
  // plan_packed_epoch with this policy's packer.
  virtual expected<epoch_result> plan(const epoch_input& in, const epoch_result* previous) const {
    return plan_packed_epoch(in, previous, *packer(), searches_neighbours());
  }
  // How frontends choose among a model's instances, under its section `options` (the file's
  // scheduler.NAME): by default the balancer the file names (runtime.balancer).
  virtual std::unique_ptr<balancer> dispatcher(balancer_kind configured, const std::any& /*options*/) const {
    return make_balancer(configured);
  }
  // Whether, under its section `options` (the file's scheduler.NAME), its instances take whole
  // batches in turn (routing_table instances' `batch`) and its devices collect a batch before
  // they run it (sessions' `collect`): Piccolo's throughput-cost dispatch, with the fill
  // balancer as dispatcher.
  virtual bool whole_batches(const std::any& options) const { return false; }
  // With whole batches and several frontends, whether one frontend per model dispatches every
  // invocation of it in one turn (routing_table routes' `dispatcher`; the others forward to it).
  virtual bool central_dispatch(const std::any& options) const { return false; }
  // Whether what was measured asks for an epoch that `planned` lacks, whatever the load rule
  // says (Graft: a fragment of queries the plan has no route for).
  virtual bool plan_outdated(const pipeline_rates& measured, const epoch_result& planned) const { return false; }
  // What a plan it made adds to the controller's log; empty: nothing.
  virtual std::string plan_news(const epoch_result& plan) const { return {}; }
  // What `sloserve plan` prints for `in` (its rates; `in.parallel` may be set): by default the
  // epoch plan(in) makes, with each stage's budget, the sessions, devices and cost
  // (scheduling/policies/report.hpp). An error where there is no plan to print.
  virtual expected<plan_report> report(const cluster_config& cfg, const epoch_input& in) const;

 protected:
  // Whether the packed epoch also tries the neighbours of the DP's split (plan_packed_epoch).
  virtual bool searches_neighbours() const { return true; }
};

// The one epoch gate of the controller and the simulator: why an epoch is due now under `policy`,
// if it is. The load rule (epoch_due) on what was measured and what `planned` carries, else,
// once `rule.min_epoch_s` has passed, the policy's own trigger on `plan` (plan_outdated), as
// `band`. `planned` and `plan` are null before the first plan.
epoch_reason epoch_gate(const scheduling_policy& policy, const epoch_rule& rule, const pipeline_rates& measured,
                        const planned_load* planned, const epoch_result* plan, double since_s);

}  // namespace sloserve::sched
