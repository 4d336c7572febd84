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

}  // namespace
}  // namespace sloserve::sched
