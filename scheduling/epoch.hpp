#pragma once
// One scheduler epoch, as a pure function: split each pipeline's SLO, turn stages into sessions
// (merging those that share a model and an SLO), place them, and bind the placed devices to the
// cluster's physical devices. The scheduler actor, `sloserve plan` and the benchmarks all call it.

#include <algorithm>
#include <any>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "pipelines/expected.hpp"
#include "scheduling/catalogue.hpp"
#include "scheduling/mcdnn_budget.hpp"
#include "scheduling/pipeline_load.hpp"
#include "scheduling/planner.hpp"
#include "scheduling/query_analyzer.hpp"

namespace sloserve::sched {

class scheduling_policy;  // scheduling/policies/policy.hpp

// A physical device that can host sessions.
struct device_slot {
  std::string node;
  uint32_t device = 0;
  std::vector<std::string> models;  // those it may serve; empty: any
  double memory_mb = 0;             // 0: not limited
  double price = 1;                 // its device type's, times its share
  std::string type = {};            // its device type (`device_types`); empty: untyped
  double share = 1;                 // of its device: < 1 for a fractional instance
  bool serves(const std::string& model) const {
    return models.empty() || std::find(models.begin(), models.end(), model) != models.end();
  }
};

// Runs fn(i) for every i < n, in any order, on threads of the caller's choosing. Planning stays
// free of threads of its own, and its results do not depend on how many run.
using parallel_runner = std::function<void(size_t n, const std::function<void(size_t)>& fn)>;

struct epoch_input {
  const std::vector<model_spec>* models = nullptr;
  const std::vector<pipeline>* pipelines = nullptr;
  // Set by plan_scaled_epoch when stages have variants: the pipelines with the variants chosen
  // (`pipelines` then points here).
  std::shared_ptr<const std::vector<pipeline>> chosen;
  std::vector<double> rates;                 // queries/s per pipeline
  std::vector<std::vector<double>> fanouts;  // per pipeline and stage; empty: as declared
  // Per pipeline and stage: the fraction of a cascade's requests its second model runs; empty:
  // as declared (1 - the first model's pass_rate, or 0.5).
  std::vector<std::vector<double>> fallthroughs;
  std::vector<device_slot> slots;
  // Graft: per pipeline, its queries by where they start and their SLO (each a share of the
  // pipeline's rate), and the fragment models of the config (cluster_config::fragments).
  std::vector<std::vector<fragment_share>> fragments;
  const std::vector<model_spec>* fragment_models = nullptr;
  // The scheduling policy that plans (policies/registry.hpp); null: nexus. `options`: its own
  // section of the file (scheduler_options::section).
  const scheduling_policy* policy = nullptr;
  std::any options;
  // `scheduler.cost_budget`: what is left of it (MCDNN's Algorithm 4.1, scheduling/mcdnn_budget.hpp);
  // a stage with variants runs none above its per-request budget. Unset: no budget.
  std::optional<cost_budget> budget;
  split_policy split = split_policy::dp;
  int steps = 100;  // budget grid of the DP
  // dp: also try the DP with one stage held at a batch up to this far from the one it chose,
  // and keep a split that packs into fewer devices (plan_epoch); 0: the DP's split as it is.
  int neighbours = 2;
  parallel_runner parallel;  // empty: one pipeline after another
};

struct epoch_result {
  std::vector<slo_split> splits;  // per pipeline
  std::vector<session> sessions;
  plan placement;
  std::vector<device_slot> slots;  // the slots this epoch could use (a copy of the input's)
  std::vector<int> slot_of;        // per placement device: index into slots, -1 when none was free
  size_t devices_missing = 0;
  // Per session, the stages (pipeline, stage) it serves.
  std::vector<std::vector<std::pair<size_t, size_t>>> members;
  // Per session, the models it runs with their rates: one, or the variants of one prefix that
  // share an SLO (merged so that they land on the same devices and batch the prefix together).
  std::vector<std::vector<std::pair<const model_spec*, double>>> models_of;
  // Graft: where each fragment's queries go, the layer ranges in turn.
  struct fragment_route {
    size_t pipeline = 0;
    int start = 0;
    double slo_ms = 0;
    double rate = 0;
    std::vector<std::string> models;
    std::vector<double> budget_ms;
  };
  std::vector<fragment_route> fragment_routes{};
  double resources = 0;  // Graft: the shares its devices take (sum of share x instances)
};

// Binds `out.placement`'s devices to `in.slots`: a device keeps the previous epoch's slot of its
// id where it still fits (models, memory, device type and share), the others take the first free slot
// that fits; `out.devices_missing` counts those none fits.
void bind_slots(const epoch_input& in, const epoch_result* previous, epoch_result& out);

// The epoch `in.policy` plans (its scheduling policy's, scheduling/policies/). `previous` (same
// models and pipelines) makes the placement incremental and keeps devices bound to the same
// slots where it can. An error on bad input.
expected<epoch_result> plan_epoch(const epoch_input& in, const epoch_result* previous = nullptr);

// The epoch of the packing policies: each pipeline's SLO split by `in.split` (the DP's split and,
// with `neighbours`, its neighbours: see epoch_input::neighbours), stages merged into sessions,
// and the sessions packed on devices by `packer`.
expected<epoch_result> plan_packed_epoch(const epoch_input& in, const epoch_result* previous, const planner& packer,
                                         bool neighbours);

// plan_epoch on a cluster of fixed size. With devices to spare it plans for the largest multiple
// of the load (up to 4x) that still fits, so that bursts find capacity instead of idle devices;
// with too few devices, for the largest fraction of the load that fits. `in.rates` ends as the
// rates planned for; `scale` is that multiple (1: the load as given).
//
// Stages with variants run their most accurate ones unless the plan would not fit the cluster's
// devices and memory: then the variants with the highest rate-weighted accuracy whose plan fits
// (MCDNN's catalogue, scheduling/catalogue.hpp); `degraded` says which stages gave up accuracy.
struct scaled_epoch {
  epoch_result result;
  double scale = 1;
  std::vector<std::string> degraded{};
  bool variants_fit = true;  // false: not even the smallest variants fit
};
expected<scaled_epoch> plan_scaled_epoch(epoch_input& in, const epoch_result* previous);
// Whether pipelines differ in priority (then a plan short of devices sheds the lowest first).
bool priorities_differ(const std::vector<pipeline>& pipes);

// Whether policy `p` (null: nexus) plans for the least cost of the load it measures: no spare multiple, and no
// plan before there is load (scheduling_policy::plans_least_cost). The others fill the cluster
// (plan_scaled_epoch), and before any load plan for what it can hold (plan_capacity_epoch).
bool plans_least_cost(const scheduling_policy* p);

// A plan for what the cluster can hold, before any load is measured: every pipeline at the same
// rate (fan-outs as declared), the largest at which the plan fits the slots. `in.rates` ends as
// those rates; `scale` is that rate in queries/s per pipeline (below 1 when not even that fits).
expected<scaled_epoch> plan_capacity_epoch(epoch_input& in, const epoch_result* previous);

// An epoch for the load: for what the devices hold when there is nothing to plan for
// (`capacity`), else for `in.rates` (plan_scaled_epoch). `planned` holds `planning` (the
// planning rates, before headroom) and what the plan carries: the rates it was made for, or,
// where it plans for less than the load (too few devices), everything: more load is then no
// reason to plan again.
struct load_epoch {
  scaled_epoch plan;
  planned_load planned;
};
expected<load_epoch> plan_for_load(epoch_input& in, const epoch_result* previous, bool capacity,
                                   std::vector<double> planning);

// The variants stages run at `in.rates` (see scaled_epoch): `in.pipelines` then points to
// `in.chosen`, the pipelines with those variants.
catalogue_choice choose_epoch_variants(epoch_input& in, const epoch_result* previous);

}  // namespace sloserve::sched
