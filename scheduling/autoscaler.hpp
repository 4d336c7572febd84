#pragma once
// The scaler's per-stage decisions for the fa2, sponge and biscale policies (thesis 004), on
// what the monitor measured in the last second. Pure: the scaler
// actor feeds them and applies what they return through its provisioner.
//
// A stage runs `instances` instances of its model. Instance 0 is the one vertical scaling
// resizes in place (`cores`, `batch`); the others have one core each and run
// `horizontal_batch`.

#include <algorithm>
#include <deque>
#include <vector>

#include "pipelines/model.hpp"

namespace sloserve::sched {

struct scale_stage {
  core_latency l;  // l(b, c); FA2's d(b) is fitted to l(b, 1)
  int max_batch = 1;
  double budget_ms = 0;          // the stage's budget now, network time taken out
  double rate = 0;               // requests/s over the last second (headroom included)
  double predicted = 0;          // largest rate expected over the next horizontal period
  int queued = 0;                // requests waiting at instance 0
  std::vector<size_t> children;  // successors in the pipeline (FA2 plans the whole DAG)
  double slo_ms = 0;             // a leaf's own SLO (stages[].slo_ms; FA2's per-path SLOs); 0: none
  // Sponge's per-request budgets (ms left to the deadline): of each request queued at instance 0,
  // and on arrival of the stage's latest requests (clients' uploads differ, and so do these).
  std::vector<double> queue_budgets_ms;
  std::vector<double> arrival_budgets_ms;
};

// The budget a request about to arrive has: the `quantile` of the latest arrivals' (so a few
// clients on the slowest uplinks are not planned for alone), else the mean budget.
double arrival_budget_ms(const scale_stage& s, double quantile = 0.05);
// The budgets Sponge's EDF check takes: each queued request's, and one request about to arrive.
// Without a report of them, `queued` requests (at least one) at the mean budget.
std::vector<double> sponge_budgets(const scale_stage& s);

struct stage_shape {
  int instances = 1;
  int cores = 1;             // of instance 0
  int batch = 1;             // of instance 0
  int horizontal_batch = 1;  // of the one-core instances
  double budget_ms = 0;      // FA2: the stage budget its plan assumes; 0: keep the split
  int base_instances = 1;    // biscale: what the horizontal loop planned; instances beyond it
                             // were started by the vertical loop for a surge and go with it
  int horizontal_cores = 1;  // of the instances beside instance 0 (ipa: each replica has its R)
  // Biscale: how many of the oldest instances run at (cores, batch), resized in place; the others
  // run at (horizontal_cores, horizontal_batch). 1: instance 0 alone.
  int vertical = 1;
  int planned_batch = 0;  // FA2: the batch its plan fills ((b - 1)/λ); 0: none (the cap is `batch`)
  int in_place() const { return std::clamp(vertical, instances > 0 ? 1 : 0, std::max(0, instances)); }
  int total_cores() const { return in_place() * cores + (instances - in_place()) * horizontal_cores; }
  bool operator==(const stage_shape&) const = default;
};

// The batch cap an instance runs with: the policy sizes capacity at `chosen`, and a device
// batches what is queued up to its cap, so the cap is the largest b whose wait-then-run time
// 2·l(b, c) fits the budget (never below `chosen`). A burst then finds room in larger batches.
int elastic_batch(const core_latency& l, int cores, double budget_ms, int chosen, int max_batch);

// FA2 every horizontal period: d(b) = the quadratic fitted to l(b, 1), and the DAG's fewest
// one-core instances for the predicted rates within the pipeline SLO. When no plan fits, each
// stage gets enough batch-1 instances for its rate. Never fewer than one instance a stage.
std::vector<stage_shape> fa2_shapes(const std::vector<scale_stage>& stages, double slo_ms);

// Sponge every vertical period: one instance, its fewest cores and then smallest batch
// (sponge_decide) for the rate, with instance 0's queue at the stage's budget.
stage_shape sponge_shape(const scale_stage& s, int max_cores);

// The fewest one-core instances (and their batch) that carry `rate` with 2·l(b, 1) within
// `budget_ms` (a request may wait out one batch, then run in the next); {0, 0} when not even
// a batch of one fits.
std::pair<int, int> one_core_instances(const core_latency& l, double rate, double budget_ms, int max_batch);

// Biscale every vertical period: instance 0 absorbs, in place, what the horizontal loop's
// one-core instances cannot carry (Sponge on the excess). When even max_cores cannot, the
// largest rate it can carry is found by bisection and one-core instances start now for the
// rest; they stop again once instance 0 can carry the excess by itself.
stage_shape biscale_vertical(const scale_stage& s, const stage_shape& now, int max_cores);

// Biscale every horizontal period: once the load is stable, serve the predicted rate with
// one-core instances at their best batch beside instance 0, which takes the rest in place:
// the mix with the fewest cores in all (then the most spare capacity). One-core instances give
// more per core (Amdahl) when the budget lets them batch; when a short budget caps their batch,
// a few cores in place carry more per core, and the mix says so. While the load is not stable,
// or nothing fits the budget, keep what runs. Stable, as in the thesis: the rates stayed within
// the band (`stable`) and the predicted rate gives the same plan as the current one.
stage_shape biscale_horizontal(const scale_stage& s, const stage_shape& now, bool stable, int max_cores);

// The largest batch a one-core instance may run under `budget_ms` (2·l(b, 1) within it), at most
// `cap`; 0 when not even a batch of one fits.
int one_core_batch(const core_latency& l, double budget_ms, int cap);

// Requests/s one one-core instance carries under `budget_ms` at its best batch; 0 when none fits.
// The scaler splits each pipeline's SLO with the query analyzer on this throughput.
double one_core_throughput(const core_latency& l, double budget_ms, int max_batch);

// Requests/s a shape carries when its batches are full.
double shape_capacity(const core_latency& l, const stage_shape& s);

// Whether per-second rates stay within ±band of their mean (and there are any).
bool stable_load(const std::deque<double>& rates, double band);

}  // namespace sloserve::sched
