#pragma once
// Biscale (thesis 004 part III): one in-place vertically scaled
// instance absorbs what it can of a stage's load; the rest is served horizontally by one-core
// instances, which give more throughput per core (Amdahl). Pure: no clocks, no I/O.

#include <utility>

#include "scheduling/sponge.hpp"

namespace sloserve::sched {

struct biscale_plan {
  bool feasible = false;
  int cores = 0, batch = 0;  // the vertical instance
  double vertical_rate = 0;  // requests/s it carries
  int instances = 0;         // one-core instances for the rest
  int instance_batch = 0;
  int total_cores() const { return cores + instances; }
};

// Whether one instance of c ≤ max_cores cores carries `rate` within `budget_ms`: some (c, b)
// with h(b, c) ≥ rate and l(b, c) + (b − 1)/rate ≤ budget (the wait to fill a batch counted, as
// in FA2). The fewest cores, then the smallest batch; {0, 0} when none.
std::pair<int, int> vertical_fit(const core_latency& l, double rate, double budget_ms, int max_cores, int max_batch);

// The largest rate the vertical instance carries is found by bisection (midpoint
// left + (right − left)/2); the remainder goes to ⌈rest / h(b, 1)⌉ one-core instances at the
// batch that needs the fewest of them.
biscale_plan biscale(const core_latency& l, double rate, double budget_ms, int max_cores, int max_batch);

}  // namespace sloserve::sched
