#include "scheduling/query_analyzer.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace sloserve {

namespace {
constexpr double inf = std::numeric_limits<double>::infinity();

// The most time that can be added to every stage's budget with each path from a root to a leaf
// still within its SLO (the leaf's own, else the pipeline's): min over paths of (that SLO - the
// path's budgets) / its stages. Exact, by the longest sum over paths of each length that ends at
// each stage.
double equal_slack_ms(const pipeline& p, const std::vector<double>& budget) {
  size_t n = p.stages.size();
  std::vector<std::vector<double>> longest(n, std::vector<double>(n + 1, -inf));  // [stage][stages on the path]
  double slack = inf;
  for (auto v : p.topo) {
    if (p.stages[v].parents.empty()) longest[v][1] = budget[v];
    for (auto u : p.stages[v].parents)
      for (size_t c = 1; c < n; ++c) longest[v][c + 1] = std::max(longest[v][c + 1], longest[u][c] + budget[v]);
    if (p.stages[v].children.empty())
      for (size_t c = 1; c <= n; ++c)
        if (longest[v][c] > -inf) slack = std::min(slack, (path_slo_ms(p, v) - longest[v][c]) / static_cast<double>(c));
  }
  return std::isfinite(slack) ? std::max(0.0, slack) : 0;
}
}  // namespace

int saturating_batch(const model_spec& m, double budget_ms, double overhead_ms) {
  double L = budget_ms - overhead_ms;
  int best = 0;
  double best_t = 0;
  for (int b : m.profile.plannable_batches(m.max_batch)) {
    double l = m.profile.latency_ms_at(b);
    if (2 * l > L || l <= 0) continue;
    double t = b / l;
    if (t >= best_t) best_t = t, best = b;
  }
  return best;
}

double max_throughput(const model_spec& m, double budget_ms, double overhead_ms) {
  int b = saturating_batch(m, budget_ms, overhead_ms);
  if (b == 0) return 0;
  return b / m.profile.latency_ms_at(b) * 1000.0;
}

std::vector<double> declared_fanout(const pipeline& p) {
  std::vector<double> f(p.stages.size(), 1.0);
  for (size_t i = 0; i < p.stages.size(); ++i)
    if (p.stages[i].fanout) f[i] = *p.stages[i].fanout;
  return f;
}

std::vector<double> stage_rates(const pipeline& p, double rate, const std::vector<double>& fanout) {
  std::vector<double> r(p.stages.size(), 0);
  for (auto v : p.topo) {
    auto& s = p.stages[v];
    double base = s.parents.size() == 1 ? r[s.parents[0]] : rate;
    r[v] = base * fanout[v];
  }
  return r;
}

double split_cost(const pipeline& p, const std::vector<double>& rates, const std::vector<double>& budget,
                  const throughput_fn& T) {
  double total = 0;
  for (size_t i = 0; i < p.stages.size(); ++i) {
    if (rates[i] <= 0) continue;
    double t = T(i, budget[i]);
    if (t <= 0) return inf;
    total += rates[i] / t;
  }
  return total;
}

