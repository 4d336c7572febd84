#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <limits>
#include <random>

#include "scheduling/policies/piccolo/configurations.hpp"

namespace sloserve::sched {
namespace {

// Table I of the Piccolo paper: (batch, duration s) per module, one hardware type at price 1.
std::vector<piccolo::config> table_one(int module) {
  std::vector<std::pair<int, double>> rows;
  if (module == 1) rows = {{5, 0.100}, {20, 0.250}, {100, 1.000}};
  if (module == 2) rows = {{2, 0.125}, {4, 0.160}, {8, 0.267}};
  if (module == 3) rows = {{2, 0.167}, {4, 0.200}, {8, 0.320}};
  std::vector<piccolo::config> out;
  for (auto [b, d] : rows) out.push_back({0, b, d, 1.0});
  return out;
}

TEST(piccolo, table_one_costs_3_1_against_3_7_for_two_configurations_and_3_0_with_dummies) {
  auto m1 = by_ratio(table_one(1));
  ASSERT_EQ(m1.front().batch, 100);
  auto plan = generate_configs(m1, 285, 2.0);
  ASSERT_TRUE(plan.feasible);
  EXPECT_NEAR(plan.cost, 3.1, 1e-9);
  ASSERT_EQ(plan.machines.size(), 4u);  // two of batch 100, one of 20, a tenth of one of 5
  EXPECT_EQ(m1[plan.machines[0].config].batch, 100);
  EXPECT_EQ(m1[plan.machines[2].config].batch, 20);
  EXPECT_NEAR(plan.machines[3].rate, 5, 1e-9);
  EXPECT_LE(plan.worst_case_s, 2.0);
  EXPECT_NEAR(plan.dummy, 0, 1e-12);

  auto two = two_config_plan(m1, 285, 2.0);
  ASSERT_TRUE(two.feasible);
  EXPECT_NEAR(two.cost, 3.7, 1e-9);  // two of batch 100, 85 req/s on batch 5 (1.7 machines)

  auto padded = plan_module(m1, 285, 2.0);
  ASSERT_TRUE(padded.feasible);
  EXPECT_NEAR(padded.dummy, 15, 1e-9);
  EXPECT_NEAR(padded.cost, 3.0, 1e-9);
  EXPECT_EQ(padded.devices(), 3u);
  EXPECT_NEAR(brute_force_module(m1, 285, 2.0), 3.0, 1e-9) << "and that is the least any set costs";
}

// Theorem 1's example (Fig. 3): A and B at batch 6 in 2 s, C at batch 2 in 1 s, 8 req/s.
TEST(piccolo, throughput_cost_dispatch_bounds_each_machine_at_d_plus_b_over_what_follows) {
  std::vector<piccolo::config> c{{0, 6, 2.0, 1}, {0, 2, 1.0, 1}};
  std::vector<piccolo::machine> m{{0, 3}, {0, 3}, {1, 2}};
  auto w = worst_cases(c, m);
  EXPECT_NEAR(w[0], 2.75, 1e-9);
  EXPECT_NEAR(w[1], 2.75, 1e-9);
  EXPECT_NEAR(w[2], 2.0, 1e-9);
  EXPECT_NEAR(cost_of(c, m), 3, 1e-9);
  // A machine at partial capacity collects its batches from its own rate (and what follows).
  std::vector<piccolo::machine> partial{{0, 3}, {0, 1.5}};
  EXPECT_NEAR(worst_cases(c, partial)[1], 2 + 6 / 1.5, 1e-9);
}

TEST(piccolo, latency_cost_efficiency_of_section_three_c) {
  auto m1 = table_one(1);
  EXPECT_NEAR(latency_cost_efficiency(m1[0], m1[1], 100), 2.50, 1e-9);
  EXPECT_NEAR(latency_cost_efficiency(m1[0], m1[2], 100), 0.54, 0.005);
}

// Table II: M2 then M3 at 50 and 40 req/s within 0.9 s, split three ways. Each module takes the
// largest batch whose worst case 2d fits its budget, at cost rate/throughput (the table's
// durations are rounded to the millisecond, its costs to two decimals).
TEST(piccolo, table_two_splits_cost_4_73_4_00_and_5_00) {
  auto fluid = [](const std::vector<piccolo::config>& cs, double rate, double budget) {
    double best = 1e18;
    for (auto& c : cs)
      if (2 * c.duration_s <= budget + 1e-9) best = std::min(best, rate / c.throughput());
    return best;
  };
  auto m2 = table_one(2), m3 = table_one(3);
  EXPECT_NEAR(fluid(m2, 50, 0.25) + fluid(m3, 40, 0.65), 4.73, 0.01);
  EXPECT_NEAR(fluid(m2, 50, 0.40) + fluid(m3, 40, 0.50), 4.00, 1e-9);
  EXPECT_NEAR(fluid(m2, 50, 0.55) + fluid(m3, 40, 0.35), 5.00, 0.01) << "printed as 4.67";

  // Piccolo on the same application does at least as well as the best of them.
  piccolo::app app{{{50, m2, {1}}, {40, m3, {}}}, 0.9};
  auto plan = plan_app(app);
  ASSERT_TRUE(plan.feasible);
  EXPECT_LE(plan.cost, 4.00 + 1e-9);
  EXPECT_LE(plan.budget_s[0] + plan.budget_s[1], 0.9 + 1e-9);
  for (size_t m = 0; m < 2; ++m) EXPECT_LE(plan.modules[m].worst_case_s, plan.budget_s[m] + 1e-9);
  EXPECT_LE(plan.cost, brute_force_chain(app, 90) * 1.01);
}

// The splitter on a DAG: every path keeps within the SLO, and a configuration both faster and
// cheaper than the start is taken whatever the others' efficiencies.
TEST(piccolo, split_latency_keeps_every_path_within_the_slo_and_takes_free_improvements) {
  // a -> {b, c}; b slow, c fast. Type 1 is dearer and slower at batch 1 for module a: a change
  // to type 0 is faster and cheaper.
  std::vector<piccolo::config> a{{1, 1, 0.020, 3}, {0, 1, 0.010, 1}, {0, 8, 0.040, 1}};
  std::vector<piccolo::config> b{{0, 1, 0.050, 1}, {0, 4, 0.080, 1}, {0, 16, 0.200, 1}};
  std::vector<piccolo::config> c{{0, 1, 0.005, 1}, {0, 8, 0.020, 1}};
  piccolo::app app{{{100, a, {1, 2}}, {100, b, {}}, {100, c, {}}}, 0.5};
  auto s = split_latency(app);
  ASSERT_TRUE(s.feasible);
  EXPECT_NE(s.config[0], 0u) << "type 1 at batch 1 is slower and dearer than type 0";
  EXPECT_NEAR(s.budget_s[0] + s.budget_s[1], 0.5, 1e-9) << "the critical path spends the SLO";
  EXPECT_LE(s.budget_s[0] + s.budget_s[2], 0.5 + 1e-9);
  auto plan = plan_app(app);
  ASSERT_TRUE(plan.feasible);
  for (size_t m = 0; m < 3; ++m) EXPECT_LE(plan.modules[m].worst_case_s, plan.budget_s[m] + 1e-9);
  EXPECT_LE(plan.modules[0].worst_case_s + plan.modules[1].worst_case_s, 0.5 + 1e-9);
  EXPECT_LE(plan.modules[0].worst_case_s + plan.modules[2].worst_case_s, 0.5 + 1e-9);
  // An SLO below the fastest path: no plan.
  app.slo_s = 0.01;
  EXPECT_FALSE(split_latency(app).feasible);
  EXPECT_FALSE(plan_app(app).feasible);
}

// Random small applications on two hardware types: Piccolo against every set of machines per
// module and every split of the SLO on a grid.
TEST(piccolo, random_small_applications_are_within_one_percent_of_brute_force) {
  std::mt19937_64 rng(2026);
  std::uniform_real_distribution<double> u(0, 1);
  int trials = 200, within = 0, tried = 0;
  double worst = 1, sum_ratio = 0, piccolo_s = 0, brute_s = 0;
  for (int t = 0; t < trials; ++t) {
    piccolo::app app;
    size_t n = 1 + static_cast<size_t>(u(rng) * 3);
    double fastest = 0;
    for (size_t m = 0; m < n; ++m) {
      piccolo::app_module mod;
      mod.rate = 10 + std::round(u(rng) * 90);
      double alpha = 0.005 + 0.03 * u(rng), beta = 0.002 + 0.01 * u(rng);
      double speed = 1.5 + 2 * u(rng), price = 1.5 + 2.5 * u(rng);  // type 1: faster, dearer
      for (int b : {1, 4, 16}) {
        mod.configs.push_back({0, b, alpha + beta * b, 1});
        mod.configs.push_back({1, b, (alpha + beta * b) / speed, price});
      }
      fastest += (alpha + beta) / speed + 1 / mod.rate;
      if (m + 1 < n) mod.next = {m + 1};
      app.modules.push_back(mod);
    }
    app.slo_s = fastest * (1.5 + 3 * u(rng));
    auto t0 = std::chrono::steady_clock::now();
    auto plan = plan_app(app);
    auto t1 = std::chrono::steady_clock::now();
    double best = brute_force_chain(app, 60);
    auto t2 = std::chrono::steady_clock::now();
    piccolo_s += std::chrono::duration<double>(t1 - t0).count();
    brute_s += std::chrono::duration<double>(t2 - t1).count();
    if (!std::isfinite(best)) continue;
    ++tried;
    ASSERT_TRUE(plan.feasible) << "trial " << t;
    double ratio = plan.cost / best;
    sum_ratio += ratio;
    worst = std::max(worst, ratio);
    within += ratio <= 1.01;
  }
  std::printf("piccolo within 1%% of brute force on %d of %d; mean %.4f, worst %.3f; %.2f ms against %.0f ms\n", within,
              tried, sum_ratio / tried, worst, 1e3 * piccolo_s, 1e3 * brute_s);
  EXPECT_GE(tried, trials * 9 / 10);
  EXPECT_GE(within, tried * 97 / 100);
}

// Algorithm 2 alone on random DAGs (diamonds, fan-outs, joins; 4-6 modules of 6 configurations
// on two hardware types), against every combination of one configuration per module, written
// here: a configuration carrying a module's whole rate w has worst case d + b/w (d alone at
// batch 1) and costs price x w x d / b; a combination is feasible when every root-to-leaf path's
// worst cases sum to at most the SLO. The splitter's choice is feasible whenever any is, keeps
// every path within the SLO, and is the optimum on most instances and close on the rest (the
// paper: within the optimum on 97% of workloads).
TEST(piccolo, algorithm_2_on_random_dags_is_feasible_and_near_the_exhaustive_optimum) {
  std::mt19937_64 rng(404);
  std::uniform_real_distribution<double> u(0, 1);
  int tried = 0, optimal = 0, within_5 = 0;
  double worst = 1;
  for (int t = 0; t < 300; ++t) {
    piccolo::app app;
    size_t n = 4 + static_cast<size_t>(u(rng) * 3);
    for (size_t m = 0; m < n; ++m) {
      piccolo::app_module mod;
      mod.rate = 10 + std::round(u(rng) * 190);
      double alpha = 0.004 + 0.03 * u(rng), beta = 0.001 + 0.01 * u(rng);
      double speed = 1.5 + 2 * u(rng), price = 1.5 + 2.5 * u(rng);
      for (int b : {1, 4, 16}) {
        mod.configs.push_back({0, b, alpha + beta * b, 1});
        mod.configs.push_back({1, b, (alpha + beta * b) / speed, price});
      }
      app.modules.push_back(mod);
    }
    // Edges i -> j (i < j): each module after the first has one to three parents.
    std::vector<std::vector<size_t>> parents(n);
    for (size_t j = 1; j < n; ++j) {
      size_t k = 1 + static_cast<size_t>(u(rng) * std::min<double>(3, static_cast<double>(j)));
      for (size_t e = 0; e < k; ++e) {
        size_t i = static_cast<size_t>(u(rng) * static_cast<double>(j));
        if (std::find(parents[j].begin(), parents[j].end(), i) == parents[j].end()) parents[j].push_back(i);
      }
      for (auto i : parents[j]) app.modules[i].next.push_back(j);
    }
    // Every root-to-leaf path, by depth-first search from the roots.
    std::vector<std::vector<size_t>> paths;
    std::vector<size_t> path;
    std::function<void(size_t)> walk = [&](size_t v) {
      path.push_back(v);
      if (app.modules[v].next.empty()) paths.push_back(path);
      for (auto w : app.modules[v].next) walk(w);
      path.pop_back();
    };
    for (size_t v = 0; v < n; ++v)
      if (parents[v].empty()) walk(v);
    auto worst_case = [&](size_t m, size_t c) {
      auto& x = app.modules[m].configs[c];
      return x.duration_s + (x.batch > 1 ? x.batch / app.modules[m].rate : 0.0);
    };
    auto cost = [&](size_t m, size_t c) {
      auto& x = app.modules[m].configs[c];
      return x.price * app.modules[m].rate * x.duration_s / x.batch;
    };
    auto critical = [&](const std::vector<size_t>& pick) {
      double most = 0;
      for (auto& p : paths) {
        double sum = 0;
        for (auto m : p) sum += worst_case(m, pick[m]);
        most = std::max(most, sum);
      }
      return most;
    };
    std::vector<size_t> quickest(n);
    for (size_t m = 0; m < n; ++m)
      for (size_t c = 0; c < 6; ++c)
        if (worst_case(m, c) < worst_case(m, quickest[m])) quickest[m] = c;
    app.slo_s = critical(quickest) * (1.2 + 2 * u(rng));
    // Every combination.
    double best = std::numeric_limits<double>::infinity();
    std::vector<size_t> pick(n, 0);
    while (true) {
      if (critical(pick) <= app.slo_s + 1e-12) {
        double c = 0;
        for (size_t m = 0; m < n; ++m) c += cost(m, pick[m]);
        best = std::min(best, c);
      }
      size_t k = 0;
      while (k < n && ++pick[k] == 6) pick[k++] = 0;
      if (k == n) break;
    }
    ASSERT_TRUE(std::isfinite(best)) << "the quickest combination fits by construction";
    ++tried;
    auto s = split_latency(app);
    ASSERT_TRUE(s.feasible) << "trial " << t;
    ASSERT_EQ(s.config.size(), n);
    EXPECT_LE(critical(s.config), app.slo_s + 1e-9) << "trial " << t;
    for (auto& p : paths) {
      double budgets = 0;
      for (auto m : p) budgets += s.budget_s[m];
      EXPECT_LE(budgets, app.slo_s + 1e-9) << "trial " << t;
    }
    for (size_t m = 0; m < n; ++m) EXPECT_LE(worst_case(m, s.config[m]), s.budget_s[m] + 1e-9);
    double got = 0;
    for (size_t m = 0; m < n; ++m) got += cost(m, s.config[m]);
    double ratio = got / best;
    EXPECT_GE(ratio, 1 - 1e-9) << "nothing beats the exhaustive optimum";
    optimal += ratio <= 1 + 1e-9;
    within_5 += ratio <= 1.05;
    worst = std::max(worst, ratio);
  }
  std::printf("algorithm 2: optimal on %d of %d random DAGs, within 5%% on %d, worst %.3f\n", optimal, tried, within_5,
              worst);
  EXPECT_GE(optimal, tried * 80 / 100);
  EXPECT_GE(within_5, tried * 95 / 100);
}

}  // namespace
}  // namespace sloserve::sched
