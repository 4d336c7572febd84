#include <gtest/gtest.h>

#include <functional>
#include <limits>
#include <random>

#include "scheduling/query_analyzer.hpp"

namespace sloserve {
namespace {

pipeline chain_xy() {
  pipeline p;
  p.name = "xy";
  p.slo_ms = 100;
  p.stages = {{"X", "x", {}, {}}, {"Y", "y", {"X"}, {}}};
  std::vector<model_spec> models(2);
  models[0].name = "x";
  models[1].name = "y";
  EXPECT_TRUE(resolve(p, models).empty());
  return p;
}

// Thesis 002 Table 3.3: throughput of X and Y at batch latency 40, 50, 60 ms.
double table_3_3(size_t stage, double L) {
  static const double x[] = {200, 250, 300}, y[] = {300, 400, 500};
  const double* t = stage == 0 ? x : y;
  if (L >= 60 - 1e-9) return t[2];
  if (L >= 50 - 1e-9) return t[1];
  if (L >= 40 - 1e-9) return t[0];
  return 0;
}

TEST(query_analyzer, table_3_4_best_split_depends_on_alpha) {
  auto p = chain_xy();
  struct expect_t {
    double alpha, x, y, throughput;
  };
  for (auto e : {expect_t{0.1, 60, 40, 272.7}, expect_t{1, 50, 50, 153.8}, expect_t{10, 40, 60, 40.0}}) {
    auto rates = stage_rates(p, 1, {1, e.alpha});
    auto s = dp_split(p, rates, table_3_3, 10);
    EXPECT_DOUBLE_EQ(s.budget_ms[0], e.x) << "alpha " << e.alpha;
    EXPECT_DOUBLE_EQ(s.budget_ms[1], e.y) << "alpha " << e.alpha;
    // Per-GPU throughput is 1 / sum(alpha_i / T_i): the table's bold figures.
    EXPECT_NEAR(1 / split_cost(p, rates, s.budget_ms, table_3_3), e.throughput, 0.05);
  }
}

// A random tree of n stages: stage i > 0 hangs below a random earlier stage.
pipeline random_tree(std::mt19937_64& rng, int n) {
  pipeline p;
  p.name = "t";
  p.slo_ms = 100;
  std::vector<model_spec> models(1);
  models[0].name = "m";
  for (int i = 0; i < n; ++i) {
    stage s{"s" + std::to_string(i), "m", {}, {}};
    if (i > 0) s.after.push_back("s" + std::to_string(rng() % i));
    if (i > 0 && rng() % 2) s.fanout = 0.5 + (rng() % 30) / 10.0;
    p.stages.push_back(s);
  }
  EXPECT_TRUE(resolve(p, models).empty());
  return p;
}

TEST(query_analyzer, dp_equals_brute_force_on_random_trees) {
  std::mt19937_64 rng(11);
  const int steps = 12;
  for (int round = 0; round < 150; ++round) {
    int n = 1 + static_cast<int>(rng() % 4);
    auto p = random_tree(rng, n);
    std::vector<double> a(n), b(n);
    for (int i = 0; i < n; ++i) a[i] = 0.5 + (rng() % 100) / 10.0, b[i] = 1 + rng() % 20;
    // T(L): batch-aware, from l(b) = a·b + c with 2·l(b) <= L.
    throughput_fn T = [&](size_t i, double L) {
      double best = 0;
      for (int bb = 1; bb <= 64; ++bb)
        if (2 * (a[i] * bb + b[i]) <= L) best = std::max(best, bb / (a[i] * bb + b[i]) * 1000);
      return best;
    };
    auto rates = stage_rates(p, 50, declared_fanout(p));
    auto dp = dp_split(p, rates, T, steps);
    double dp_cost = split_cost(p, rates, dp.budget_ms, T);
    // Brute force: every budget vector on the grid whose paths fit the SLO.
    double best = std::numeric_limits<double>::infinity();
    std::vector<double> u(n, 1);
    std::function<void(int)> rec = [&](int i) {
      if (i == n) {
        auto o = offsets_from_budgets(p, u);
        for (auto f : o.finish_offset_ms)
          if (f > p.slo_ms + 1e-9) return;
        best = std::min(best, split_cost(p, rates, u, T));
        return;
      }
      for (int k = 1; k <= steps; ++k) {
        u[i] = k * p.slo_ms / steps;
        rec(i + 1);
      }
    };
    rec(0);
    if (std::isinf(best)) continue;
    EXPECT_NEAR(dp_cost, best, 1e-9 * std::max(1.0, best)) << "round " << round;
    for (auto f : dp.finish_offset_ms) EXPECT_LE(f, p.slo_ms + 1e-9);
  }
}

TEST(query_analyzer, joins_keep_every_path_within_the_slo) {
  pipeline p;
  p.name = "diamond";
  p.slo_ms = 120;
  p.stages = {{"a", "m", {}, {}}, {"b", "m", {"a"}, {}}, {"c", "m", {"a"}, 2.0}, {"d", "m", {"b", "c"}, {}}};
  std::vector<model_spec> models(1);
  models[0].name = "m";
  ASSERT_TRUE(resolve(p, models).empty());
  throughput_fn T = [](size_t i, double L) { return L >= 10 ? L * (i + 1) : 0; };
  auto rates = stage_rates(p, 10, declared_fanout(p));
  EXPECT_DOUBLE_EQ(rates[2], 20);
  EXPECT_DOUBLE_EQ(rates[3], 10);  // the join runs once per query
  auto s = dp_split(p, rates, T, 24);
  for (auto f : s.finish_offset_ms) EXPECT_LE(f, 120 + 1e-9);
  for (auto b : s.budget_ms) EXPECT_GE(b, 10);
  EXPECT_LT(split_cost(p, rates, s.budget_ms, T), split_cost(p, rates, even_split(p).budget_ms, T) + 1e-9);
}

}  // namespace
}  // namespace sloserve
