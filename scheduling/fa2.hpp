#pragma once
// FA2 (thesis 004 part I; ../shared/ALGORITHMS.md): the fewest instances for a pipeline tree
// under an end-to-end SLO, choosing each stage's batch size. Pure: no clocks, no I/O.
//
// A stage at batch b takes l(b) = d(b) + q(b): d is the quadratic fitted on its p99 profile and
// q(b) = (b − 1)/λ the wait to fill a batch at its arrival rate λ. It needs ⌈λ / h(b)⌉
// instances, h(b) = b / d(b). Every root-to-leaf path must fit the SLO. Time is in 1 ms slots
// (each stage's l rounded up), which the DP and any check of its plan share.
//
// Trees only: the transformation of ALGORITHMS.md for stages with several parents is not
// implemented yet.

#include <cstddef>
#include <vector>

#include "scheduling/profile_fit.hpp"

namespace sloserve::sched {

struct fa2_stage {
  profile_fit d;        // d(b) in ms (fit_quadratic on the profile)
  double rate = 0;      // requests/s arriving at this stage
  int max_batch = 1;
  std::vector<size_t> children;
};

// Slots (ms, rounded up) a stage takes at batch b; a very large number when b cannot fill
// (b > 1 with no traffic).
int fa2_slots(const fa2_stage& s, int b);
// Instances a stage needs at batch b.
int fa2_instances(const fa2_stage& s, int b);

struct fa2_plan {
  bool feasible = false;
  int total = 0;                // Σ instances
  std::vector<int> batch;       // per stage
  std::vector<int> instances;   // per stage
};

// OPT(s, t) = min over b with slots(b) ≤ t of instances(b) + Σ_children OPT(c, t − slots(b)),
// filled children first; ties go to the smaller batch. `stages` must form a tree at `root`.
fa2_plan fa2_tree(const std::vector<fa2_stage>& stages, size_t root, int slo_ms);

}  // namespace sloserve::sched
