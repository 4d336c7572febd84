#pragma once
// FA2 (thesis 004 part I): the fewest instances for a pipeline tree
// under an end-to-end SLO, choosing each stage's batch size. Pure: no clocks, no I/O.
//
// A stage at batch b takes l(b) = d(b) + q(b): d is the quadratic fitted on its p99 profile and
// q(b) = (b − 1)/λ the wait to fill a batch at its arrival rate λ. It needs ⌈λ / h(b)⌉
// instances, h(b) = b / d(b). Every root-to-leaf path must fit the SLO. Time is in 1 ms slots
// (each stage's l rounded up), which the DP and any check of its plan share.
//
// DAGs (stages with several parents) go through the graph transformation of ALGORITHMS.md
// first: see fa2_dag.

#include <cstddef>
#include <vector>

#include "scheduling/profile_fit.hpp"

namespace sloserve::sched {

struct fa2_stage {
  profile_fit d;    // d(b) in ms (fit_quadratic on the profile)
  double rate = 0;  // requests/s arriving at this stage
  int max_batch = 1;
  std::vector<size_t> children;
  // A leaf's own SLO (ms): every path that ends at it fits this (FA2's SLA_p, per path). 0: the
  // SLO fa2_dag is given, which is the largest (t_max).
  double slo_ms = 0;
};

// Slots (ms, rounded up) a stage takes at batch b; a very large number when b cannot fill
// (b > 1 with no traffic).
int fa2_slots(const fa2_stage& s, int b);
// Instances a stage needs at batch b.
int fa2_instances(const fa2_stage& s, int b);

struct fa2_plan {
  bool feasible = false;
  int total = 0;               // Σ instances
  std::vector<int> batch;      // per stage
  std::vector<int> instances;  // per stage
};

// OPT(s, t) = min over b with slots(b) ≤ t of instances(b) + Σ_children OPT(c, t − slots(b)),
// (a leaf with its own SLO: only where t − slots(b) ≥ slo_ms − its SLO),
// filled children first; ties go to the smaller batch. `stages` must form a tree at `root`.
fa2_plan fa2_tree(const std::vector<fa2_stage>& stages, size_t root, int slo_ms);

// The graph transformation for stages with several parents. While some stage has several
// parents, its incoming edge used by the fewest paths is removed, and every path through that
// edge is split into two pieces that share the path's SLO in proportion to their intensity
// (Σ over their stages of the mean d(b) over b = 1..16). Rates stay those of the DAG.
//
// The pieces become local constraints of the DP on the remaining forest:
// - a piece that starts at a root and ends at stage y must end within its share: a floor on
//   the budget left after y;
// - a piece that starts at stage x (not a root) must finish within its share of x's start: a
//   cap on the budget x is given (which also binds x's other descendants, conservatively).
// A path's SLO is its leaf's (fa2_stage::slo_ms), else `slo_ms`.
// Every DAG path is then the concatenation of pieces whose shares sum to its SLO, and a join
// starts after the last of its parents, so a plan that meets the forest's constraints meets
// every path of the DAG.
struct fa2_transform {
  std::vector<std::vector<size_t>> children;    // per stage: the edges kept (a forest)
  std::vector<std::pair<size_t, size_t>> cuts;  // the removed edges, in removal order
  std::vector<int> cap_ms;                      // per stage: largest budget at its start; -1 none
  std::vector<int> floor_ms;                    // per stage: least budget left after it; 0 none
  std::vector<size_t> roots;                    // stages without parents in the DAG
};
fa2_transform fa2_make_tree(const std::vector<fa2_stage>& stages, int slo_ms);

// FA2 on a DAG: `children` of each stage are its successors, and the stages nobody points at
// are the roots (several roots share a zero-cost virtual root). Plans per original stage.
// Paths to a leaf with an SLO of its own (fa2_stage::slo_ms, below `slo_ms`) fit that: the DP
// runs from t_max = `slo_ms`, and such a leaf must leave `slo_ms` − its SLO unspent, as the
// pieces of a cut path do.
fa2_plan fa2_dag(const std::vector<fa2_stage>& stages, int slo_ms);

}  // namespace sloserve::sched