namespace {

// A DAG unfolded into a tree of copies: copy k stands for stage of[k]; its children are kids[k];
// copies[v] counts the copies of stage v. Children come after their parents.
struct unfolded {
  std::vector<size_t> of;
  std::vector<std::vector<size_t>> kids;
  std::vector<size_t> copies;
  std::vector<size_t> roots;
};

unfolded unfold(const pipeline& p) {
  unfolded u;
  u.copies.assign(p.stages.size(), 0);
  std::vector<size_t> stack;
  for (auto r : p.roots()) {
    u.of.push_back(r);
    u.kids.emplace_back();
    stack.push_back(u.of.size() - 1);
  }
  u.roots = stack;
  while (!stack.empty()) {
    auto k = stack.back();
    stack.pop_back();
    ++u.copies[u.of[k]];
    for (auto c : p.stages[u.of[k]].children) {
      u.of.push_back(c);
      u.kids.emplace_back();
      u.kids[k].push_back(u.of.size() - 1);
      stack.push_back(u.of.size() - 1);
    }
  }
  return u;
}

// arg[k][t]: the budget (in steps) copy k takes in the least-cost split of its subtree within t
// steps, given cost[k][u], its share of its stage's devices at budget u; 0: none fits.
std::vector<std::vector<int>> least_cost_budgets(const unfolded& tree, const std::vector<std::vector<double>>& cost,
                                                 int steps) {
  const size_t m = tree.of.size();
  std::vector<std::vector<double>> dp(m, std::vector<double>(steps + 1, inf));
  std::vector<std::vector<int>> arg(m, std::vector<int>(steps + 1, 0));
  // Children come after their parents, so fill in reverse.
  for (size_t kk = m; kk-- > 0;) {
    if (tree.kids[kk].empty()) {
      // A leaf takes the cheapest budget within t: a running minimum (the least budget on ties).
      for (int t = 1; t <= steps; ++t) {
        dp[kk][t] = dp[kk][t - 1], arg[kk][t] = arg[kk][t - 1];
        if (cost[kk][t] < dp[kk][t]) dp[kk][t] = cost[kk][t], arg[kk][t] = t;
      }
      continue;
    }
    for (int t = 1; t <= steps; ++t) {
      for (int u = 1; u <= t; ++u) {
        double c = cost[kk][u];
        if (c == inf) continue;
        for (auto ch : tree.kids[kk]) {
          c += t - u >= 1 ? dp[ch][t - u] : inf;
          if (c == inf) break;
        }
        if (c < dp[kk][t]) dp[kk][t] = c, arg[kk][t] = u;
      }
    }
  }
  return arg;
}

}  // namespace

slo_split dp_split(const pipeline& p, const std::vector<double>& rates, const throughput_fn& T, int steps) {
  const double step = p.slo_ms / steps;
  auto tree = unfold(p);
  const size_t m = tree.of.size();
  // cost[k][u]: this copy's share of its stage's devices at budget u steps.
  std::vector<std::vector<double>> cost(m, std::vector<double>(steps + 1, inf));
  for (size_t k = 0; k < m; ++k) {
    auto v = tree.of[k];
    for (int u = 1; u <= steps; ++u) {
      if (rates[v] <= 0) {
        cost[k][u] = 0;
        continue;
      }
      double t = T(v, u * step);
      cost[k][u] = t > 0 ? rates[v] / t / tree.copies[v] : inf;
    }
  }
  auto arg = least_cost_budgets(tree, cost, steps);
  // Each stage's budget: the least any of its copies takes.
  std::vector<double> budget(p.stages.size(), inf);
  std::vector<std::pair<size_t, int>> walk;
  for (auto r : tree.roots) walk.emplace_back(r, steps);
  while (!walk.empty()) {
    auto [k, t] = walk.back();
    walk.pop_back();
    int u = arg[k][t];
    if (u == 0) return even_split(p);  // nothing fits anywhere: the baseline is as good as any
    budget[tree.of[k]] = std::min(budget[tree.of[k]], u * step);
    for (auto ch : tree.kids[k]) walk.emplace_back(ch, t - u);
  }
  // The DP takes the least budget that reaches each stage's best throughput; give the slack
  // back, the same time to each stage, so the longest path uses the whole SLO. T never falls as
  // L grows, so the cost does not rise, and queues get room to absorb bursts. Equal, not in
  // proportion to the budgets: what eats a stage's slack (a hop on the network, a stalled host, a
  // burst) takes as long at a stage of 50 us as at one of 50 ms, and a stage left a few ms would
  // drop its requests at the first stall though the query had time to spare.
  double extra = equal_slack_ms(p, budget);
  for (auto& b : budget) b += extra;
  return offsets_from_budgets(p, budget);
}

}  // namespace sloserve
