// The references the tests and bench_planners compare Piccolo's plans with: every set of machines
// per module, every split of a chain's SLO on a grid.

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>

#include "scheduling/policies/piccolo/detail.hpp"

namespace sloserve::sched::piccolo {

using namespace detail;

double brute_force_module(const std::vector<config>& configs, double rate, double budget_s) {
  double best = inf;
  size_t n = configs.size();
  std::vector<machine> machines;
  // The last machine carries what is left; it may be padded with dummies to what its batch
  // needs in time, or to a whole machine (which then takes batches in turn with its row).
  auto evaluate = [&]() {
    auto filled = machines;
    double left = rate;
    for (auto& m : filled) {
      m.rate = std::min(configs[m.config].throughput(), left);
      left -= m.rate;
    }
    auto& last = filled.back();
    auto& c = configs[last.config];
    std::vector<double> pads{last.rate, c.throughput()};
    if (budget_s > c.duration_s) pads.push_back(c.rate_needed(budget_s));
    for (double r : pads) {
      if (r < last.rate - eps || r > c.throughput() + 1e-6) continue;
      auto trial = filled;
      trial.back().rate = r;
      if (worst_case(configs, trial) > budget_s + eps) continue;
      best = std::min(best, cost_of(configs, trial));
    }
  };
  std::function<void(size_t, double)> walk = [&](size_t k, double capacity) {
    if (k == n) return;
    walk(k + 1, capacity);  // none of config k
    size_t added = 0;
    while (true) {
      machines.push_back({k, 0});
      ++added;
      capacity += configs[k].throughput();
      if (capacity >= rate - eps) {  // every machine used: the last one ends the set
        evaluate();
        break;
      }
      walk(k + 1, capacity);
    }
    machines.resize(machines.size() - added);
  };
  if (rate <= eps) return 0;
  walk(0, 0);
  return best;
}

double brute_force_chain(const app& app, int grid) {
  size_t n = app.modules.size();
  if (n == 0 || grid < static_cast<int>(n)) return inf;
  double step = app.slo_s / grid;
  std::vector<std::vector<config>> sorted;
  for (auto& m : app.modules) sorted.push_back(by_ratio(m.configs));
  std::vector<std::vector<double>> at(n, std::vector<double>(static_cast<size_t>(grid) + 1, -1));
  auto cost = [&](size_t m, int k) {
    auto& c = at[m][static_cast<size_t>(k)];
    if (c < 0) c = brute_force_module(sorted[m], app.modules[m].rate, k * step);
    return c;
  };
  double best = inf;
  std::function<void(size_t, int, double)> split = [&](size_t m, int left, double sum) {
    if (sum >= best) return;
    if (m + 1 == n) {
      best = std::min(best, sum + cost(m, left));
      return;
    }
    for (int k = 1; k <= left - static_cast<int>(n - m - 1); ++k) split(m + 1, left - k, sum + cost(m, k));
  };
  split(0, grid, 0);
  return best;
}

}  // namespace sloserve::sched::piccolo
