#pragma once
// Graft's part of the cluster file (`scheduler: {policy: graft, graft: {...}}`).

#include <vector>

#include "config/policy_config.hpp"

namespace sloserve::sched::graft {

// Each partitioned model's fragments (the layer where the server starts, the SLO left, the rate)
// are merged while the margin stays above `theta`, grouped about `group_size` a group, and
// re-aligned onto shared layers (scheduling/policies/graft/epoch.hpp).
struct options {
  double theta = 0.2;
  int group_size = 5;
  std::vector<double> weights{1, 1, 1};  // the grouping distance's factor weights: p, t, q
  // Re-alignments spent refining the groups by the cost they re-align to (fragments moved or
  // traded between groups while the sum falls); 0: the paper's grouping alone.
  int refine = 1000;
};

// Its section, and its demands: it plans every device itself (no scaler), and every pipeline is
// one stage on one partitioned model.
policy_config config();

}  // namespace sloserve::sched::graft
