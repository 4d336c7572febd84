#pragma once
// The query analyzer (thesis 002 §3.4.2): split a pipeline's SLO over its stages so that the
// devices it needs, sum_i rate_i / T_i(budget_i), are fewest, with every root-to-leaf path
// within the SLO.

#include <functional>
#include <vector>

#include "pipelines/pipeline.hpp"

namespace sloserve {

// T_i(L): requests/s one device sustains for stage i under budget L ms (0 when none fits).
using throughput_fn = std::function<double(size_t stage, double budget_ms)>;

// The Nexus rule on a dedicated device: the largest batch b with 2·l(b) <= L - overhead, and
// T = b / l(b). Batches are those the profile lets the planner choose.
double max_throughput(const model_spec& m, double budget_ms, double overhead_ms = 0);
// The batch that achieves max_throughput; 0 when none fits.
int saturating_batch(const model_spec& m, double budget_ms, double overhead_ms = 0);

// Invocations per second of every stage when the pipeline receives `rate` queries/s.
// `fanout[i]` is stage i's invocations per invocation of its parent (measured, or the config's
// `fanout`, or 1). A join runs once per query times its own fanout.
std::vector<double> stage_rates(const pipeline& p, double rate, const std::vector<double>& fanout);
// The config's fanouts (1 where unset).
std::vector<double> declared_fanout(const pipeline& p);

// Devices the split needs: sum of rate_i / T_i(budget_i); infinity when some T_i is 0.
double split_cost(const pipeline& p, const std::vector<double>& rates, const std::vector<double>& budget_ms,
                  const throughput_fn& T);

// The DP over budgets discretised in `steps` equal parts of the SLO.
// - Trees: exact over the grid. dp[v][t] = min over u <= t of cost_v(u) + sum over children c
//   of dp[c][t - u]; u may reach t, so a leaf can take all that is left.
// - DAGs with joins: the DAG is unfolded into a tree (a join appears under each parent, its
//   cost shared among the copies), and the join keeps the smallest budget any copy got, so
//   every path stays within the SLO. Not always optimal on DAGs; always valid.
// Budgets are then scaled up evenly until the longest path uses the whole SLO.
slo_split dp_split(const pipeline& p, const std::vector<double>& rates, const throughput_fn& T, int steps = 100);

}  // namespace sloserve
