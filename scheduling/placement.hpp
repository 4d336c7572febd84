#pragma once
// From a cluster file and a plan to what nodes receive. Every way the cluster is planned (the
// static placement, a scheduler epoch, a scaler's deployment) produces one `cluster_placement`:
// a schedule per worker and the routing table that goes with it. Pure: no actors, no I/O.

#include <map>
#include <string>
#include <vector>

#include "config/cluster_config.hpp"
#include "messages/types.hpp"
#include "scheduling/epoch.hpp"
#include "scheduling/pipeline_load.hpp"

namespace sloserve {

// One model on one device of a worker.
struct instance_key {
  std::string node;
  uint32_t device = 0;
  std::string model;
  auto operator<=>(const instance_key&) const = default;
};

// The scaler's placement, as its provisioner hands it over: every instance is one model on one
// device slot of a worker, with `cores` intra-op threads.
struct instance_assignment {
  std::string node;
  uint32_t device = 0;
  std::string model;
  uint32_t batch = 1;
  uint32_t cores = 1;
  bool operator==(const instance_assignment&) const = default;
};
struct batch_in_turn {
  uint32_t batch = 1;
  double fill_ms = 0;
  bool operator==(const batch_in_turn&) const = default;
};
struct deployment {
  std::vector<instance_assignment> instances;
  std::vector<msg::stage_budget> budgets;  // stage budgets the plan assumes; empty: keep them
  // Models whose instances take whole batches in turn (FA2's central queue): per model, the
  // planned batch and the time (ms) it takes to fill at the stage's rate (b / λ). The frontends
  // send each instance the batch in turn; its device waits until it is whole, or until the most
  // urgent request can wait no longer (session_queue::start_at).
  std::map<std::string, batch_in_turn> in_turn;
};

// What the cluster runs, and how frontends route to it.
struct cluster_placement {
  std::map<std::string, msg::schedule> schedules;  // per worker node, every device listed
  msg::routing_table table;                        // instances per model and stage budgets
};

// Every device of every worker node, in config order.
std::vector<sched::device_slot> device_slots(const cluster_config& cfg);

// What an epoch plans with, as `scheduler:` says: every device slot, `models` (the config's, with
// measured profiles), the config's pipelines; rates still to be set.
sched::epoch_input planning_input(const cluster_config& cfg, const std::vector<model_spec>& models);

// The models a device may be given: the file's, and the rest [p, end) of each partitioned model
// from every layer p (what requests that start there run until a plan covers them).
std::vector<const model_spec*> served_models(const cluster_config& cfg);

// The placement before any plan: every device runs every model it may serve, at the batch that
// saturates its tightest even-split budget; budgets are the even split.
// What a routing table's budgets say of pipeline `p`: the model each stage runs (a variant of the
// stage that the table names, else the model the file names) and, once the table budgets every
// stage, the stages' deadlines (offsets_from_budgets). Frontends and the simulator read tables so.
struct table_stages {
  std::vector<size_t> models;      // per stage, an index into cfg.models
  std::optional<slo_split> split;  // none until every stage has a budget
};
table_stages stages_of(const cluster_config& cfg, const pipeline& p, const std::vector<msg::stage_budget>& budgets);
// The tightest of a table's stage budgets (ms) that run `model`: a dummy's; 0 when none does.
double tightest_budget_ms(const std::vector<msg::stage_budget>& budgets, const std::string& model);

cluster_placement static_placement(const cluster_config& cfg, uint64_t epoch);

// Tells every route instance of `pl` that has none its spill point: the batch it was planned at
// (the batch its device runs the model at, where the plan named none) against its model's budget
// (`models`' latencies where given, else the file's).
void set_spill_points(const cluster_config& cfg, cluster_placement& pl,
                      const std::vector<model_spec>* models = nullptr);
msg::schedule static_schedule(const cluster_config& cfg, const node_spec& node, uint64_t epoch);

// A scheduler epoch's plan on the devices of `in.slots`. Every model a pipeline uses keeps at
// least one instance: one the plan left out (no traffic yet, or no room) runs as a backup on a
// free device, else beside the least busy device that may serve it.
// Devices the plan leaves free keep what they ran in `previous` (where the file still lets them),
// routed as spares: frontends spill to them when the planned instances are busy, so a surge finds
// capacity before the next plan, and a lull takes nothing away.
cluster_placement epoch_placement(const cluster_config& cfg, const sched::epoch_input& in, const sched::epoch_result& r,
                                  uint64_t epoch, const cluster_placement* previous = nullptr);

// A scaler's deployment: instances weighted by their throughput at their batch and cores; the
// stage budgets are the deployment's, or `budgets` when it carries none. Devices it leaves free
// keep what they ran in `previous`, routed as spares (as epoch_placement's). Spill points at
// `models`' latencies (the controller's, with refreshed profiles), else the file's.
cluster_placement deployment_placement(const cluster_config& cfg, const deployment& d, uint64_t epoch,
                                       const std::vector<msg::stage_budget>& budgets,
                                       const cluster_placement* previous = nullptr,
                                       const std::vector<model_spec>* models = nullptr);

// When epochs are due, as `scheduler:` and `runtime.beacon_ms` say.
sched::epoch_rule epoch_rule_of(const cluster_config& cfg);
// The per-pipeline load an epoch plans on, windowed by beacons (its peak's half-life from `scheduler:`).
sched::pipeline_load pipeline_load_of(const cluster_config& cfg);

// The first model a pipeline uses that has no profile yet (planning waits for it); null when
// none. `models`: the config's, with profiles measured since.
const model_spec* unprofiled_model(const cluster_config& cfg, const std::vector<model_spec>& models);
// Takes a worker's measured profile for a model of `models` that has none; false when it had one
// or the measurement is unusable.
bool adopt_measured_profile(std::vector<model_spec>& models, const msg::measured_profile& mp);

// Instances per model weighted by the rate each takes, and the epoch's stage budgets.
msg::routing_table routing_from(const cluster_config& cfg, const sched::epoch_input& in, const sched::epoch_result& r,
                                uint64_t epoch);

// Per worker node: each of its devices with the sessions it runs (none when unused).
std::map<std::string, msg::schedule> schedules_from(const cluster_config& cfg, const sched::epoch_input& in,
                                                    const sched::epoch_result& r, uint64_t epoch);

}  // namespace sloserve
