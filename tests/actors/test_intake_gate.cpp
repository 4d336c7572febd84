// The frontend's intake gate, driven by a simulated frontend that takes requests in one at a time.

#include <gtest/gtest.h>

#include <deque>

#include "actors/intake_gate.hpp"

namespace sloserve {
namespace {

// A frontend that takes in 1,000 requests/s, in order, offered `rate` requests/s of a 100 ms SLO
// for `seconds`: how many were refused at the gate, and how many were taken in with more than
// `late_ms` of their SLO spent waiting.
struct intake_run {
  int offered = 0, refused = 0, taken = 0, taken_late = 0;
  uint32_t still_waiting = 0;  // the gate's count once all were taken
};
intake_run run_intake(double rate, double seconds, bool gated, double late_ms = 50) {
  intake_gate g;
  intake_run r;
  std::deque<int64_t> waiting;  // hand-over times
  int64_t next_take = 0;
  const int64_t take_ns = 1'000'000, slo_ns = 100'000'000;
  auto take_until = [&](int64_t t) {
    while (!waiting.empty() && std::max(next_take, waiting.front()) + take_ns <= t) {
      next_take = std::max(next_take, waiting.front()) + take_ns;
      g.taken(next_take, waiting.front(), 0.1);
      r.taken_late += next_take - waiting.front() > late_ms * 1e6;
      ++r.taken;
      waiting.pop_front();
    }
  };
  for (int64_t t = 0; t < seconds * 1e9; t += static_cast<int64_t>(1e9 / rate)) {
    take_until(t);
    ++r.offered;
    if (gated && !g.admit(t, static_cast<double>(slo_ns) / 1e9).empty()) {
      ++r.refused;
      continue;
    }
    if (!gated) g.admit(t, 0.1);  // counted all the same; the answer is ignored
    waiting.push_back(t);
  }
  take_until(INT64_MAX / 2);
  r.still_waiting = g.waiting();
  return r;
}

TEST(intake_gate, twice_what_the_frontend_takes_in_is_refused_at_the_door_and_what_is_taken_is_fresh) {
  auto open = run_intake(2000, 3, false);
  auto gated = run_intake(2000, 3, true);
  // Ungated, the mailbox grows by half a second a second: nearly everything waits past half its SLO.
  EXPECT_GT(open.taken_late, 0.9 * open.taken);
  // Gated: about half refused at once, and what is taken in fresh but for the build-up before
  // the wait was seen to stand (its first 140 ms or so).
  EXPECT_NEAR(gated.refused, 3000, 300);
  EXPECT_LT(gated.taken_late, 0.1 * gated.taken);
  EXPECT_EQ(gated.refused + gated.taken, gated.offered);
  EXPECT_EQ(gated.still_waiting, 0u);
}

TEST(intake_gate, below_what_the_frontend_takes_in_nothing_is_refused) {
  auto below = run_intake(800, 3, true);
  EXPECT_EQ(below.refused, 0);
  EXPECT_EQ(below.taken_late, 0);
}

}  // namespace
}  // namespace sloserve
