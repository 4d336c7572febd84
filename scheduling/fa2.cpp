#include "scheduling/fa2.hpp"

#include <climits>
#include <cmath>
#include <functional>

namespace sloserve::sched {
namespace {
constexpr int never = INT_MAX / 4;
}

int fa2_slots(const fa2_stage& s, int b) {
  double d = s.d.at(b);
  if (b > 1 && s.rate <= 0) return never;
  double q = b > 1 ? (b - 1) * 1000.0 / s.rate : 0;
  return static_cast<int>(std::ceil(d + q - 1e-9));
}

int fa2_instances(const fa2_stage& s, int b) {
  double d = s.d.at(b);
  if (s.rate <= 0) return 0;
  double h = d > 0 ? b * 1000.0 / d : INFINITY;
  return static_cast<int>(std::ceil(s.rate / h - 1e-9));
}

fa2_plan fa2_tree(const std::vector<fa2_stage>& stages, size_t root, int slo_ms) {
  fa2_plan plan;
  if (slo_ms < 0 || root >= stages.size()) return plan;
  auto T = static_cast<size_t>(slo_ms);
  // opt[s][t], and the batch that achieves it.
  std::vector<std::vector<int>> opt(stages.size()), pick(stages.size());
  std::function<void(size_t)> fill = [&](size_t s) {
    for (auto c : stages[s].children) fill(c);
    opt[s].assign(T + 1, never);
    pick[s].assign(T + 1, 0);
    for (int b = 1; b <= stages[s].max_batch; ++b) {
      auto slots = fa2_slots(stages[s], b);
      if (slots < 0 || static_cast<size_t>(slots) > T) continue;
      auto n = fa2_instances(stages[s], b);
      for (auto t = static_cast<size_t>(slots); t <= T; ++t) {
        long cost = n;
        for (auto c : stages[s].children) cost += opt[c][t - static_cast<size_t>(slots)];
        if (cost < opt[s][t]) opt[s][t] = static_cast<int>(cost), pick[s][t] = b;
      }
    }
  };
  fill(root);
  if (opt[root][T] >= never) return plan;
  plan.feasible = true;
  plan.total = opt[root][T];
  plan.batch.assign(stages.size(), 0);
  plan.instances.assign(stages.size(), 0);
  std::function<void(size_t, size_t)> back = [&](size_t s, size_t t) {
    int b = pick[s][t];
    plan.batch[s] = b;
    plan.instances[s] = fa2_instances(stages[s], b);
    for (auto c : stages[s].children) back(c, t - static_cast<size_t>(fa2_slots(stages[s], b)));
  };
  back(root, T);
  return plan;
}

}  // namespace sloserve::sched
