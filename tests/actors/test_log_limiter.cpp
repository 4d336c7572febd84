// Rate-limited logging of rejected input: per key and overall, with held-back counts, bounded.

#include <gtest/gtest.h>

#include "actors/log_limiter.hpp"

namespace sloserve {
namespace {

TEST(log_limiter, one_line_a_second_per_key_with_the_count_held_back) {
  log_limiter l(1.0, 0.0);
  EXPECT_EQ(l.admit("a|malformed", 10.0), 0u);
  for (int i = 0; i < 5; ++i) EXPECT_FALSE(l.admit("a|malformed", 10.1 + i * 0.1));
  EXPECT_EQ(l.admit("b|malformed", 10.2), 0u) << "another peer has its own line";
  EXPECT_EQ(l.admit("a|malformed", 11.0), 5u);
  EXPECT_FALSE(l.admit("a|malformed", 11.5));
  EXPECT_EQ(l.admit("a|malformed", 12.5), 1u);
}

TEST(log_limiter, all_keys_together_get_one_line_per_overall_interval_after_a_burst) {
  log_limiter l(1.0, 1.0, 1024, 10);
  int lines = 0;
  uint64_t reported = 0;
  // 1,000 connections each sending one bad frame every 10 ms for 60 s.
  for (int t = 0; t < 6000; ++t)
    for (int k = 0; k < 10; ++k)
      if (auto held = l.admit("peer" + std::to_string((t * 10 + k) % 1000) + "|too large", t * 0.01)) {
        ++lines;
        reported += *held + 1;
      }
  EXPECT_LE(lines, 10 + 60);
  EXPECT_GE(lines, 10 + 59);
}

TEST(log_limiter, a_key_held_back_by_the_overall_limit_reports_it_later) {
  log_limiter l(1.0, 1.0, 1024, 1);
  EXPECT_EQ(l.admit("a", 0.0), 0u);
  EXPECT_FALSE(l.admit("b", 0.1));  // its own first line, but the overall budget is spent
  EXPECT_FALSE(l.admit("b", 0.5));
  EXPECT_EQ(l.admit("b", 1.2), 2u);
  EXPECT_FALSE(l.admit("a", 1.5));
  EXPECT_EQ(l.admit("a", 2.3), 1u);
}

TEST(log_limiter, keys_are_bounded_and_forgotten_counts_are_not_lost) {
  log_limiter l(1.0, 0.0, 4);
  for (int k = 0; k < 4; ++k) EXPECT_EQ(l.admit("k" + std::to_string(k), 0), 0u);
  EXPECT_FALSE(l.admit("k0", 0.5));  // held 1
  EXPECT_FALSE(l.admit("k0", 0.6));  // held 2
  EXPECT_EQ(l.keys(), 4u);
  // A fifth key forgets k0, the first of those logged longest ago; its 2 held back go into the
  // new key's line.
  EXPECT_EQ(l.admit("k4", 0.7), 2u);
  EXPECT_EQ(l.keys(), 4u);
  for (int k = 5; k < 100; ++k) l.admit("k" + std::to_string(k), 1.0 + k);
  EXPECT_EQ(l.keys(), 4u);
}

}  // namespace
}  // namespace sloserve
