#pragma once
// Jellyfish's part of the cluster file (`scheduler: {policy: jellyfish, jellyfish: {...}}`).

#include <string>

#include "config/policy_config.hpp"

namespace sloserve::sched::jellyfish {

// Every `interval_ms` the clients that name themselves are mapped to variants of their
// pipeline's one stage, one variant per device (scheduling/policies/jellyfish/plan.hpp), and each
// is told the image size to send.
struct options {
  double interval_ms = 500;
  double overhead_ms = 5;         // per request beyond upload and compute, in the budgets L_ij
  double bytes_per_pixel = 0.25;  // of a client's images before any was seen
  int resident = 3;               // variants a device keeps loaded (memory allowing): switches back cost nothing
  double compute_share = 0;       // > 0: budgets are this share of each SLO, uplinks ignored
  // > 0: clients send images of this side (square) whatever they are told (no data adaptation:
  // the DA_off baseline); budgets time every variant's upload at that size, and no client is
  // lifted onto spare compute.
  int client_side = 0;
  // Uploads are timed at the uplink that a client's uploads fell below this share of the time
  // over the last 10 s (client_registry, uplink_estimate::low_mbps); 0 or 1: at the estimate itself.
  // With miss_target, where each pipeline's quantile starts: by default at the estimate, going
  // deeper once its clients miss more than the target.
  double uplink_quantile = 1;
  // > 0: each frontend moves a pipeline's quantile (from uplink_quantile) to keep the share of its
  // named clients' requests that miss their SLO (skipped frames included) near this
  // (sched::dip_quantile); 0: the quantile stays.
  double miss_target = 0.025;
  // The least share of the wait behind a running batch that the lift onto spare compute plans
  // for, which misses under the target lower it to (sched::dip_quantile::wait_share). 1: a whole
  // batch's wait, always: the lift spends no misses (paper mode's within noise, docs/benchmarks.md);
  // lower: the lift trades misses, up to miss_target, for more accurate variants.
  double min_wait_share = 1;
  // Clients move onto more accurate variants where compute is spare and their SLO holds whatever
  // size their link carries (plan_options::spare).
  bool use_spare = true;
  // The share by which a client's uplink may fall, unseen yet, that the lift leaves room for
  // (plan_options::lift_margin).
  double lift_margin = 0.25;
  // The share of each worker's throughput left unplanned (plan_options::headroom); 0: planned
  // full, as printed.
  double headroom = 0;
  // `extended` (the default): the paper's algorithms with the extensions above (the lift onto
  // spare compute, uploads timed at the uplink's dips, the dip quantile moved to a miss target)
  // and load clients that skip frames which cannot cross in time. `paper`: as the paper prints
  // it: no lift, uploads timed at the estimate (the harmonic mean over the last second), workers
  // planned full, and clients that send every frame (the parse sets use_spare, uplink_quantile,
  // miss_target, lift_margin and headroom off).
  std::string mode = "extended";
  bool paper() const { return mode == "paper"; }
};

// Its section, and its demands: it runs one variant per device itself (no scaler), on pipelines
// of one stage whose models take images.
policy_config config();

}  // namespace sloserve::sched::jellyfish
