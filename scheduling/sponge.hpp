#pragma once
// Sponge (thesis 004 part II): in-place vertical scaling of one model
// under per-request budgets. Pure: no clocks, no I/O.

#include <vector>

#include "pipelines/model.hpp"

namespace sloserve::sched {

using sloserve::core_latency;  // l(b, c) = γ·b/c + ε/c + δ·b + η (pipelines/model.hpp)

struct grid_point {
  int batch = 1;
  int cores = 1;
  double latency_ms = 0;
};

// Least squares over a (batch × cores) profile grid. False when the grid cannot determine the
// four parameters (fewer than two batch sizes or two core counts).
bool fit_core_latency(const std::vector<grid_point>& grid, core_latency& out);

struct sponge_choice {
  int cores = 0;
  int batch = 0;
  bool feasible = false;  // false: nothing up to the limits keeps up; the choice is the most cores
                          // and the batch with the highest throughput
};

// The decision Sponge takes every second. `budgets_ms`: the remaining budget of every queued
// request (its SLO less its network time less its wait so far). The first (fewest cores, then
// smallest batch) c ≤ max_cores, b ≤ max_batch such that h(b, c) ≥ rate and, taking the queue
// in EDF order in batches of b, each batch finishes within the smallest budget in it, counting
// the batches before it.
sponge_choice sponge_decide(const core_latency& l, double rate, std::vector<double> budgets_ms, int max_cores,
                            int max_batch);

}  // namespace sloserve::sched
