// Algorithm 2 on a DAG of modules (split_latency) and plan_app: budgets, configuration sets, and
// budget moved between modules while the sets' total cost falls.

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>

#include "scheduling/policies/piccolo/detail.hpp"

namespace sloserve::sched::piccolo {

using namespace detail;

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

}  // namespace sloserve::sched::piccolo
