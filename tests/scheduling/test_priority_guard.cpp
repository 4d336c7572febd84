#include <gtest/gtest.h>

#include <functional>
#include <iostream>
#include <queue>
#include <tuple>
#include <vector>

#include "scheduling/priority_guard.hpp"

namespace sloserve::sched {
namespace {

// Two pipelines, "high" (priority 1) and "low" (0), on one device that serves one query at a
// time in `service_s`, in order of arrival; a query whose turn comes too late for its SLO is
// dropped there and takes no time. Each sends at its own rate (evenly spaced); what the guard
// lets in, and what is answered within the SLO, counted from `from_s`.
struct counts {
  int sent = 0, admitted = 0, within = 0;
};
struct run {
  counts high, low;
  std::string reason;  // a shed's, the last
};
run shared_device(std::function<double(double)> high_rate, std::function<double(double)> low_rate, double seconds,
                  double from_s, bool share = true, int low_priority = 0) {
  priority_guard g;
  g.configure({"high", "low"}, {1, low_priority});
  g.set_sharing(share ? std::vector<std::vector<size_t>>{{1}, {0}} : std::vector<std::vector<size_t>>{{}, {}});
  const double service_s = 0.005, slo_s = 0.1;  // 200 queries/s
  using outcome = std::tuple<double, size_t, bool>;
  std::priority_queue<outcome, std::vector<outcome>, std::greater<>> due;
  run r;
  double free_at = 0, next[2] = {0, 0};
  std::function<double(double)> rate[2] = {high_rate, low_rate};
  while (true) {
    size_t pi = next[0] <= next[1] ? 0 : 1;
    double t = next[pi];
    if (t >= seconds) break;
    next[pi] = t + 1 / rate[pi](t);
    while (!due.empty() && std::get<0>(due.top()) <= t) {
      auto [at, who, within] = due.top();
      due.pop();
      g.on_outcome(who, within, at);
    }
    auto& c = pi == 0 ? r.high : r.low;
    bool counted = t >= from_s;
    c.sent += counted;
    if (auto why = g.admit(pi, t); !why.empty()) {
      r.reason = why;
      continue;
    }
    c.admitted += counted;
    double start = std::max(t, free_at);
    bool in_time = start + service_s <= t + slo_s;
    if (in_time) free_at = start + service_s;
    c.within += counted && in_time;
    due.emplace(in_time ? start + service_s : start, pi, in_time);
  }
  return r;
}

TEST(priority_guard, at_twice_the_capacity_the_high_priority_keeps_its_slo_and_the_low_one_gets_what_is_left) {
  auto high = [](double) { return 80.0; };
  auto low = [](double) { return 320.0; };
  auto r = shared_device(high, low, 20, 5);
  // Unguarded (one priority), the queue stands at the SLO and each pipeline gets half its
  // queries through.
  auto open = shared_device(high, low, 20, 5, true, 1);
  EXPECT_LT(open.high.within, 0.7 * open.high.sent);
  EXPECT_EQ(open.high.admitted, open.high.sent);
  // Guarded, the high one keeps its SLO and the low one is served near the 120/s left.
  EXPECT_GE(r.high.within, 0.995 * r.high.sent) << r.high.within << " of " << r.high.sent;
  EXPECT_EQ(r.high.admitted, r.high.sent);
  double low_served = r.low.within / 15.0;
  std::cout << "high " << r.high.within << " of " << r.high.sent << ", low " << low_served << "/s, unguarded high "
            << open.high.within << " of " << open.high.sent << "\n";
  EXPECT_GT(low_served, 0.9 * 120) << low_served;
  EXPECT_LE(low_served, 120.5);
  EXPECT_NE(r.reason.find("shed for priority: pipeline 'high' (priority 1) shares devices with 'low' (priority 0) and "
                          "missed its SLO for "),
            std::string::npos)
      << r.reason;
}

TEST(priority_guard, pipelines_that_share_no_device_or_one_priority_are_never_held) {
  auto high = [](double) { return 80.0; };
  auto low = [](double) { return 320.0; };
  auto apart = shared_device(high, low, 10, 0, false);
  EXPECT_EQ(apart.low.admitted, apart.low.sent);
  EXPECT_TRUE(apart.reason.empty());
  auto one = shared_device(high, low, 10, 0, true, 1);
  EXPECT_EQ(one.low.admitted, one.low.sent);
}

TEST(priority_guard, once_the_high_priority_goes_quiet_the_low_one_is_let_in_whole_again) {
  // The high one sends for 5 s; 10 s later the low one is admitted whole.
  auto r = shared_device([](double t) { return t < 5 ? 80.0 : 0.01; }, [](double) { return 320.0; }, 25, 15);
  EXPECT_EQ(r.low.admitted, r.low.sent);
  // Below the capacity nothing is held at all.
  auto light = shared_device([](double) { return 80.0; }, [](double) { return 100.0; }, 10, 0);
  EXPECT_EQ(light.low.admitted, light.low.sent);
  EXPECT_EQ(light.high.within, light.high.sent);
}

TEST(priority_guard, a_limit_is_a_rate_with_a_short_burst_and_the_reason_names_it) {
  priority_guard g;
  g.configure({"gold", "bulk"}, {2, 0});
  g.set_sharing({{1}, {0}});
  // Interval one: bulk admitted at 100/s and all of it in time, gold at 80/s and 10 of its 40
  // late: 160/s got through, of which gold offers 80.
  for (int i = 0; i < 50; ++i) {
    EXPECT_EQ(g.admit(1, i * 0.01), "");
    g.on_outcome(1, true, i * 0.01);
  }
  for (int i = 0; i < 40; ++i) {
    EXPECT_EQ(g.admit(0, i * 0.0125), "");
    g.on_outcome(0, i >= 10, i * 0.0125);
  }
  // Closed at 0.5 s: bulk held to 0.7 x 100 = 70/s (below the 80/s left beside gold), its bucket
  // empty at first.
  auto why = g.admit(1, 0.5);
  EXPECT_NEAR(g.limit(1), 70, 1e-9);
  EXPECT_NE(why.find("'gold' (priority 2) shares devices with 'bulk' (priority 0) and missed its SLO for 25.0% of its "
                     "40 queries in the last 0.5 s; 'bulk' is admitted at 70.0 queries/s here until it recovers"),
            std::string::npos)
      << why;
  // Over the next 0.4 s at 200 offered/s, about 70/s x 0.4 s go.
  int let = 0;
  for (int i = 1; i <= 80; ++i) let += g.admit(1, 0.5 + i * 0.005).empty();
  EXPECT_NEAR(let, 28, 2);
  EXPECT_LT(g.limit(0), 0);  // the higher priority is never held
}

}  // namespace
}  // namespace sloserve::sched
