// Sponge's latency model and per-second decision (thesis 004 part II).

#include <gtest/gtest.h>

#include "scheduling/sponge.hpp"

namespace sloserve::sched {
namespace {

TEST(sponge, fit_recovers_a_known_model) {
  core_latency truth{40, 20, 2, 5};
  std::vector<grid_point> grid;
  for (int c : {1, 2, 4, 8})
    for (int b : {1, 2, 4, 8, 16}) grid.push_back({b, c, truth.at(b, c)});
  core_latency fit;
  ASSERT_TRUE(fit_core_latency(grid, fit));
  EXPECT_NEAR(fit.gamma, 40, 1e-6);
  EXPECT_NEAR(fit.epsilon, 20, 1e-6);
  EXPECT_NEAR(fit.delta, 2, 1e-6);
  EXPECT_NEAR(fit.eta, 5, 1e-6);
  // One core count cannot separate the 1/c terms from the rest.
  EXPECT_FALSE(fit_core_latency({{1, 2, 10}, {2, 2, 14}, {4, 2, 22}, {8, 2, 38}}, fit));
}

// Table P2.1 of thesis 004: p99 latency of a ResNet human detector by (cores, batch), SLO 1000 ms
// at 100 RPS.
core_latency table_p21() {
  core_latency l;
  EXPECT_TRUE(fit_core_latency({{1, 1, 55}, {2, 1, 97}, {4, 2, 94}, {8, 4, 92}, {4, 8, 37}, {8, 8, 62}}, l));
  return l;
}

TEST(sponge, the_fit_follows_table_p21) {
  auto l = table_p21();
  EXPECT_NEAR(l.at(1, 1), 55, 55 * 0.06);
  EXPECT_NEAR(l.at(2, 1), 97, 97 * 0.06);
  EXPECT_NEAR(l.at(4, 8), 37, 37 * 0.06);
  EXPECT_NEAR(l.at(8, 8), 62, 62 * 0.06);
}

TEST(sponge, picks_the_fewest_cores_then_the_smallest_batch) {
  auto l = table_p21();
  // 100 RPS needs about six cores whatever the network takes, as long as the budgets allow.
  auto a = sponge_decide(l, 100, std::vector<double>(10, 1000), 8, 8);
  EXPECT_TRUE(a.feasible);
  EXPECT_EQ(a.cores, 6);
  EXPECT_EQ(a.batch, 6);
  EXPECT_GE(l.throughput(a.batch, a.cores), 100);
  EXPECT_LT(l.throughput(8, 5), 100);  // five cores cannot keep up at any batch
  // 600 ms of network time leaves 400 ms: 40 queued requests still fit in EDF batches of 6.
  auto b = sponge_decide(l, 100, std::vector<double>(40, 400), 8, 8);
  EXPECT_EQ(b.cores, 6);
  EXPECT_EQ(b.batch, 6);
  // One request with 40 ms left: the first batch must finish by then, which takes eight cores
  // and batches of four (the thesis' example).
  std::vector<double> tight(9, 1000);
  tight.push_back(40);
  auto c = sponge_decide(l, 100, tight, 8, 8);
  EXPECT_EQ(c.cores, 8);
  EXPECT_EQ(c.batch, 4);
  // Less load needs fewer cores; tighter budgets need more.
  auto d = sponge_decide(l, 60, std::vector<double>(10, 1000), 8, 8);
  EXPECT_EQ(d.cores, 3);
  EXPECT_EQ(d.batch, 5);
  auto e = sponge_decide(l, 60, std::vector<double>(20, 200), 8, 8);
  EXPECT_EQ(e.cores, 6);
  EXPECT_EQ(e.batch, 7);
}

TEST(sponge, when_nothing_fits_it_takes_every_core_at_the_best_batch) {
  auto l = table_p21();
  auto x = sponge_decide(l, 100, std::vector<double>(30, 150), 8, 8);
  EXPECT_FALSE(x.feasible);
  EXPECT_EQ(x.cores, 8);
  EXPECT_EQ(x.batch, 8);
  auto y = sponge_decide(l, 500, {}, 8, 8);  // no core count reaches 500 RPS
  EXPECT_FALSE(y.feasible);
}

}  // namespace
}  // namespace sloserve::sched
