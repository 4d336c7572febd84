// FA2's DP on pipeline trees against brute force over every batch assignment.

#include <gtest/gtest.h>

#include <climits>
#include <functional>
#include <random>

#include "scheduling/fa2.hpp"

namespace sloserve::sched {
namespace {

// Every assignment of batch sizes; the fewest instances whose root-to-leaf paths all fit.
int brute_force(const std::vector<fa2_stage>& st, size_t root, int slo) {
  std::vector<int> b(st.size(), 1);
  int best = INT_MAX;
  std::function<void(size_t)> rec = [&](size_t i) {
    if (i == st.size()) {
      // Longest path in slots from the root.
      std::function<long(size_t)> longest = [&](size_t s) -> long {
        long below = 0;
        for (auto c : st[s].children) below = std::max(below, longest(c));
        return fa2_slots(st[s], b[s]) + below;
      };
      if (longest(root) > slo) return;
      int total = 0;
      for (size_t s = 0; s < st.size(); ++s) total += fa2_instances(st[s], b[s]);
      best = std::min(best, total);
      return;
    }
    for (b[i] = 1; b[i] <= st[i].max_batch; ++b[i]) rec(i + 1);
  };
  rec(0);
  return best;
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
  EXPECT_LE(fa2_slots(st[0], loose.batch[0]), 60);
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
      st.push_back(stage(0.05 * u(rng), 0.5 + 3 * u(rng), 2 + 15 * u(rng), 20 + 400 * u(rng), 1 + static_cast<int>(rng() % 6)));
    for (size_t i = 1; i < n; ++i) st[rng() % i].children.push_back(i);  // a random tree rooted at 0
    int slo = 20 + static_cast<int>(rng() % 120);
    auto plan = fa2_tree(st, 0, slo);
    int want = brute_force(st, 0, slo);
    ASSERT_EQ(plan.feasible, want != INT_MAX) << "trial " << trial;
    if (!plan.feasible) continue;
    ++checked;
    EXPECT_EQ(plan.total, want) << "trial " << trial;
    // The plan it returns is the one it costs, and it fits.
    int total = 0;
    for (size_t s = 0; s < n; ++s) total += plan.instances[s];
    EXPECT_EQ(total, plan.total);
    EXPECT_EQ(brute_force(st, 0, slo), want);
  }
  EXPECT_GT(checked, 150);
}

}  // namespace
}  // namespace sloserve::sched
