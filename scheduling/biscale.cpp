#include "scheduling/biscale.hpp"

#include <climits>
#include <cmath>

namespace sloserve::sched {
namespace {
double fill_wait_ms(int b, double rate) {
  return b > 1 ? (b - 1) * 1000.0 / rate : 0;
}
}  // namespace

std::pair<int, int> vertical_fit(const core_latency& l, double rate, double budget_ms, int max_cores, int max_batch) {
  for (int c = 1; c <= max_cores; ++c)
    for (int b = 1; b <= max_batch; ++b)
      if (l.throughput(b, c) >= rate && l.at(b, c) + fill_wait_ms(b, rate) <= budget_ms) return {c, b};
  return {0, 0};
}

biscale_plan biscale(const core_latency& l, double rate, double budget_ms, int max_cores, int max_batch) {
  biscale_plan p;
  if (rate <= 0) return {true, 0, 0, 0, 0, 0};
  auto whole = vertical_fit(l, rate, budget_ms, max_cores, max_batch);
  if (whole.first) return {true, whole.first, whole.second, rate, 0, 0};
  // The largest share the vertical instance can carry.
  double left = 0, right = rate;
  for (int i = 0; i < 50; ++i) {
    double mid = left + (right - left) / 2;
    if (vertical_fit(l, mid, budget_ms, max_cores, max_batch).first)
      left = mid;
    else
      right = mid;
  }
  if (left > 0) {
    auto v = vertical_fit(l, left, budget_ms, max_cores, max_batch);
    p.cores = v.first, p.batch = v.second, p.vertical_rate = left;
  }
  // The rest on one-core instances behind one queue: batches of b wait (b − 1)/rest to fill.
  double rest = rate - p.vertical_rate;
  int best = INT_MAX;
  for (int b = 1; b <= max_batch; ++b) {
    if (l.at(b, 1) + fill_wait_ms(b, rest) > budget_ms) continue;
    int n = static_cast<int>(std::ceil(rest / l.throughput(b, 1) - 1e-9));
    if (n < best) best = n, p.instance_batch = b;
  }
  if (best == INT_MAX) return {};
  p.instances = best;
  p.feasible = true;
  return p;
}

}  // namespace sloserve::sched
