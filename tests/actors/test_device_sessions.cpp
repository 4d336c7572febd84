// A device's session table alone: schedules add sessions and drain the ones they drop, idle
// drained sessions go, and load counters start again after each report.

#include <gtest/gtest.h>

#include "actors/device_sessions.hpp"
#include "caf_fixture.hpp"

namespace sloserve {
namespace {

using namespace std::chrono_literals;

TEST(device_sessions, schedules_add_and_drain_sessions_and_idle_drained_ones_go) {
  auto cfg = testing::parse_or_die(R"(
nodes:
  - {name: n, address: tcp://127.0.0.1:0, roles: [controller, frontend, worker], devices: [{kind: emulated}]}
models:
  - {name: a, input: {dtype: float32, shape: [2]}, output: {dtype: float32, shape: [2]}, max_batch: 4, profile: {alpha_ms: 1, beta_ms: 1}}
  - {name: b, input: {dtype: float32, shape: [2]}, output: {dtype: float32, shape: [2]}, max_batch: 4, profile: {alpha_ms: 1, beta_ms: 1}}
pipelines:
  - {name: p, slo_ms: 100, stages: [{name: s, model: a}]}
)");
  device_sessions s(*cfg, 3);
  auto t0 = device_clock::time_point{} + 1h;
  s.apply({3, 0, {{"a", 9}, {"unknown", 2}}}, t0);
  ASSERT_EQ(s.all().size(), 1u) << "an unknown model is skipped";
  ASSERT_NE(s.find("a"), nullptr);
  EXPECT_EQ(s.find("a")->batch, 4) << "clamped to max_batch";
  EXPECT_EQ(s.find("a")->load.device, 3u);
  s.find("a")->load.arrived = 5;
  s.find("a")->load.completed = 4;
  s.find("a")->latency_sum_ms = 40;
  // Sponge's per-request budgets: each queued request's time left at the report, in EDF order,
  // and the latest arrivals' time left on arrival.
  s.find("a")->queue.push(t0 + 30ms, pending{});
  s.find("a")->queue.push(t0 + 10ms, pending{});
  for (int i = 0; i < 300; ++i) s.find("a")->budgets.add(i);
  auto load = s.take_load(t0 + 4ms);
  ASSERT_EQ(load.size(), 1u);
  EXPECT_EQ(load[0].arrived, 5u);
  EXPECT_DOUBLE_EQ(load[0].mean_latency_ms, 10);
  EXPECT_EQ(load[0].queue_length, 2u);
  EXPECT_EQ(load[0].queue_budgets_ms, (std::vector<double>{6, 26}));
  ASSERT_EQ(load[0].arrival_budgets_ms.size(), sched::budget_sample::capacity);
  EXPECT_DOUBLE_EQ(*std::max_element(load[0].arrival_budgets_ms.begin(), load[0].arrival_budgets_ms.end()), 299)
      << "the latest arrivals";
  EXPECT_DOUBLE_EQ(*std::min_element(load[0].arrival_budgets_ms.begin(), load[0].arrival_budgets_ms.end()), 44);
  s.find("a")->queue.take_all();
  auto again = s.take_load(t0 + 5ms);
  EXPECT_EQ(again[0].arrived, 0u) << "counters start again";
  EXPECT_TRUE(again[0].arrival_budgets_ms.empty());
  s.apply({3, 0, {{"b", 2}}}, t0 + 1s);
  ASSERT_EQ(s.all().size(), 2u);
  EXPECT_TRUE(s.find("a")->draining) << "still served while frontends move on";
  bool running = true;
  auto is_running = [&](const model_spec*) { return running; };
  s.prune(t0 + 10s, 2s, is_running);
  EXPECT_NE(s.find("a"), nullptr) << "a batch of it still runs";
  running = false;
  s.prune(t0 + 2s, 2s, is_running);
  EXPECT_NE(s.find("a"), nullptr) << "not idle long enough";
  s.prune(t0 + 10s, 2s, is_running);
  EXPECT_EQ(s.find("a"), nullptr);
  EXPECT_NE(s.find("b"), nullptr) << "scheduled sessions stay";
}

// An apply hands the device a new configuration: the session of a model it keeps is the same
// session (its queue and counters), now of the new file's spec; one it drops drains.
TEST(device_sessions, an_apply_keeps_the_sessions_of_the_models_it_keeps) {
  const std::string head = R"(
nodes:
  - {name: n, address: tcp://127.0.0.1:0, roles: [controller, frontend, worker], devices: [{kind: emulated}]}
models:
  - {name: a, input: {dtype: float32, shape: [2]}, output: {dtype: float32, shape: [2]}, max_batch: 4, profile: {alpha_ms: 1, beta_ms: 1}}
)";
  auto before = testing::parse_or_die(
      head +
      R"(  - {name: b, input: {dtype: float32, shape: [2]}, output: {dtype: float32, shape: [2]}, max_batch: 4, profile: {alpha_ms: 1, beta_ms: 1}}
pipelines:
  - {name: p, slo_ms: 100, stages: [{name: s, model: a}]}
)");
  auto after = testing::parse_or_die(head + R"(pipelines:
  - {name: p, slo_ms: 150, stages: [{name: s, model: a}]}
)");
  device_sessions s(*before, 0);
  auto t0 = device_clock::time_point{} + 1h;
  s.apply({0, 0, {{"a", 4}, {"b", 4}}}, t0);
  s.find("a")->queue.push(t0 + 30ms, pending{});
  s.find("a")->load.arrived = 3;
  s.rebind(*after);
  EXPECT_EQ(s.find("a")->model, &after->models[0]) << "the new file's spec";
  s.apply({0, 0, {{"a", 4}}}, t0 + 1s);
  ASSERT_EQ(s.all().size(), 2u) << "a once, and b draining";
  EXPECT_EQ(s.find("a")->queue.size(), 1u) << "the same session: what it queued stays";
  EXPECT_EQ(s.find("a")->load.arrived, 3u);
  EXPECT_FALSE(s.find("a")->draining);
  EXPECT_TRUE(s.find("b")->draining);
  EXPECT_EQ(s.find("b")->model, &before->models[1]) << "a dropped model keeps its spec while it drains";
}

TEST(model_loads, a_load_starts_once_goes_on_while_needed_and_is_abandoned_when_not) {
  model_spec a, b;
  a.name = "a";
  b.name = "b";
  model_loads loads;
  std::vector<model_loads::load> started;
  auto t0 = device_clock::time_point{} + 1s;
  // Both start loading: the wait is the slower one's.
  EXPECT_EQ(loads.wait({{&a, 300}, {&b, 100}}, t0, started), 300ms);
  ASSERT_EQ(started.size(), 2u);
  // 100 ms on, the same schedule waits what is left of a's load; nothing starts again.
  started.clear();
  EXPECT_EQ(loads.wait({{&a, 300}, {&b, 100}}, t0 + 100ms, started), 200ms);
  EXPECT_TRUE(started.empty());
  // A schedule without b abandons its load: asked again later, b starts from the beginning.
  EXPECT_EQ(loads.wait({{&a, 300}}, t0 + 150ms, started), 150ms);
  EXPECT_EQ(loads.wait({{&a, 300}, {&b, 100}}, t0 + 150ms, started), 150ms);
  ASSERT_EQ(started.size(), 1u);
  EXPECT_EQ(started[0].model, &b);
  // A model with no load delay (a real device's) adds no wait.
  model_loads none;
  EXPECT_EQ(none.wait({{&a, 0}}, t0, started), 0ns);
}

}  // namespace
}  // namespace sloserve
