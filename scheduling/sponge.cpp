#include "scheduling/sponge.hpp"

#include <algorithm>
#include <set>

#include "scheduling/profile_fit.hpp"

namespace sloserve::sched {

bool fit_core_latency(const std::vector<grid_point>& grid, core_latency& out) {
  std::set<int> batches, cores;
  std::vector<std::vector<double>> rows;
  std::vector<double> y;
  for (auto& p : grid) {
    if (p.batch < 1 || p.cores < 1) return false;
    batches.insert(p.batch);
    cores.insert(p.cores);
    double b = p.batch, c = p.cores;
    rows.push_back({b / c, 1 / c, b, 1});
    y.push_back(p.latency_ms);
  }
  std::vector<double> coef;
  if (batches.size() < 2 || cores.size() < 2 || !least_squares(rows, y, coef)) return false;
  out = {coef[0], coef[1], coef[2], coef[3]};
  return true;
}

namespace {

// EDF batches of b over ascending budgets all finish in time on c cores.
bool batches_fit(const core_latency& l, const std::vector<double>& budgets, int b, int c) {
  double t = 0;
  for (size_t i = 0; i < budgets.size(); i += static_cast<size_t>(b)) {
    auto n = std::min(budgets.size() - i, static_cast<size_t>(b));
    t += l.at(static_cast<int>(n), c);
    if (t > budgets[i]) return false;  // budgets[i] is the smallest in this batch
  }
  return true;
}

}  // namespace

sponge_choice sponge_decide(const core_latency& l, double rate, std::vector<double> budgets_ms, int max_cores,
                            int max_batch) {
  std::sort(budgets_ms.begin(), budgets_ms.end());
  for (int c = 1; c <= max_cores; ++c)
    for (int b = 1; b <= max_batch; ++b)
      if (l.throughput(b, c) >= rate && batches_fit(l, budgets_ms, b, c)) return {c, b, true};
  sponge_choice best{max_cores, 1, false};
  for (int b = 2; b <= max_batch; ++b)
    if (l.throughput(b, max_cores) > l.throughput(best.batch, max_cores)) best.batch = b;
  return best;
}

}  // namespace sloserve::sched
