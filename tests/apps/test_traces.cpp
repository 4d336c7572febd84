// Synthetic traces for `sloserve load`.

#include <gtest/gtest.h>

#include <numeric>

#include "loadgen/load.hpp"

namespace sloserve {
namespace {

TEST(traces, bursty_is_five_times_the_base_for_five_seconds_every_minute) {
  auto t = bursty_trace(100, 5, 5, 60, 180, 7);
  ASSERT_EQ(t.size(), 180u);
  auto mean = [&](int from, int to) { return std::accumulate(t.begin() + from, t.begin() + to, 0.0) / (to - from); };
  for (int p : {0, 60, 120}) {
    EXPECT_NEAR(mean(p, p + 5), 500, 40);      // Poisson around 500 over 5 s
    EXPECT_NEAR(mean(p + 5, p + 60), 100, 8);  // and around 100 between bursts
  }
  EXPECT_EQ(bursty_trace(100, 5, 5, 60, 180, 7), t);  // the seed fixes it
}

TEST(traces, stepped_holds_each_level_and_cycles) {
  auto t = stepped_trace({7, 3, 1}, 2, 8);
  EXPECT_EQ(t, (std::vector<double>{7, 7, 3, 3, 1, 1, 7, 7}));
  EXPECT_TRUE(stepped_trace({}, 2, 8).empty());
}

}  // namespace
}  // namespace sloserve
