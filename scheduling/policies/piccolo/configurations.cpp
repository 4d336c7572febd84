#include "scheduling/policies/piccolo/configurations.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>

namespace sloserve::sched::piccolo {
namespace {

constexpr double eps = 1e-9;
constexpr double inf = std::numeric_limits<double>::infinity();
constexpr int chain_grid = 60;  // steps of the SLO the chain split searches

bool full(const config& c, const machine& m) {
  return m.rate >= c.throughput() - 1e-6;
}

double worst_case(const std::vector<config>& configs, const std::vector<machine>& machines) {
  auto w = worst_cases(configs, machines);
  return w.empty() ? 0 : *std::max_element(w.begin(), w.end());
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

namespace {

// Modules in an order where every module comes after those feeding it; empty on a cycle.
std::vector<size_t> topological(const app& app) {
  size_t n = app.modules.size();
  std::vector<int> into(n, 0);
  for (auto& m : app.modules)
    for (auto x : m.next)
      if (x < n) ++into[x];
  std::vector<size_t> order;
  for (size_t i = 0; i < n; ++i)
    if (into[i] == 0) order.push_back(i);
  for (size_t k = 0; k < order.size(); ++k)
    for (auto x : app.modules[order[k]].next)
      if (x < n && --into[x] == 0) order.push_back(x);
  if (order.size() != n) order.clear();
  return order;
}

// Per module: the longest path from a source through it (inclusive), and from it to a sink
// (inclusive), under per-module latencies `lat`.
struct paths {
  std::vector<double> to, from;
  double critical = 0;
  double through(size_t m, const std::vector<double>& lat) const { return to[m] + from[m] - lat[m]; }
};

paths longest(const app& app, const std::vector<size_t>& order, const std::vector<double>& lat) {
  size_t n = app.modules.size();
  paths p{std::vector<double>(n, 0), std::vector<double>(n, 0), 0};
  for (auto m : order) {
    p.to[m] += lat[m];
    for (auto x : app.modules[m].next) p.to[x] = std::max(p.to[x], p.to[m]);
  }
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    double after = 0;
    for (auto x : app.modules[*it].next) after = std::max(after, p.from[x]);
    p.from[*it] = lat[*it] + after;
    p.critical = std::max(p.critical, p.from[*it]);
  }
  return p;
}

}  // namespace

split split_latency(const app& app) {
  split s;
  auto order = topological(app);
  size_t n = app.modules.size();
  if (order.empty() || n == 0) return s;
  auto wcl = [&](size_t m, size_t c) {
    auto& x = app.modules[m].configs[c];
    return x.worst_case(app.modules[m].rate);
  };
  auto cost = [&](size_t m, size_t c) {
    auto& x = app.modules[m].configs[c];
    return x.price * app.modules[m].rate / x.throughput();
  };
  std::vector<size_t> cur(n, 0);
  std::vector<double> lat(n, 0);
  for (size_t m = 0; m < n; ++m) {
    if (app.modules[m].configs.empty() || !(app.modules[m].rate > 0)) return s;
    for (size_t c = 1; c < app.modules[m].configs.size(); ++c)
      if (wcl(m, c) < wcl(m, cur[m]) - eps || (wcl(m, c) <= wcl(m, cur[m]) + eps && cost(m, c) < cost(m, cur[m])))
        cur[m] = c;
    lat[m] = wcl(m, cur[m]);
  }
  if (longest(app, order, lat).critical > app.slo_s + eps) return s;
  while (true) {
    double best_lc = -inf;
    size_t bm = n, bc = 0;
    bool at_once = false;
    for (size_t m = 0; m < n && !at_once; ++m)
      for (size_t c = 0; c < app.modules[m].configs.size(); ++c) {
        double saved = cost(m, cur[m]) - cost(m, c), added = wcl(m, c) - lat[m];
        if (saved <= 1e-12) continue;
        if (added <= 0) {  // faster and cheaper: taken at once
          bm = m, bc = c, at_once = true;
          break;
        }
        auto trial = lat;
        trial[m] = wcl(m, c);
        if (longest(app, order, trial).critical > app.slo_s + eps) continue;
        if (saved / added > best_lc) best_lc = saved / added, bm = m, bc = c;
      }
    if (bm == n) break;
    cur[bm] = bc;
    lat[bm] = wcl(bm, bc);
  }
  auto p = longest(app, order, lat);
  s.feasible = true;
  s.config = cur;
  for (size_t m = 0; m < n; ++m) s.budget_s.push_back(lat[m] * app.slo_s / p.through(m, lat));
  return s;
}

namespace {

// Budgets where a module's configuration set changes: where each configuration's batch fills in
// time at the module's rate, at what is left after whole machines of any configuration, and at
// a whole machine's own rate (2d).
std::vector<double> breakpoints(const std::vector<config>& configs, double rate) {
  std::vector<double> rests{rate};
  for (auto& c : configs) {
    double rest = rate - std::floor(rate / c.throughput()) * c.throughput();
    if (rest > 1e-6) rests.push_back(rest);
  }
  std::vector<double> out;
  for (auto& c : configs) {
    out.push_back(2 * c.duration_s);
    for (double r : rests) out.push_back(c.worst_case(r));
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

// The splitter weighs each module as one configuration; the sets the generator makes cost in
// steps of their own. Budget moves from one module to another (or from the slack of the paths
// through it) while a move lowers the total cost of the sets: the candidate budgets are each
// module's breakpoints, and what another module frees by moving down to one of its own.
void move_budget(const app& app, const std::vector<size_t>& order, const std::vector<std::vector<config>>& sorted,
                 app_plan& out) {
  size_t n = app.modules.size();
  std::vector<std::vector<double>> points;
  for (size_t m = 0; m < n; ++m) points.push_back(breakpoints(sorted[m], app.modules[m].rate));
  std::vector<std::map<double, module_plan>> seen(n);
  auto plan_at = [&](size_t m, double b) -> const module_plan& {
    auto it = seen[m].find(b);
    if (it == seen[m].end()) it = seen[m].emplace(b, plan_module(sorted[m], app.modules[m].rate, b)).first;
    return it->second;
  };
  auto cost_at = [&](size_t m, double b) {
    auto& p = plan_at(m, b);
    return p.feasible ? p.cost : inf;
  };
  auto fits = [&](const std::vector<double>& budgets) {
    return longest(app, order, budgets).critical <= app.slo_s + 1e-9;
  };
  for (int round = 0; round < 64; ++round) {
    double best_gain = 1e-9;
    std::vector<double> best_budgets;
    for (size_t j = 0; j < n; ++j) {
      auto targets = points[j];
      targets.push_back(app.slo_s - longest(app, order, out.budget_s).through(j, out.budget_s) + out.budget_s[j]);
      for (size_t i = 0; i < n; ++i)
        if (i != j)
          for (double b : points[i])
            if (b < out.budget_s[i]) targets.push_back(out.budget_s[j] + out.budget_s[i] - b);
      for (double target : targets) {
        double add = target - out.budget_s[j];
        if (add <= 1e-9) continue;
        double gain = out.modules[j].cost - cost_at(j, target);
        auto budgets = out.budget_s;
        budgets[j] = target;
        if (fits(budgets)) {
          if (gain > best_gain) best_gain = gain, best_budgets = budgets;
          continue;
        }
        for (size_t i = 0; i < n; ++i) {
          if (i == j || out.budget_s[i] - add <= 1e-9) continue;
          auto trial = budgets;
          trial[i] -= add;
          if (!fits(trial)) continue;
          double g = gain + out.modules[i].cost - cost_at(i, trial[i]);
          if (g > best_gain) best_gain = g, best_budgets = trial;
        }
      }
    }
    if (best_budgets.empty()) {
      // Between breakpoints, dummies make costs fall smoothly with budget: sample what one
      // module may pass another, then around the best sample.
      constexpr int samples = 16;
      for (size_t i = 0; i < n; ++i)
        for (size_t j = 0; j < n; ++j) {
          if (i == j) continue;
          double lo = 0, hi = out.budget_s[i], base = out.modules[i].cost + out.modules[j].cost;
          for (int pass = 0; pass < 2; ++pass) {
            double step = (hi - lo) / samples, at = -1;
            for (int k = 1; k < samples; ++k) {
              double add = lo + k * step;
              auto trial = out.budget_s;
              trial[i] -= add;
              trial[j] += add;
              if (!fits(trial)) continue;
              auto& pi = plan_at(i, trial[i]);
              auto& pj = plan_at(j, trial[j]);
              if (!pi.feasible || !pj.feasible) continue;
              double g = base - pi.cost - pj.cost;
              if (g > best_gain) best_gain = g, best_budgets = trial, at = add;
            }
            if (at < 0) break;
            lo = std::max(0.0, at - step), hi = std::min(out.budget_s[i], at + step);
          }
        }
      if (best_budgets.empty()) return;
    }
    for (size_t m = 0; m < n; ++m)
      if (best_budgets[m] != out.budget_s[m]) out.modules[m] = plan_at(m, best_budgets[m]);
    out.budget_s = best_budgets;
  }
}

}  // namespace

namespace {

// From per-module budgets within the SLO: the sets, the unused budget handed back, the moves.
app_plan plan_from(const app& app, const std::vector<size_t>& order, const std::vector<std::vector<config>>& sorted,
                   std::vector<double> budgets, bool moves) {
  app_plan out;
  size_t n = app.modules.size();
  out.budget_s = std::move(budgets);
  for (size_t m = 0; m < n; ++m) {
    out.modules.push_back(plan_module(sorted[m], app.modules[m].rate, out.budget_s[m]));
    if (!out.modules.back().feasible) return out;
  }
  // The budget a module's plan leaves unused, on every path through it, goes back to the
  // modules, the costliest first, where a larger budget is cheaper. From here on a module's
  // budget is what its plan needs.
  for (size_t m = 0; m < n; ++m) out.budget_s[m] = out.modules[m].worst_case_s;
  std::vector<size_t> by_cost(n);
  for (size_t m = 0; m < n; ++m) by_cost[m] = m;
  std::stable_sort(by_cost.begin(), by_cost.end(),
                   [&](size_t a, size_t b) { return out.modules[a].cost > out.modules[b].cost; });
  for (auto m : by_cost) {
    auto& lat = out.budget_s;
    double slack = app.slo_s - longest(app, order, lat).through(m, lat);
    if (slack <= 1e-6) continue;
    auto wider = plan_module(sorted[m], app.modules[m].rate, lat[m] + slack);
    if (wider.feasible && wider.cost < out.modules[m].cost - 1e-9) {
      out.modules[m] = std::move(wider);
      out.budget_s[m] = out.modules[m].worst_case_s;
    }
  }
  if (moves && n > 1) move_budget(app, order, sorted, out);
  out.feasible = true;
  for (auto& pm : out.modules) out.cost += pm.cost, out.dummy += pm.dummy;
  return out;
}

// A chain: module order[k] feeds order[k + 1] alone.
bool is_chain(const app& app, const std::vector<size_t>& order) {
  for (size_t k = 0; k < order.size(); ++k) {
    auto& next = app.modules[order[k]].next;
    if (k + 1 < order.size() ? next != std::vector<size_t>{order[k + 1]} : !next.empty()) return false;
  }
  return true;
}

// On a chain the split is a sum: the cheapest budgets on a grid of `grid` steps of the SLO,
// each module's cost there from plan_module, by dynamic programming.
std::vector<double> chain_budgets(const app& app, const std::vector<size_t>& order,
                                  const std::vector<std::vector<config>>& sorted, int grid) {
  size_t n = order.size();
  double step = app.slo_s / grid;
  auto g = static_cast<size_t>(grid);
  std::vector<std::vector<double>> cost(n, std::vector<double>(g + 1, inf));
  std::vector<std::vector<size_t>> from(n, std::vector<size_t>(g + 1, 0));  // where cost[k][x] is planned
  for (size_t k = 0; k < n; ++k)
    for (size_t x = 1; x + (n - 1 - k) <= g; ++x) {
      auto m = order[k];
      auto p = plan_module(sorted[m], app.modules[m].rate, static_cast<double>(x) * step);
      if (p.feasible) cost[k][x] = p.cost, from[k][x] = x;
      // More budget never has to cost more: a plan that fits less fits more.
      if (x > 1 && cost[k][x - 1] <= cost[k][x]) cost[k][x] = cost[k][x - 1], from[k][x] = from[k][x - 1];
    }
  // best[k][used]: the least cost of modules 0..k within `used` steps.
  std::vector<std::vector<double>> best(n, std::vector<double>(g + 1, inf));
  std::vector<std::vector<size_t>> took(n, std::vector<size_t>(g + 1, 0));
  for (size_t used = 1; used <= g; ++used) best[0][used] = cost[0][used], took[0][used] = used;
  for (size_t k = 1; k < n; ++k)
    for (size_t used = k + 1; used <= g; ++used)
      for (size_t x = 1; x < used; ++x)
        if (double c = best[k - 1][used - x] + cost[k][x]; c < best[k][used]) best[k][used] = c, took[k][used] = x;
  std::vector<double> budgets(app.modules.size(), 0);
  if (!std::isfinite(best[n - 1][g])) return {};
  for (size_t k = n, used = g; k-- > 0;) {
    auto x = took[k][used];
    budgets[order[k]] = static_cast<double>(from[k][x]) * step;
    used -= x;
  }
  return budgets;
}

}  // namespace

app_plan plan_app(const app& app) {
  auto split = split_latency(app);
  if (!split.feasible) return {};
  auto order = topological(app);
  std::vector<std::vector<config>> sorted;
  for (auto& m : app.modules) sorted.push_back(by_ratio(m.configs));
  auto keep = [](app_plan& best, app_plan other) {
    if (other.feasible && (!best.feasible || other.cost < best.cost - 1e-9)) best = std::move(other);
  };
  if (app.modules.size() > 1 && is_chain(app, order)) {
    // A chain: the splitter's budgets, and the grid's cheapest, each with the unused budget
    // handed back; the cheaper stands.
    auto out = plan_from(app, order, sorted, split.budget_s, false);
    if (auto grid = chain_budgets(app, order, sorted, chain_grid); !grid.empty())
      keep(out, plan_from(app, order, sorted, grid, false));
    return out;
  }
  auto out = plan_from(app, order, sorted, split.budget_s, true);
  if (app.modules.size() == 1) return out;
  // A second start, at the other end: budgets in proportion to each module's cheapest single
  // configuration (the splitter starts from the fastest); the cheaper result stands.
  std::vector<double> lat;
  for (auto& m : app.modules) {
    auto cheapest = by_ratio(m.configs).front();
    lat.push_back(cheapest.worst_case(m.rate));
  }
  auto p = longest(app, order, lat);
  std::vector<double> budgets;
  for (size_t m = 0; m < lat.size(); ++m) budgets.push_back(lat[m] * app.slo_s / p.through(m, lat));
  keep(out, plan_from(app, order, sorted, budgets, true));
  return out;
}

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
