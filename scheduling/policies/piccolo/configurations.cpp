#include "scheduling/policies/piccolo/configurations.hpp"

#include <algorithm>
#include <cmath>
#include <functional>

#include "scheduling/policies/piccolo/detail.hpp"

namespace sloserve::sched::piccolo {

using namespace detail;

namespace {

bool full(const config& c, const machine& m) {
  return m.rate >= c.throughput() - 1e-6;
}

module_plan finish(const std::vector<config>& configs, std::vector<machine> machines, double dummy, double budget_s) {
  std::stable_sort(machines.begin(), machines.end(), [](auto& a, auto& b) { return a.config < b.config; });
  module_plan p;
  p.machines = std::move(machines);
  p.dummy = dummy;
  p.cost = cost_of(configs, p.machines);
  p.worst_case_s = worst_case(configs, p.machines);
  p.feasible = p.worst_case_s <= budget_s + eps;
  return p;
}

}  // namespace

std::vector<config> by_ratio(std::vector<config> configs) {
  std::stable_sort(configs.begin(), configs.end(), [](auto& a, auto& b) {
    if (std::abs(a.ratio() - b.ratio()) > 1e-12 * std::max(a.ratio(), b.ratio())) return a.ratio() > b.ratio();
    return a.duration_s < b.duration_s;
  });
  return configs;
}

// A machine collects its batches from its own rate and every machine dispatched after it; whole
// machines of one configuration in a row take batches in turn, so each collects at the rate of
// the whole row and what follows it (Theorem 1). A machine at partial capacity collects from its
// own rate and what follows.
std::vector<double> worst_cases(const std::vector<config>& configs, const std::vector<machine>& machines) {
  size_t n = machines.size();
  std::vector<double> suffix(n + 1, 0), out(n, 0);
  for (size_t i = n; i-- > 0;) suffix[i] = suffix[i + 1] + machines[i].rate;
  size_t run = 0;  // where the row of whole machines that i is in starts
  for (size_t i = 0; i < n; ++i) {
    auto& m = machines[i];
    auto& c = configs[m.config];
    bool whole = full(c, m);
    if (!whole || i == 0 || machines[i - 1].config != m.config || !full(c, machines[i - 1])) run = i;
    if (m.rate <= eps) continue;
    double w = suffix[whole ? run : i];
    out[i] = c.worst_case(w);
  }
  return out;
}

double cost_of(const std::vector<config>& configs, const std::vector<machine>& machines) {
  double cost = 0;
  for (auto& m : machines) cost += configs[m.config].price * m.rate / configs[m.config].throughput();
  return cost;
}

namespace {

constexpr size_t none = static_cast<size_t>(-1);

// Algorithm 1 over configs[first...]; configuration `fewer` takes one whole machine fewer than
// it could (what it leaves goes on down).
module_plan generate_from(const std::vector<config>& configs, double rate, double budget_s, size_t first,
                          size_t fewer = none) {
  std::vector<machine> machines;
  double rw = rate, dummy = 0;
  size_t k = first, n = configs.size();
  while (rw > eps) {
    while (k < n && configs[k].worst_case(rw) > budget_s + eps) ++k;
    if (k == n) {
      // No configuration fills a batch of the residual in time: pad it with dummies, the
      // cheapest way that fits: up to the rate a configuration's batch needs, or to a whole
      // machine (which takes batches in turn with a row of its kind).
      std::vector<machine> options;
      for (size_t j = first; j < n; ++j) {
        auto& c = configs[j];
        if (c.rate_needed(budget_s) <= c.throughput() + 1e-6)
          options.push_back({j, std::max(rw, c.rate_needed(budget_s))});
        if (c.throughput() >= rw) options.push_back({j, c.throughput()});
      }
      std::stable_sort(options.begin(), options.end(), [&](auto& a, auto& b) {
        return configs[a.config].price * a.rate / configs[a.config].throughput() <
               configs[b.config].price * b.rate / configs[b.config].throughput();
      });
      for (auto& o : options) {
        auto with = machines;
        with.push_back({o.config, std::min(o.rate, configs[o.config].throughput())});
        auto p = finish(configs, std::move(with), dummy + o.rate - rw, budget_s);
        p.padded = o.config;
        if (p.feasible) return p;
      }
      return {};
    }
    auto& c = configs[k];
    double whole = std::floor(rw / c.throughput() + 1e-9);
    if (k == fewer && whole >= 1) {
      for (int i = 0; i + 1 < static_cast<int>(whole); ++i) machines.push_back({k, c.throughput()});
      rw = std::max(0.0, rw - (whole - 1) * c.throughput());
      fewer = none;
      ++k;
    } else if (whole >= 1) {
      for (int i = 0; i < static_cast<int>(whole); ++i) machines.push_back({k, c.throughput()});
      rw = std::max(0.0, rw - whole * c.throughput());
      if (rw < 1e-6) rw = 0;
    } else {
      machines.push_back({k, rw});
      rw = 0;
    }
  }
  return finish(configs, std::move(machines), dummy, budget_s);
}

// Algorithm 1 from configs[first], then the dummy generator on its set.
module_plan with_dummies(const std::vector<config>& configs, double rate, double budget_s, size_t first, size_t fewer) {
  auto best = generate_from(configs, rate, budget_s, first, fewer);
  if (!best.feasible) return best;
  auto base = best;
  // Every configuration of the profile, whether the set holds machines of it or not (n_i = 0).
  for (size_t ci = first; ci < configs.size(); ++ci) {
    auto& c = configs[ci];
    if (budget_s <= c.duration_s) continue;
    double leftover = 0;  // requests below c_i, dummies apart
    for (auto& m : base.machines)
      if (m.config > ci) leftover += m.rate;
    if (base.padded != none && base.padded > ci) leftover -= base.dummy;
    double dum = c.rate_needed(budget_s) - leftover;
    if (dum <= 1e-6 || leftover <= eps || leftover + dum > c.throughput() + 1e-6) continue;
    double dummies = (base.padded != none && base.padded <= ci ? base.dummy : 0) + dum;
    auto padded = generate_from(configs, rate + dummies, budget_s, first, fewer);
    padded.dummy += dummies;
    if (padded.feasible && padded.cost < best.cost - 1e-9) best = std::move(padded);
  }
  return best;
}

}  // namespace

module_plan generate_configs(const std::vector<config>& configs, double rate, double budget_s) {
  return generate_from(configs, rate, budget_s, 0);
}

module_plan plan_module(const std::vector<config>& configs, double rate, double budget_s) {
  module_plan best;
  auto consider = [&](module_plan p) {
    if (p.feasible && (!best.feasible || p.cost < best.cost - 1e-9)) best = std::move(p);
  };
  for (size_t first = 0; first < configs.size(); ++first) {
    // A start whose configuration does not fit at the whole rate makes the same set as the next
    // one that does (but for dummies, which the start from 0 tries on every configuration).
    if (first > 0 && configs[first].worst_case(rate) > budget_s + eps) continue;
    auto greedy = with_dummies(configs, rate, budget_s, first, none);
    // And with one whole machine fewer of a configuration it took whole machines of.
    for (size_t i = 0; i < greedy.machines.size(); ++i) {
      auto k = greedy.machines[i].config;
      if ((i == 0 || greedy.machines[i - 1].config != k) && full(configs[k], greedy.machines[i]))
        consider(with_dummies(configs, rate, budget_s, first, k));
    }
    consider(std::move(greedy));
  }
  return best;
}

module_plan two_config_plan(const std::vector<config>& configs, double rate, double budget_s) {
  // Round-robin dispatch: a machine collects its batch from its own share, so a whole machine's
  // worst case is 2d and one at rate f has d + b/f.
  auto fits = [&](const config& c, double f) { return c.worst_case(f) <= budget_s + eps; };
  std::vector<machine> majority;
  double rw = rate;
  for (size_t k = 0; k < configs.size(); ++k)
    if (fits(configs[k], configs[k].throughput())) {
      double whole = std::floor(rate / configs[k].throughput() + 1e-9);
      for (int i = 0; i < static_cast<int>(whole); ++i) majority.push_back({k, configs[k].throughput()});
      rw = std::max(0.0, rate - whole * configs[k].throughput());
      break;
    }
  if (rw < 1e-6) {
    module_plan p;
    p.feasible = !majority.empty() || rate <= eps;
    p.machines = majority;
    p.cost = cost_of(configs, majority);
    return p;
  }
  for (size_t j = 0; j < configs.size(); ++j) {
    auto& c = configs[j];
    double whole = std::floor(rw / c.throughput() + 1e-9), last = rw - whole * c.throughput();
    if (whole >= 1 && !fits(c, c.throughput())) continue;
    if (last > 1e-6 && !fits(c, last)) continue;
    auto machines = majority;
    for (int i = 0; i < static_cast<int>(whole); ++i) machines.push_back({j, c.throughput()});
    if (last > 1e-6) machines.push_back({j, last});
    module_plan p;
    p.feasible = true;
    p.cost = cost_of(configs, machines);
    p.machines = std::move(machines);
    p.worst_case_s = budget_s;
    return p;
  }
  return {};
}

double latency_cost_efficiency(const config& from, const config& to, double rate) {
  double saved = from.price * rate / from.throughput() - to.price * rate / to.throughput();
  double added = to.worst_case(rate) - from.worst_case(rate);
  return saved / added;
}

}  // namespace sloserve::sched::piccolo
