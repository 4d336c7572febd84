#include <gtest/gtest.h>

#include "scheduling/balancer.hpp"

namespace sloserve::sched {
namespace {

TEST(balancer, p2c_prefers_the_shorter_queue_and_skips_dead_backends) {
  p2c_balancer b;
  std::mt19937_64 rng(1);
  std::vector<backend_load> two{{10, 1, true}, {0, 1, true}};
  for (int i = 0; i < 50; ++i) EXPECT_EQ(b.pick(two, rng), 1u);
  std::vector<backend_load> dead{{0, 1, false}, {5, 1, true}, {0, 1, false}};
  for (int i = 0; i < 20; ++i) EXPECT_EQ(b.pick(dead, rng), 1u);
  std::vector<backend_load> none{{0, 1, false}};
  EXPECT_FALSE(b.pick(none, rng));
}

TEST(balancer, p2c_spreads_equal_load) {
  p2c_balancer b;
  std::mt19937_64 rng(2);
  std::vector<backend_load> v(4);
  std::vector<int> hits(4);
  for (int i = 0; i < 4000; ++i) {
    auto k = *b.pick(v, rng);
    ++hits[k];
    ++v[k].outstanding;  // nothing completes: p2c must keep queues even
  }
  for (auto& x : v) EXPECT_NEAR(x.outstanding, 1000, 20);
}

TEST(balancer, weighted_random_follows_weights) {
  weighted_random_balancer b;
  std::mt19937_64 rng(3);
  std::vector<backend_load> v{{0, 3, true}, {0, 1, true}, {0, 5, false}};
  int first = 0;
  for (int i = 0; i < 8000; ++i) first += *b.pick(v, rng) == 0;
  EXPECT_NEAR(first / 8000.0, 0.75, 0.03);
  for (auto& [kind, name] : knob<balancer_kind>::names) EXPECT_EQ(make_balancer(kind)->name(), name);
  EXPECT_EQ(parse_knob<balancer_kind>("nope"), std::nullopt);
}

// Spares (kept from an earlier plan) take work only when the planned backend picked is busy
// (a batch running and one waiting): then the spare with the most room; with no planned backend
// live, the least busy spare.
TEST(balancer, work_spills_to_spares_only_past_a_busy_planned_backend) {
  EXPECT_EQ(spill_threshold(0, 1), 0u) << "no spill point: never busy";
  EXPECT_EQ(spill_threshold(8, 1), 8u);
  EXPECT_EQ(spill_threshold(8, 3), 3u) << "each of three frontends its share, rounded up";
  EXPECT_EQ(spill_threshold(1, 4), 1u);
  for (auto kind : {balancer_kind::p2c, balancer_kind::weighted_random}) {
    auto b = make_balancer(kind);
    std::mt19937_64 rng(4);
    backend_load planned{0, 1, true, false, 4};
    backend_load spare{0, 1e-3, true, true, 4};
    std::vector<backend_load> v{planned, spare, spare};
    for (int i = 0; i < 4; ++i) {
      auto k = b->route(v, rng);
      ASSERT_TRUE(k);
      EXPECT_EQ(*k, 0u) << b->name() << ": the planned backend has room";
      ++v[*k].outstanding;
    }
    EXPECT_TRUE(v[0].busy());
    v[1].outstanding = 3;
    EXPECT_EQ(b->route(v, rng), 2u) << b->name() << ": the spare with the most room";
    v[2].outstanding = 4;
    EXPECT_EQ(b->route(v, rng), 1u);
    v[1].outstanding = 4;
    EXPECT_EQ(b->route(v, rng), 0u) << b->name() << ": every spare busy too: the planned one queues it";
    v[0].live = false;
    EXPECT_EQ(b->pick(v, rng), std::nullopt) << b->name() << ": pick never names a spare";
    v[2].outstanding = 9;
    EXPECT_EQ(b->route(v, rng), 1u) << b->name() << ": no planned backend live: the least busy spare";
    v[1].live = v[2].live = false;
    EXPECT_EQ(b->route(v, rng), std::nullopt);
  }
}

// Piccolo's throughput-cost dispatch: the table's first (most cost-efficient) machine fills up to
// its spill point before the next takes any; past every spill point, the one with the most room;
// spares only past that; dead and spare backends are never picked.
TEST(balancer, fill_fills_machines_in_table_order_up_to_their_spill_points) {
  fill_balancer b;
  std::mt19937_64 rng(5);
  std::vector<backend_load> v{{0, 1, true, false, 3}, {0, 1, true, false, 6}, {0, 1, true, true, 4}};
  std::vector<size_t> order;
  for (int i = 0; i < 9; ++i) {
    auto k = b.route(v, rng);
    ASSERT_TRUE(k);
    order.push_back(*k);
    ++v[*k].outstanding;
  }
  EXPECT_EQ(order, (std::vector<size_t>{0, 0, 0, 1, 1, 1, 1, 1, 1}));
  EXPECT_EQ(b.route(v, rng), 2u) << "both planned machines busy: the spare";
  v[2].outstanding = 4;
  EXPECT_EQ(b.route(v, rng), 0u) << "the spare busy too: the planned machine with the most room (3/3 vs 6/6: first)";
  v[1].outstanding = 5;
  EXPECT_EQ(b.route(v, rng), 1u) << "a machine with room again takes the next";
  v[0].outstanding = 0;
  EXPECT_EQ(b.route(v, rng), 0u) << "the cheaper machine, free again, first";
  v[0].live = false;
  EXPECT_EQ(b.route(v, rng), 1u);
  std::vector<backend_load> unbounded{{7, 1, true, false, 0}, {0, 1, true, false, 0}};
  EXPECT_EQ(b.pick(unbounded, rng), 0u) << "no spill point: the first takes everything";
  std::vector<backend_load> none{{0, 1, false}, {0, 1, true, true, 2}};
  EXPECT_EQ(b.pick(none, rng), std::nullopt);
}

}  // namespace
}  // namespace sloserve::sched
