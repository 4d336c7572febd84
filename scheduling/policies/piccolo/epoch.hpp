#pragma once
// Piccolo as a scheduler epoch (`scheduler.policy: piccolo`): each pipeline's stages become
// modules with a configuration per device type and batch size (scheduling/piccolo), planned by
// plan_app; every machine of the plan is a device of its type running one stage's model, routed
// the rate its configuration carries, with the module's dummies spread over its machines in
// proportion to their rates. `sloserve plan --policy piccolo` prints the same plans.

#include <string>
#include <vector>

#include "config/cluster_config.hpp"
#include "pipelines/expected.hpp"
#include "scheduling/epoch.hpp"
#include "scheduling/policies/piccolo/configurations.hpp"

namespace sloserve::sched {

// Piccolo's hardware types: a device type at a share (a fractional instance is a type of its own,
// at its share of the price and slowed by each model's share_slowdown).
namespace piccolo {
struct types {
  std::vector<std::string> names;     // indexed by piccolo::config::type; "" for untyped devices
  std::vector<double> share;          // 1: whole devices
  std::vector<double> price;          // of one instance (device_slot::price): the type's price x share
  std::vector<size_t> available;      // slots of each
  std::string label(size_t t) const;  // "a10", "a10@0.5", "(untyped)"
};
}  // namespace piccolo
piccolo::types piccolo_types(const std::vector<device_slot>& slots);

// The batch sizes a module's configurations take: a measured profile's listed sizes, else powers
// of two and the sizes halfway between (1, 2, 3, 4, 6, 8, 12, ...); and the model's max_batch
// where the profile reaches it.
std::vector<int> piccolo_batches(const latency_profile& profile, int max_batch);

// Piccolo's modules of a pipeline: a stage is one module; a stage over model versions (a canary)
// is one module per version with weight, each at its share of the stage's rate, feeding and fed
// by what the stage is (so that every version's path meets the SLO). In stage order.
struct stage_module {
  size_t stage = 0;
  size_t model = 0;  // index into the models
  double share = 1;  // of the stage's rate
};
std::vector<stage_module> stage_modules(const pipeline& p);

// The modules of stage_modules(p), at stage_rates[s] x share requests/s, with a configuration per type of
// `types` that some slot of `slots` serving the stage's model has, at that type's profile
// (`models[].profiles`, else `profile`, slowed for a share) and `types.price`. A linear profile also offers the
// largest batches the whole SLO allows at the stage's rate.
piccolo::app piccolo_app(const std::vector<model_spec>& models, const piccolo::types& types,
                         const std::vector<device_slot>& slots, const pipeline& p,
                         const std::vector<double>& stage_rates);

// Piccolo's modules for pipeline `p` of `cfg` at `rate` queries/s (declared fan-outs), over the
// cluster's device types (piccolo_types of device_slots(cfg)).
piccolo::app piccolo_app(const cluster_config& cfg, const pipeline& p, double rate);

// Every pipeline of `in` with traffic planned by plan_app, on the slots' types. Where a type has
// fewer slots than the plans need, that type's price is raised for planning (not for cost)
// until they fit, two raises in a row fit no more machines, or the sets need more machines than
// there are slots. Pipelines that hold no machine of a raised type keep their sets.
namespace piccolo {
struct pipeline_plan {
  std::vector<double> rates;     // per stage; empty: the pipeline has no traffic
  std::vector<stage_module> of;  // what each module is
  piccolo::app app;
  piccolo::app_plan plan;
  // Per module, its configurations in the order plan.modules[s].machines index them, at the
  // types' real prices; and each module's cost at those prices.
  std::vector<std::vector<piccolo::config>> configs;
  std::vector<double> cost;
  double total = 0;
};
struct cluster_plan {
  piccolo::types types;
  std::vector<pipeline_plan> pipelines;  // parallel to in.pipelines
  std::vector<size_t> needed;            // machines of each type
};
}  // namespace piccolo
piccolo::cluster_plan plan_piccolo(const epoch_input& in);

// The epoch: sessions one per stage at Piccolo's budget, a dedicated device per machine (its
// type, batch, rate and dummies), bound to slots of its type (plan_piccolo); what still finds no
// slot counts in devices_missing.
expected<epoch_result> plan_piccolo_epoch(const epoch_input& in, const epoch_result* previous);

}  // namespace sloserve::sched
