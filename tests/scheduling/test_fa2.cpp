// FA2's DP on pipeline trees against brute force over every batch assignment.

#include <gtest/gtest.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdio>
#include <functional>
#include <random>

#include "scheduling/fa2.hpp"

namespace sloserve::sched {
namespace {

// FA2's problem, written here without the planner's helpers: a stage at batch b takes
// d(b) = a·b² + b1·b + c ms plus (b - 1)/rate to fill its batch, in whole 1 ms slots, and needs
// the fewest instances whose b/d(b) each carry its rate.
long slots(const fa2_stage& s, int b) {
  double d = s.d.a * b * b + s.d.b1 * b + s.d.c;
  if (b > 1 && s.rate <= 0) return LONG_MAX / 4;  // a batch that never fills
  return static_cast<long>(std::ceil(d + (b > 1 ? (b - 1) * 1000.0 / s.rate : 0) - 1e-9));
}
int instances(const fa2_stage& s, int b) {
  double d = s.d.a * b * b + s.d.b1 * b + s.d.c;
  return s.rate <= 0 ? 0 : static_cast<int>(std::ceil(s.rate * d / (1000.0 * b) - 1e-9));
}

// The longest path, in slots, from stage s down (a DAG's joins included) at batches b.
long longest_from(const std::vector<fa2_stage>& st, const std::vector<int>& b, size_t s) {
  long below = 0;
  for (auto c : st[s].children) below = std::max(below, longest_from(st, b, c));
  return slots(st[s], b[s]) + below;
}

// Every assignment of batch sizes; the fewest instances of those that `fit` (INT_MAX: none).
int brute_force(const std::vector<fa2_stage>& st, const std::function<bool(const std::vector<int>&)>& fit) {
  std::vector<int> b(st.size(), 1);
  int best = INT_MAX;
  std::function<void(size_t)> rec = [&](size_t i) {
    if (i == st.size()) {
      if (!fit(b)) return;
      int total = 0;
      for (size_t s = 0; s < st.size(); ++s) total += instances(st[s], b[s]);
      best = std::min(best, total);
      return;
    }
    for (b[i] = 1; b[i] <= st[i].max_batch; ++b[i]) rec(i + 1);
  };
  rec(0);
  return best;
}

// On a tree, the paths from the root; on a DAG, joins included: every path within the one SLO.
int brute_force_dag(const std::vector<fa2_stage>& st, int slo) {
  return brute_force(st, [&](const std::vector<int>& b) {
    for (size_t s = 0; s < st.size(); ++s)
      if (longest_from(st, b, s) > slo) return false;
    return true;
  });
}

// Per-path SLOs: every root-to-leaf path, walked here, within its leaf's own SLO (else `slo`).
bool paths_fit(const std::vector<fa2_stage>& st, const std::vector<int>& b, int slo) {
  std::vector<bool> has_parent(st.size(), false);
  for (auto& s : st)
    for (auto c : s.children) has_parent[c] = true;
  std::function<bool(size_t, long)> down = [&](size_t s, long before) {
    long at = before + slots(st[s], b[s]);
    if (st[s].children.empty()) return at <= (st[s].slo_ms > 0 ? static_cast<long>(st[s].slo_ms) : slo);
    for (auto c : st[s].children)
      if (!down(c, at)) return false;
    return true;
  };
  for (size_t s = 0; s < st.size(); ++s)
    if (!has_parent[s] && !down(s, 0)) return false;
  return true;
}

int brute_force_paths(const std::vector<fa2_stage>& st, int slo) {
  return brute_force(st, [&](const std::vector<int>& b) { return paths_fit(st, b, slo); });
}

fa2_stage stage(double a, double b1, double c, double rate, int max_batch) {
  fa2_stage s;
  s.d.a = a, s.d.b1 = b1, s.d.c = c;
  s.rate = rate;
  s.max_batch = max_batch;
  return s;
}

TEST(fa2, a_chain_trades_batch_for_instances_within_the_slo) {
  // d(b) = 2b + 10 ms at 400 RPS: b = 1 takes 12 ms and needs ⌈400 / 83.3⌉ = 5 instances.
  std::vector<fa2_stage> st{stage(0, 2, 10, 400, 16)};
  auto tight = fa2_tree(st, 0, 12);
  ASSERT_TRUE(tight.feasible);
  EXPECT_EQ(tight.batch[0], 1);
  EXPECT_EQ(tight.total, 5);
  // With 60 ms a larger batch fits (b = 8 waits 17.5 ms to fill and runs 26 ms: 2 instances).
  auto loose = fa2_tree(st, 0, 60);
  ASSERT_TRUE(loose.feasible);
  EXPECT_LT(loose.total, tight.total);
  EXPECT_LE(slots(st[0], loose.batch[0]), 60);
  EXPECT_FALSE(fa2_tree(st, 0, 11).feasible);  // not even a batch of one fits
}

TEST(fa2, dp_equals_brute_force_on_random_small_trees) {
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<double> u(0, 1);
  int checked = 0;
  for (int trial = 0; trial < 300; ++trial) {
    size_t n = 1 + rng() % 4;
    std::vector<fa2_stage> st;
    for (size_t i = 0; i < n; ++i)
      st.push_back(
          stage(0.05 * u(rng), 0.5 + 3 * u(rng), 2 + 15 * u(rng), 20 + 400 * u(rng), 1 + static_cast<int>(rng() % 6)));
    for (size_t i = 1; i < n; ++i) st[rng() % i].children.push_back(i);  // a random tree rooted at 0
    int slo = 20 + static_cast<int>(rng() % 120);
    auto plan = fa2_tree(st, 0, slo);
    int want = brute_force_dag(st, slo);
    ASSERT_EQ(plan.feasible, want != INT_MAX) << "trial " << trial;
    if (!plan.feasible) continue;
    ++checked;
    EXPECT_EQ(plan.total, want) << "trial " << trial;
    // The plan it returns is the one it costs, and it fits.
    int total = 0;
    for (size_t s = 0; s < n; ++s) total += plan.instances[s];
    EXPECT_EQ(total, plan.total);
    EXPECT_EQ(brute_force_dag(st, slo), want);
  }
  EXPECT_GT(checked, 150);
}

TEST(fa2, a_diamond_loses_the_edge_into_its_join_and_splits_that_path_by_intensity) {
  // A -> B -> D and A -> C -> D, constant latencies A 10, B 20, C 5, D 30 ms.
  std::vector<fa2_stage> st{stage(0, 0, 10, 100, 4), stage(0, 0, 20, 100, 4), stage(0, 0, 5, 100, 4),
                            stage(0, 0, 30, 100, 4)};
  st[0].children = {1, 2};
  st[1].children = {3};
  st[2].children = {3};
  auto tr = fa2_make_tree(st, 100);
  // Both edges into D carry one path; the first parent's edge goes.
  ASSERT_EQ(tr.cuts.size(), 1u);
  EXPECT_EQ(tr.cuts[0], (std::pair<size_t, size_t>{1, 3}));
  EXPECT_EQ(tr.children[1], std::vector<size_t>{});
  EXPECT_EQ(tr.children[2], std::vector<size_t>{3});
  EXPECT_EQ(tr.roots, std::vector<size_t>{0});
  // A-B-D splits into A-B (intensity 30) and D (30): 50 ms each.
  EXPECT_EQ(tr.floor_ms[1], 50);  // B must end by 50 ms: 50 left after it
  EXPECT_EQ(tr.cap_ms[3], 50);    // D within 50 ms of its start
  EXPECT_EQ(tr.cap_ms[0], -1);
  EXPECT_EQ(tr.floor_ms[3], 0);

  auto plan = fa2_dag(st, 100);
  ASSERT_TRUE(plan.feasible);
  EXPECT_LE(longest_from(st, plan.batch, 0), 100);
  // Without room for A-B-D the plan is infeasible, not wrong.
  EXPECT_FALSE(fa2_dag(st, 59).feasible);
}

TEST(fa2, several_roots_share_a_virtual_root) {
  // Two sources joined by one sink: R1 -> J, R2 -> J.
  std::vector<fa2_stage> st{stage(0, 1, 5, 50, 4), stage(0, 2, 5, 50, 4), stage(0, 1, 10, 100, 4)};
  st[0].children = {2};
  st[1].children = {2};
  auto tr = fa2_make_tree(st, 60);
  EXPECT_EQ(tr.roots, (std::vector<size_t>{0, 1}));
  auto plan = fa2_dag(st, 60);
  ASSERT_TRUE(plan.feasible);
  ASSERT_EQ(plan.batch.size(), 3u);
  for (size_t s = 0; s < 3; ++s) EXPECT_LE(longest_from(st, plan.batch, s), 60);
  EXPECT_EQ(plan.total, plan.instances[0] + plan.instances[1] + plan.instances[2]);
}

// The target: FA2 (the transformation, then the DP) finds the brute-force optimum on
// at least 95% of random small DAGs with joins, and every plan it returns fits every DAG path.
TEST(fa2, on_random_small_dags_fa2_matches_brute_force_in_at_least_95_percent) {
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<double> u(0, 1);
  int feasible = 0, optimal = 0, with_join = 0, join_feasible = 0, join_optimal = 0;
  for (int trial = 0; trial < 400; ++trial) {
    size_t n = 3 + rng() % 3;
    std::vector<fa2_stage> st;
    for (size_t i = 0; i < n; ++i)
      st.push_back(
          stage(0.05 * u(rng), 0.5 + 3 * u(rng), 2 + 15 * u(rng), 20 + 400 * u(rng), 1 + static_cast<int>(rng() % 5)));
    // Random edges i -> j (i < j); every stage after the first has a parent.
    std::vector<int> parents(n, 0);
    for (size_t j = 1; j < n; ++j) {
      st[rng() % j].children.push_back(j);
      ++parents[j];
      for (size_t i = 0; i < j; ++i)
        if (u(rng) < 0.3 && std::find(st[i].children.begin(), st[i].children.end(), j) == st[i].children.end())
          st[i].children.push_back(j), ++parents[j];
    }
    bool join = std::any_of(parents.begin(), parents.end(), [](int p) { return p > 1; });
    with_join += join;
    int slo = 30 + static_cast<int>(rng() % 150);
    int want = brute_force_dag(st, slo);
    auto plan = fa2_dag(st, slo);
    if (plan.feasible) {
      // Sound: its batches fit every path, and it costs what it says.
      for (size_t s = 0; s < n; ++s) ASSERT_LE(longest_from(st, plan.batch, s), slo) << "trial " << trial;
      int total = 0;
      for (size_t s = 0; s < n; ++s) total += plan.instances[s];
      ASSERT_EQ(total, plan.total);
      ASSERT_GE(plan.total, want);
    }
    if (want == INT_MAX) {
      EXPECT_FALSE(plan.feasible);
      continue;
    }
    ++feasible;
    bool same = plan.feasible && plan.total == want;
    optimal += same;
    join_feasible += join;
    join_optimal += join && same;
  }
  EXPECT_GT(with_join, 200);
  EXPECT_GT(feasible, 200);
  std::printf("FA2 on DAGs: optimal in %d of %d feasible cases (%.1f%%); with joins %d of %d\n", optimal, feasible,
              100.0 * optimal / feasible, join_optimal, join_feasible);
  EXPECT_GE(optimal, 0.95 * feasible);
}

// Per-path SLOs (FA2's SLA_p): a detector feeding a slow classifier under 300 ms and a fast
// alarm under 60 ms. The alarm's path must not take the slack of the slow one.
TEST(fa2, each_path_fits_its_own_slo) {
  std::vector<fa2_stage> st{stage(0, 2, 30, 400, 8), stage(0, 4, 40, 400, 8), stage(0, 1, 5, 400, 8)};
  st[0].children = {1, 2};
  st[2].slo_ms = 60;
  auto plan = fa2_dag(st, 300);
  ASSERT_TRUE(plan.feasible);
  EXPECT_TRUE(paths_fit(st, plan.batch, 300));
  EXPECT_LE(slots(st[0], plan.batch[0]) + slots(st[2], plan.batch[2]), 60);
  EXPECT_EQ(plan.total, brute_force_paths(st, 300));
  // Planned as if every path had 300 ms, the alarm's path is late.
  auto st_one = st;
  st_one[2].slo_ms = 0;
  auto one = fa2_dag(st_one, 300);
  ASSERT_TRUE(one.feasible);
  EXPECT_GT(slots(st[0], one.batch[0]) + slots(st[2], one.batch[2]), 60);
  EXPECT_LT(one.total, plan.total);  // what the short path costs
}

// On random trees with per-leaf SLOs the DP is exact; on random DAGs with joins, FA2 (the
// transformation, then the DP) finds the brute-force optimum in at least 85% (a leaf's SLO below
// a stage the transformation caps is counted from the cap, conservatively), and every plan it
// returns fits every path's own SLO.
TEST(fa2, per_path_slos_match_brute_force_on_random_trees_and_dags) {
  std::mt19937_64 rng(23);
  std::uniform_real_distribution<double> u(0, 1);
  int tree_checked = 0, dag_feasible = 0, dag_optimal = 0, tighter = 0;
  for (int trial = 0; trial < 600; ++trial) {
    bool tree = trial % 2 == 0;
    size_t n = 3 + rng() % 3;
    std::vector<fa2_stage> st;
    for (size_t i = 0; i < n; ++i)
      st.push_back(
          stage(0.05 * u(rng), 0.5 + 3 * u(rng), 2 + 15 * u(rng), 20 + 400 * u(rng), 1 + static_cast<int>(rng() % 5)));
    for (size_t j = 1; j < n; ++j) {
      st[rng() % j].children.push_back(j);
      if (!tree)
        for (size_t i = 0; i < j; ++i)
          if (u(rng) < 0.3 && std::find(st[i].children.begin(), st[i].children.end(), j) == st[i].children.end())
            st[i].children.push_back(j);
    }
    int slo = 40 + static_cast<int>(rng() % 150);
    // Leaves' own SLOs: some at the pipeline's, the others between 40% and 100% of it.
    for (auto& s : st)
      if (s.children.empty() && u(rng) < 0.7) s.slo_ms = std::floor(slo * (0.4 + 0.6 * u(rng))), ++tighter;
    int want = brute_force_paths(st, slo);
    auto plan = tree ? fa2_tree(st, 0, slo) : fa2_dag(st, slo);
    if (plan.feasible) {
      ASSERT_TRUE(paths_fit(st, plan.batch, slo)) << "trial " << trial;
      int total = 0;
      for (size_t s = 0; s < n; ++s) total += plan.instances[s];
      ASSERT_EQ(total, plan.total);
      ASSERT_GE(plan.total, want);
    }
    if (want == INT_MAX) {
      EXPECT_FALSE(plan.feasible) << "trial " << trial;
      continue;
    }
    if (tree) {
      ASSERT_TRUE(plan.feasible) << "trial " << trial;
      EXPECT_EQ(plan.total, want) << "trial " << trial;
      ++tree_checked;
    } else {
      ++dag_feasible;
      dag_optimal += plan.feasible && plan.total == want;
    }
  }
  EXPECT_GT(tighter, 300);
  EXPECT_GT(tree_checked, 150);
  EXPECT_GT(dag_feasible, 150);
  std::printf("FA2 with per-path SLOs: trees exact on %d; DAGs optimal in %d of %d (%.1f%%)\n", tree_checked,
              dag_optimal, dag_feasible, 100.0 * dag_optimal / dag_feasible);
  EXPECT_GE(dag_optimal, 0.85 * dag_feasible);
}

}  // namespace
}  // namespace sloserve::sched
