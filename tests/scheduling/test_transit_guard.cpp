#include <gtest/gtest.h>

#include <functional>
#include <queue>
#include <utility>
#include <vector>

#include "scheduling/transit_guard.hpp"

namespace sloserve::sched {
namespace {

// A path that carries `capacity` invocations/s in order (a link, a receiver that cannot keep up),
// then a worker that takes `worker_s` for each; the frontend sends at `rate(t)` with a budget of
// `budget_s`, through the guard when `guarded`. What it sent, what went, and what was answered in
// time.
struct outcome {
  int sent = 0, went = 0, in_time = 0;
};
outcome run_path(double capacity, const std::function<double(double)>& rate, double seconds, bool guarded,
                 double budget_s = 0.1, double worker_s = 0.005) {
  transit_guard g;
  outcome o;
  double path_free = 0;
  using reply = std::pair<double, double>;  // (answered at, sent at)
  std::priority_queue<reply, std::vector<reply>, std::greater<>> replies;
  auto answer = [&](double until) {
    while (!replies.empty() && replies.top().first <= until) {
      auto [at, sent] = replies.top();
      replies.pop();
      g.on_reply("w", at, at - sent, worker_s, budget_s);
      o.in_time += at - sent <= budget_s;
    }
  };
  for (double t = 0; t < seconds; t += 1 / rate(t)) {
    answer(t);
    ++o.sent;
    if (guarded && !g.refusal("w", t, budget_s, static_cast<uint32_t>(replies.size())).empty()) continue;
    ++o.went;
    path_free = std::max(path_free, t) + 1 / capacity;
    replies.push({path_free + worker_s, t});
  }
  answer(1e9);
  return o;
}

TEST(transit_guard, a_path_twice_overloaded_answers_nearly_its_capacity_in_time_instead_of_almost_nothing) {
  auto twice = [](double) { return 2000.0; };
  auto open = run_path(1000, twice, 5, false);
  auto guarded = run_path(1000, twice, 5, true);
  // Unguarded, the queue on the path grows by half a second a second: after the first tenth of a
  // second everything arrives late.
  EXPECT_LT(open.in_time, 0.05 * 1000 * 5);
  // Guarded, the path carries what it can in time and the rest is refused at once.
  EXPECT_GT(guarded.in_time, 0.9 * 1000 * 5);
  EXPECT_GT(guarded.went - guarded.in_time, 0);  // the queue's build-up before it was seen
  EXPECT_LT(guarded.went - guarded.in_time, 0.05 * guarded.went);
  EXPECT_LT(guarded.went, 1.05 * 1000 * 5);
}

TEST(transit_guard, below_capacity_and_through_a_short_burst_it_refuses_nothing) {
  auto below = run_path(
      1000, [](double) { return 800.0; }, 5, true);
  EXPECT_EQ(below.went, below.sent);
  EXPECT_EQ(below.in_time, below.sent);
  // A burst of 1.5x for 50 ms queues 25 ms at most: within the budget, nothing refused.
  auto burst = run_path(
      1000, [](double t) { return t >= 1 && t < 1.05 ? 1500.0 : 800.0; }, 3, true);
  EXPECT_EQ(burst.went, burst.sent);
  EXPECT_EQ(burst.in_time, burst.sent);
}

TEST(transit_guard, a_long_surge_is_refused_while_it_lasts_and_served_again_after) {
  // 2.5x for one second in the middle of light load.
  auto rate = [](double t) { return t >= 2 && t < 3 ? 2500.0 : 500.0; };
  auto o = run_path(1000, rate, 6, true);
  auto open = run_path(1000, rate, 6, false);
  EXPECT_LT(o.went, o.sent);
  // The second before and the seconds after are all answered: 2 s + 3 s at 500/s, and the path's
  // capacity during the surge, less its build-up.
  EXPECT_GT(o.in_time, 2500 + 0.8 * 1000);
  EXPECT_LT(open.in_time, o.in_time - 500);
}

TEST(transit_guard, a_path_without_a_standing_queue_is_not_held_to_its_in_flight_count) {
  transit_guard g;
  // Replies of 1 ms transit on 100 ms budgets, the worker's queue long (80 ms): the device's
  // queue is the worker's to judge, not the path's.
  for (int i = 0; i < 100; ++i) g.on_reply("w", i * 0.001, 0.081, 0.08, 0.1);
  EXPECT_FALSE(g.standing("w", 0.1));
  EXPECT_EQ(g.refusal("w", 0.1, 0.1, 10000), "");
  EXPECT_NEAR(g.one_way_s("w", 0.1), 0.0005, 1e-9);
  // Then 41 ms of transit on every reply, 400 a second: 40 ms over the path's 1 ms base stands.
  for (int i = 0; i < 200; ++i) g.on_reply("w", 0.5 + i * 0.0025, 0.046, 0.005, 0.1);
  EXPECT_TRUE(g.standing("w", 1.0));
  EXPECT_NEAR(g.one_way_s("w", 1.0), 0.0205, 1e-9);
  // 10 in flight take 25 ms, of which 5 on the worker and 1 the base: 19 ms queued (< 30 ms of
  // 100 ms left), it goes; 20 in flight would queue 44 ms: refused, with the figures.
  EXPECT_EQ(g.refusal("w", 1.0, 0.1, 10), "");
  auto why = g.refusal("w", 1.0, 0.1, 20);
  EXPECT_NE(why.find("path to worker 'w' is backed up: replies spend 41.0 ms on it (it takes 1.0 ms unloaded)"),
            std::string::npos)
      << why;
  EXPECT_NE(why.find("20 invocations in flight at 400 replies/s would queue 44.0 ms"), std::string::npos) << why;
  // Other nodes are not affected, and a path whose replies stop is no longer standing.
  EXPECT_EQ(g.refusal("v", 1.0, 0.1, 1000), "");
  EXPECT_FALSE(g.standing("w", 1.2));
}

TEST(transit_guard, a_slow_link_that_does_not_queue_is_not_a_standing_queue) {
  transit_guard g;
  // 60 ms each way on every reply, budgets of 150 ms: slow, but nothing queues.
  for (int i = 0; i < 1000; ++i) g.on_reply("far", i * 0.01, 0.125, 0.005, 0.15);
  EXPECT_FALSE(g.standing("far", 10));
  EXPECT_EQ(g.refusal("far", 10, 0.15, 500), "");
  EXPECT_NEAR(g.one_way_s("far", 10), 0.06, 1e-9);  // what an invocation's budget loses on the way
}

}  // namespace
}  // namespace sloserve::sched
