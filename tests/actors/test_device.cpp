// The device actor on a deterministic scheduler: batches form while a batch runs, early drop
// answers DROPPED, and every request gets exactly one result.

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <map>
#include <set>

#include "actors/roles.hpp"
#include "caf_fixture.hpp"
#include "gpu/executor.hpp"

namespace sloserve {
namespace {

using namespace std::chrono_literals;
using testing::caf_fixture;
using testing::recording_link;

const char* yaml = R"(
nodes:
  - {name: fe, address: tcp://127.0.0.1:0, roles: [controller, frontend]}
  - {name: w, address: tcp://127.0.0.1:0, roles: [worker], devices: [{kind: emulated}]}
models:
  - {name: m, input: {dtype: float32, shape: [2]}, output: {dtype: float32, shape: [3]}, max_batch: 4, profile: {batch: [1, 2, 4], latency_ms: [10, 12, 16]}}
  - {name: n, input: {dtype: float32, shape: [2]}, output: {dtype: float32, shape: [1]}, max_batch: 4, profile: {batch: [1, 2, 4], latency_ms: [5, 6, 8]}}
  - {name: img, input: {dtype: float32, shape: [3, 4, 4]}, output: {dtype: float32, shape: [1]}, max_batch: 4, profile: {alpha_ms: 1, beta_ms: 1}, preprocess: {from: image}}
runtime: {max_queue_length: 3}
)";

struct caf_fixture_test : caf_fixture, ::testing::Test {};

struct device_fixture : caf_fixture, ::testing::Test {
  device_fixture() {
    cfg_ = testing::parse_or_die(yaml);
    net = std::make_shared<recording_link>("w");
    dev = keep(spawn_device(*sys, {cfg_, net, 1}, 0, device_kind::emulated));
    caf::anon_send(dev, msg::device_schedule{0, 0, {{"m", 4}, {"n", 4}}});
    run();
  }
  void invoke(uint64_t id, std::chrono::milliseconds budget, std::string model = "m", tensor in = {}) {
    if (in.data.empty()) in = make_tensor({dtype::float32, {2}}, id);
    caf::anon_send(dev, msg::invocation{id, "fe", std::move(model), 0, std::chrono::nanoseconds(budget).count(), {in}});
    run();
  }
  std::vector<msg::invocation_result> results() {
    std::vector<msg::invocation_result> out;
    for (auto& [node, r] : net->take<msg::invocation_result>()) {
      EXPECT_EQ(node, "fe");
      out.push_back(r);
    }
    return out;
  }
  std::shared_ptr<const cluster_config> cfg_;
  std::shared_ptr<recording_link> net;
  device_actor dev;
};

TEST_F(device_fixture, batches_form_while_the_device_is_busy) {
  invoke(1, 100ms);  // starts at once, alone
  invoke(2, 100ms);
  invoke(3, 100ms);
  EXPECT_TRUE(results().empty());
  advance(10ms);  // l(1)
  auto r = results();
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].id, 1u);
  EXPECT_EQ(r[0].batch, 1u);
  EXPECT_EQ(r[0].exec_ns, std::chrono::nanoseconds(10ms).count());
  advance(12ms);  // l(2): requests 2 and 3 ran together
  r = results();
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].batch, 2u);
  EXPECT_EQ(r[0].queue_ns, std::chrono::nanoseconds(10ms).count());
  EXPECT_EQ(r[1].outputs[0].shape, std::vector<int64_t>{3});
  EXPECT_EQ(r[0].code, msg::status::ok);
}

// Piccolo's dummies run in the batches beside real requests, and come back answered without
// outputs.
TEST_F(device_fixture, a_dummy_runs_in_the_batch_and_comes_back_without_outputs) {
  invoke(1, 100ms);  // starts at once, alone
  invoke(2, 100ms);
  msg::invocation d{3, "fe", "m", 0, std::chrono::nanoseconds(100ms).count(), {make_tensor({dtype::float32, {2}}, 3)}};
  d.dummy = true;
  caf::anon_send(dev, d);
  run();
  advance(10ms);
  ASSERT_EQ(results().size(), 1u);
  advance(12ms);  // l(2): request 2 and the dummy together
  auto r = results();
  ASSERT_EQ(r.size(), 2u);
  for (auto& x : r) {
    EXPECT_EQ(x.code, msg::status::ok);
    EXPECT_EQ(x.batch, 2u);
    EXPECT_EQ(x.outputs.empty(), x.id == 3) << x.id;
  }
}

// A model that preprocesses takes images; one that is no JPEG is answered ERROR with why before it
// queues, and the good ones run.
TEST_F(device_fixture, a_bad_image_is_refused_alone) {
  caf::anon_send(dev, msg::device_schedule{0, 0, {{"img", 4}}});
  run();
  invoke(1, 100ms, "img", make_tensor({dtype::uint8, {5, 6, 3}}, 1));
  invoke(2, 100ms, "img", make_tensor({dtype::uint8, {100}}, 2));  // random bytes, not a JPEG
  invoke(3, 100ms, "img", make_tensor({dtype::float32, {3, 4, 4}}, 3));
  invoke(4, 100ms, "img", make_tensor({dtype::uint8, {5, 6, 4}}, 4));  // four channels
  advance(10ms);                                                       // request 1 ran alone
  advance(10ms);                                                       // then request 3
  auto r = results();
  ASSERT_EQ(r.size(), 4u);
  std::map<uint64_t, msg::invocation_result> by_id;
  for (auto& x : r) by_id[x.id] = x;
  EXPECT_EQ(by_id[1].code, msg::status::ok);
  EXPECT_EQ(by_id[2].code, msg::status::error);
  EXPECT_NE(by_id[2].reason.find("bad JPEG image"), std::string::npos) << by_id[2].reason;
  EXPECT_EQ(by_id[3].code, msg::status::ok);
  EXPECT_EQ(by_id[4].code, msg::status::error);
  EXPECT_NE(by_id[4].reason.find("nor an image"), std::string::npos) << by_id[4].reason;
}

TEST_F(device_fixture, outputs_are_deterministic_in_the_input) {
  auto in = make_tensor({dtype::float32, {2}}, 99);
  invoke(1, 100ms, "m", in);
  advance(10ms);
  invoke(2, 100ms, "m", in);
  advance(10ms);
  auto r = results();
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].outputs[0].data, r[1].outputs[0].data);
}

TEST_F(device_fixture, early_drop_answers_what_cannot_make_it) {
  invoke(1, 100ms);  // runs 10 ms
  invoke(2, 15ms);   // when the device frees up 5 ms are left; l(1) = 10 ms
  invoke(3, 100ms);
  advance(10ms);
  auto r = results();
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].id, 1u);
  EXPECT_EQ(r[1].id, 2u);
  EXPECT_EQ(r[1].code, msg::status::dropped);
  EXPECT_NE(r[1].reason.find("early drop"), std::string::npos);
  advance(10ms);
  r = results();
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].id, 3u);
  EXPECT_EQ(r[0].code, msg::status::ok);
}

// The online profile refresh, on the device: each batch is timed against what the profile says
// (the load report carries both), and a schedule that says the model runs at twice its profile
// makes early drop judge by twice the profile.
TEST_F(device_fixture, batches_are_timed_against_the_profile_and_a_refreshed_scale_drops_by_it) {
  invoke(1, 100ms);  // l(1) = 10 ms
  advance(10ms);
  ASSERT_EQ(results().size(), 1u);
  caf::scoped_actor self{*sys};
  device_load load;
  self->send(dev, stats_atom::value);
  run();
  self->receive([&](device_load& l) { load = std::move(l); }, caf::after(0s) >> [] {});
  auto it = std::find_if(load.sessions.begin(), load.sessions.end(), [](auto& l) { return l.model == "m"; });
  ASSERT_NE(it, load.sessions.end());
  EXPECT_EQ(it->exec_batches, 1u);
  EXPECT_NEAR(it->exec_ms, 10, 1e-6);
  EXPECT_NEAR(it->expected_exec_ms, 10, 1e-6);
  // 15 ms of budget: enough for l(1) = 10 ms, not for twice that.
  invoke(2, 15ms);
  advance(10ms);
  auto r = results();
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].code, msg::status::ok);
  msg::session_schedule slow{"m", 4, 2.0};
  caf::anon_send(dev, msg::device_schedule{0, 0, {slow, {"n", 4}}});
  run();
  invoke(3, 15ms);
  advance(20ms);
  r = results();
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].code, msg::status::dropped);
  EXPECT_NE(r[0].reason.find("needs 20.0 ms"), std::string::npos) << r[0].reason;
}

// A real device reads its mailbox only between batches. An invocation the worker took in 12 ms
// before the device got to it has 12 ms less: with 15 ms of budget and l(1) = 10 ms it cannot
// make it and is dropped at once, and the wait counts as queueing for one that can.
TEST_F(device_fixture, the_deadline_runs_from_when_the_worker_took_the_invocation_in) {
  advance(20ms);
  auto took_in = (now() - 12ms).time_since_epoch().count();
  msg::invocation late{
      1, "fe", "m", 0, std::chrono::nanoseconds(15ms).count(), {make_tensor({dtype::float32, {2}}, 1)}};
  late.received_ns = took_in;
  caf::anon_send(dev, late);
  run();
  auto r = results();
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].code, msg::status::dropped);
  msg::invocation fine{
      2, "fe", "m", 0, std::chrono::nanoseconds(100ms).count(), {make_tensor({dtype::float32, {2}}, 2)}};
  fine.received_ns = took_in;
  caf::anon_send(dev, fine);
  run();
  advance(10ms);
  r = results();
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].code, msg::status::ok);
  EXPECT_EQ(r[0].queue_ns, std::chrono::nanoseconds(12ms).count());
}

TEST_F(device_fixture, sessions_take_turns) {
  invoke(1, 100ms, "m");  // running
  invoke(2, 100ms, "m");
  invoke(3, 100ms, "n");
  advance(10ms);  // m's first batch done; the round-robin turn goes to n
  auto r = results();
  ASSERT_EQ(r.size(), 1u);
  advance(5ms);  // n ran alone in l_n(1) = 5 ms
  r = results();
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].id, 3u);
  advance(10ms);
  r = results();
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].id, 2u);
}

// Sessions that serve pipelines of different priorities: the higher's queue goes first, whatever
// the round-robin turn says; of one priority they take turns as above.
TEST_F(caf_fixture_test, a_higher_prioritys_queue_runs_before_the_turn_of_a_lower_one) {
  auto cfg = testing::parse_or_die(std::string(yaml) + R"(pipelines:
  - {name: bulk, slo_ms: 500, stages: [{name: s, model: m}]}
  - {name: urgent, slo_ms: 500, priority: 1, stages: [{name: s, model: n}]}
)");
  auto net = std::make_shared<recording_link>("w");
  auto dev = keep(spawn_device(*sys, {cfg, net, 1}, 0, device_kind::emulated));
  caf::anon_send(dev, msg::device_schedule{0, 0, {{"m", 4}, {"n", 4}}});
  run();
  auto invoke = [&](uint64_t id, std::string model) {
    caf::anon_send(dev, msg::invocation{id,
                                        "fe",
                                        std::move(model),
                                        0,
                                        std::chrono::nanoseconds(100ms).count(),
                                        {make_tensor({dtype::float32, {2}}, id)}});
    run();
  };
  auto done = [&] {
    std::vector<uint64_t> ids;
    for (auto& [node, r] : net->take<msg::invocation_result>()) ids.push_back(r.id);
    return ids;
  };
  invoke(1, "n");  // running: the turn is m's next
  invoke(2, "m");
  invoke(3, "n");
  advance(5ms);  // n's batch done: n's queue goes before m's turn
  EXPECT_EQ(done(), std::vector<uint64_t>{1});
  advance(5ms);
  EXPECT_EQ(done(), std::vector<uint64_t>{3});
  advance(10ms);
  EXPECT_EQ(done(), std::vector<uint64_t>{2});
}

TEST_F(device_fixture, bad_invocations_get_errors) {
  invoke(1, 100ms, "unknown");
  invoke(2, 100ms, "m", make_tensor({dtype::float32, {7}}, 1));
  auto r = results();
  ASSERT_EQ(r.size(), 2u);
  EXPECT_NE(r[0].reason.find("model 'unknown' is not scheduled on device 0 of w"), std::string::npos);
  EXPECT_NE(r[1].reason.find("does not match the model's declared input float32[2]"), std::string::npos);
}

TEST_F(device_fixture, a_full_queue_answers_overloaded) {
  invoke(1, 1000ms);  // running, not queued
  for (uint64_t i = 2; i <= 6; ++i) invoke(i, 1000ms);
  auto r = results();
  ASSERT_EQ(r.size(), 2u);  // queue holds 3: requests 5 and 6 are turned away
  EXPECT_EQ(r[0].code, msg::status::overloaded);
  EXPECT_NE(r[0].reason.find("max_queue_length"), std::string::npos);
  advance(10ms);
  advance(16ms);
  EXPECT_EQ(results().size(), 4u);
}

TEST_F(device_fixture, an_unscheduled_session_drains_before_it_goes) {
  invoke(1, 100ms, "n");  // running
  invoke(2, 100ms, "m");  // queued
  caf::anon_send(dev, msg::device_schedule{0, 0, {{"n", 4}}});
  run();
  EXPECT_TRUE(results().empty());  // nothing is failed by the schedule change
  advance(5ms);
  advance(10ms);
  auto r = results();
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[1].id, 2u);
  EXPECT_EQ(r[1].code, msg::status::ok);
  invoke(3, 100ms, "m");  // a frontend that has not seen the new table yet is still served
  advance(10ms);
  r = results();
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].code, msg::status::ok);
  advance(2001ms);  // idle for two beacons: the session is gone
  invoke(4, 100ms, "m");
  r = results();
  ASSERT_EQ(r.size(), 1u);
  EXPECT_NE(r[0].reason.find("not scheduled"), std::string::npos);
}

// Prefix batching on an emulated device: variants of one prefix share one pass of it.
// One emulated device serving two variants of one prefix, both scheduled at batch 8.
struct family_fixture : caf_fixture, ::testing::Test {
  family_fixture() {
    auto cfg = testing::parse_or_die(R"(
nodes:
  - {name: fe, address: tcp://127.0.0.1:0, roles: [controller, frontend]}
  - {name: w, address: tcp://127.0.0.1:0, roles: [worker], devices: [{kind: emulated}]}
models:
  - {name: backbone, input: {dtype: float32, shape: [2]}, output: {dtype: float32, shape: [4]}, max_batch: 8, profile: {alpha_ms: 1, beta_ms: 10}}
  - {name: v0, prefix: backbone, input: {dtype: float32, shape: [2]}, output: {dtype: float32, shape: [3]}, max_batch: 8, profile: {alpha_ms: 1.2, beta_ms: 12}}
  - {name: v1, prefix: backbone, input: {dtype: float32, shape: [2]}, output: {dtype: float32, shape: [3]}, max_batch: 8, profile: {alpha_ms: 1.2, beta_ms: 12}}
)");
    dev = keep(spawn_device(*sys, {cfg, net, 1}, 0, device_kind::emulated));
    caf::anon_send(dev, msg::device_schedule{0, 0, {{"v0", 8}, {"v1", 8}}});
    run();
  }
  void invoke(uint64_t id, std::string model, std::chrono::microseconds budget = 1s) {
    caf::anon_send(dev, msg::invocation{id,
                                        "fe",
                                        std::move(model),
                                        0,
                                        std::chrono::nanoseconds(budget).count(),
                                        {make_tensor({dtype::float32, {2}}, id)}});
    run();
  }
  std::shared_ptr<recording_link> net = std::make_shared<recording_link>("w");
  device_actor dev;
};

TEST_F(family_fixture, variants_of_one_prefix_run_as_one_family_batch) {
  invoke(1, "v0");  // runs alone: l_v0(1) = 13.2 ms
  invoke(2, "v0");
  invoke(3, "v1");
  invoke(4, "v1");
  invoke(5, "v1");
  advance(13200us);
  EXPECT_EQ(net->take<msg::invocation_result>().size(), 1u);
  // One family batch: prefix over 4 requests, l_p(4) = 14 ms, plus suffixes of 1 and 3
  // requests (l_v - l_p: 2.2 and 2.6 ms) = 18.8 ms. Separately it would take 14.4 + 15.6 ms.
  advance(18799us);
  EXPECT_TRUE(net->take<msg::invocation_result>().empty());
  advance(1us);
  auto r = net->take<msg::invocation_result>();
  ASSERT_EQ(r.size(), 4u);
  for (auto& [node, x] : r) {
    EXPECT_EQ(x.code, msg::status::ok);
    EXPECT_EQ(x.batch, 4u);
    EXPECT_EQ(x.outputs[0].shape, std::vector<int64_t>{3});
  }
}

// A variant's batch is judged at the cost of the family pass it joins, not of its own rows.
TEST_F(family_fixture, early_drop_counts_the_whole_family_batch) {
  invoke(1, "v0", 1s);       // runs alone: l_v0(1) = 13.2 ms
  invoke(2, "v0", 28200us);  // 15 ms left when the device frees up
  for (uint64_t id : {3, 4, 5}) invoke(id, "v1", 1s);
  advance(13200us);
  // Alone, request 2 would fit (l_v0(1) = 13.2 ms); in a pass with v1's three it needs
  // l_v0(4) = 16.8 ms, and is dropped rather than answered late.
  auto r = net->take<msg::invocation_result>();
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].second.id, 1u);
  EXPECT_EQ(r[1].second.id, 2u);
  EXPECT_EQ(r[1].second.code, msg::status::dropped);
  EXPECT_NE(r[1].second.reason.find("a batch of 4 v0 needs 16.8 ms"), std::string::npos) << r[1].second.reason;
  // v1's three run on their own: prefix over 3 (13 ms) plus their suffix (2.6 ms).
  advance(15599us);
  EXPECT_TRUE(net->take<msg::invocation_result>().empty());
  advance(1us);
  r = net->take<msg::invocation_result>();
  ASSERT_EQ(r.size(), 3u);
  for (auto& [node, x] : r) {
    EXPECT_EQ(x.code, msg::status::ok);
    EXPECT_EQ(x.batch, 3u);
  }
}

TEST(device_prefix, config_checks_prefixes) {
  auto r = parse_cluster_config(R"(nodes:
  - {name: n, address: "tcp://127.0.0.1:0", roles: [controller, frontend, worker], devices: [{kind: emulated}]}
models:
  - {name: a, input: {dtype: float32, shape: [2]}, output: {dtype: float32, shape: [4]}, profile: {alpha_ms: 1, beta_ms: 1}}
  - {name: b, prefix: nope, input: {dtype: float32, shape: [2]}, output: {dtype: float32, shape: [3]}, profile: {alpha_ms: 1, beta_ms: 1}}
  - {name: c, prefix: a, input: {dtype: float32, shape: [5]}, output: {dtype: float32, shape: [3]}, profile: {alpha_ms: 1, beta_ms: 1}}
)",
                                "p.yaml");
  ASSERT_FALSE(r);
  auto e = r.error_text();
  EXPECT_NE(e.find("p.yaml:5:23: model 'b' has unknown prefix model 'nope'"), std::string::npos) << e;
  EXPECT_NE(e.find("model 'c' takes float32[5] but its prefix 'a' takes float32[2]"), std::string::npos) << e;
}

}  // namespace
}  // namespace sloserve

namespace sloserve {
namespace {

// A burst beyond the node's budget for queued payloads is answered OVERLOADED at once; every
// request gets exactly one answer and the budget is whole again once the queue drains.
TEST(device_budget, payloads_beyond_max_queued_mb_are_overloaded_and_nothing_is_lost) {
  testing::caf_fixture f;
  auto cfg = testing::parse_or_die(R"(
nodes:
  - {name: fe, address: tcp://127.0.0.1:0, roles: [controller, frontend]}
  - {name: w, address: tcp://127.0.0.1:0, roles: [worker], devices: [{kind: emulated, count: 2}]}
models:
  - {name: big, input: {dtype: float32, shape: [65536]}, output: {dtype: float32, shape: [1]}, max_batch: 2, profile: {alpha_ms: 10, beta_ms: 10}}
runtime: {max_queued_mb: 1}
)");
  auto net = std::make_shared<recording_link>("w");
  // Two devices on one node share its budget: 1 MB holds four 256 KiB payloads in all.
  std::vector<device_actor> devs;
  for (uint32_t d = 0; d < 2; ++d) {
    devs.push_back(f.keep(spawn_device(*f.sys, {cfg, net, 1}, d, device_kind::emulated)));
    caf::anon_send(devs.back(), msg::device_schedule{d, 0, {{"big", 2}}});
  }
  f.run();
  for (uint64_t id = 1; id <= 10; ++id) {
    caf::anon_send(devs[id % 2], msg::invocation{id,
                                                 "fe",
                                                 "big",
                                                 static_cast<uint32_t>(id % 2),
                                                 std::chrono::nanoseconds(10s).count(),
                                                 {make_tensor({dtype::float32, {65536}}, id)}});
    f.run();
  }
  // Requests 1 and 2 started at once (not queued); 3..6 fill the budget; 7..10 are turned away.
  auto r = net->take<msg::invocation_result>();
  ASSERT_EQ(r.size(), 4u);
  for (auto& [node, x] : r) {
    EXPECT_EQ(x.code, msg::status::overloaded);
    EXPECT_GE(x.id, 7u);
    EXPECT_NE(x.reason.find("runtime.max_queued_mb 1"), std::string::npos) << x.reason;
  }
  EXPECT_EQ(net->queued.used(), 4 * 65536 * 4);
  f.advance(30ms);  // l(1) = 20 ms, then batches of two
  f.advance(30ms);
  f.advance(30ms);
  EXPECT_EQ(net->take<msg::invocation_result>().size(), 6u);
  EXPECT_EQ(net->queued.used(), 0);
}

}  // namespace
}  // namespace sloserve

namespace sloserve {
namespace {

// An emulated device resized in place runs its next batches at l(b, c) of the new core count.
TEST(device_resize, an_emulated_device_follows_l_b_c_when_resized) {
  testing::caf_fixture f;
  auto cfg = testing::parse_or_die(R"(
nodes:
  - {name: fe, address: tcp://127.0.0.1:0, roles: [controller, frontend]}
  - {name: w, address: tcp://127.0.0.1:0, roles: [worker], devices: [{kind: emulated, threads: 1}]}
models:
  - {name: m, input: {dtype: float32, shape: [2]}, output: {dtype: float32, shape: [1]}, max_batch: 4, profile: {alpha_ms: 1, beta_ms: 1}, cores: {gamma_ms: 40, epsilon_ms: 20, delta_ms: 2, eta_ms: 5}}
)");
  auto net = std::make_shared<recording_link>("w");
  auto dev = f.keep(spawn_device(*f.sys, {cfg, net, 1}, 0, device_kind::emulated));
  caf::anon_send(dev, msg::device_schedule{0, 0, {{"m", 4}}});
  f.run();
  // The batch of one takes exactly `ms`: nothing before, the result then.
  auto runs_for = [&](uint64_t id, std::chrono::milliseconds ms) {
    caf::anon_send(
        dev, msg::invocation{
                 id, "fe", "m", 0, std::chrono::nanoseconds(1s).count(), {make_tensor({dtype::float32, {2}}, id)}});
    f.run();
    f.advance(ms - 1us);
    EXPECT_TRUE(net->take<msg::invocation_result>().empty());
    f.advance(1us);
    auto r = net->take<msg::invocation_result>();
    ASSERT_EQ(r.size(), 1u);
    EXPECT_EQ(r[0].second.exec_ns, std::chrono::nanoseconds(ms).count());
  };
  // l(1, 1) = 40 + 20 + 2 + 5 = 67 ms; l(1, 4) = 10 + 5 + 2 + 5 = 22 ms.
  runs_for(1, 67ms);
  caf::anon_send(dev, msg::resize{0, 4});
  f.run();
  runs_for(2, 22ms);
}

}  // namespace
}  // namespace sloserve

namespace sloserve {
namespace {

// An emulated cold start: a device that holds no session of a model with load_ms takes that long
// to load it. It acknowledges the schedule only then, and serves its old sessions meanwhile.
struct cold_start_fixture : testing::caf_fixture, ::testing::Test {
  cold_start_fixture() {
    cfg = testing::parse_or_die(R"(
nodes:
  - {name: fe, address: tcp://127.0.0.1:0, roles: [controller, frontend]}
  - {name: w, address: tcp://127.0.0.1:0, roles: [worker], devices: [{kind: emulated}]}
models:
  - {name: m, input: {dtype: float32, shape: [2]}, output: {dtype: float32, shape: [1]}, max_batch: 4, profile: {batch: [1, 4], latency_ms: [10, 16]}, load_ms: 300}
  - {name: k, input: {dtype: float32, shape: [2]}, output: {dtype: float32, shape: [1]}, max_batch: 4, profile: {batch: [1, 4], latency_ms: [10, 16]}, load_ms: 500}
)");
    net = std::make_shared<recording_link>("w");
    dev = keep(spawn_device(*sys, {cfg, net, 1}, 0, device_kind::emulated));
  }
  // Sends `models` as the device's schedule; the flag turns true when the device acknowledges.
  std::shared_ptr<bool> schedule(std::vector<std::string> models) {
    msg::device_schedule ds{0, 0, {}};
    for (auto& m : models) ds.sessions.push_back({m, 4});
    auto done = std::make_shared<bool>(false);
    auto d = dev;
    keep(sys->spawn([d, ds, done](caf::event_based_actor* self) {
      self->request(d, caf::infinite, ds).then([done](std::vector<msg::unloaded_model>& failed) {
        *done = failed.empty();
      });
    }));
    run();
    return done;
  }
  msg::status serve(uint64_t id, const std::string& model) {
    caf::anon_send(
        dev, msg::invocation{
                 id, "fe", model, 0, std::chrono::nanoseconds(1s).count(), {make_tensor({dtype::float32, {2}}, id)}});
    run();
    advance(10ms);
    auto r = net->take<msg::invocation_result>();
    EXPECT_EQ(r.size(), 1u);
    return r.empty() ? msg::status::error : r[0].second.code;
  }
  std::shared_ptr<const cluster_config> cfg;
  std::shared_ptr<recording_link> net;
  device_actor dev;
};

TEST_F(cold_start_fixture, a_new_model_is_acknowledged_only_once_loaded_and_old_sessions_serve_meanwhile) {
  auto first = schedule({"m"});
  advance(299ms);
  EXPECT_FALSE(*first);
  advance(1ms);
  ASSERT_TRUE(*first);
  auto second = schedule({"m", "k"});         // m is held: only k loads, 500 ms
  EXPECT_EQ(serve(1, "m"), msg::status::ok);  // the old schedule serves while k loads
  EXPECT_FALSE(*second);
  advance(489ms);  // 499 ms since the schedule
  EXPECT_FALSE(*second);
  advance(1ms);
  ASSERT_TRUE(*second);
  EXPECT_EQ(serve(2, "k"), msg::status::ok);
  // Models it holds cost nothing: dropping k and taking it back while k's session still drains.
  EXPECT_TRUE(*schedule({"m"}));
  EXPECT_TRUE(*schedule({"m", "k"}));
}

TEST_F(cold_start_fixture, a_schedule_that_replaces_a_loading_one_waits_for_the_load_under_way_not_a_new_one) {
  auto first = schedule({"k"});
  advance(200ms);
  auto second = schedule({"k", "m"});  // k has 300 ms left; m starts now and needs 300
  advance(299ms);
  EXPECT_FALSE(*first);
  EXPECT_FALSE(*second);
  advance(1ms);
  EXPECT_TRUE(*first);  // the replaced schedule is answered when its successor runs
  EXPECT_TRUE(*second);
  EXPECT_EQ(serve(1, "k"), msg::status::ok);
  EXPECT_EQ(serve(2, "m"), msg::status::ok);
}

TEST_F(cold_start_fixture, a_schedule_without_the_loading_model_runs_at_once_and_the_load_is_abandoned) {
  auto first = schedule({"k"});
  advance(400ms);
  auto none = schedule({});
  EXPECT_TRUE(*none);
  EXPECT_TRUE(*first);
  auto again = schedule({"k"});  // the abandoned load starts over
  advance(499ms);
  EXPECT_FALSE(*again);
  advance(1ms);
  EXPECT_TRUE(*again);
}

}  // namespace
}  // namespace sloserve

namespace sloserve {
namespace {

// A pipelined executor (depth 2) that logs what the device asks of it. A batch's requests are
// named by the first float of their input.
class pipelined_executor final : public device_executor {
 public:
  explicit pipelined_executor(std::shared_ptr<std::vector<std::string>> log) : log_(std::move(log)) {}
  device_kind kind() const override { return device_kind::cuda; }  // pipelines two batches as cuda devices do
  int depth() const override { return 2; }
  batch_outcome execute(const model_spec& m, const std::vector<const std::vector<tensor>*>& inputs) override {
    batch_outcome out;
    for (size_t i = 0; i < inputs.size(); ++i) out.outputs.push_back({make_tensor(m.output, 7, "output")});
    return out;
  }
  std::optional<batch_outcome> start(const model_spec& m,
                                     const std::vector<const std::vector<tensor>*>& inputs) override {
    std::string names;
    for (auto* in : inputs) {
      float v;
      std::memcpy(&v, (*in)[0].data.data(), 4);
      names += (names.empty() ? "" : ",") + std::to_string(static_cast<int>(v));
    }
    log_->push_back("start " + names);
    started_.push_back(execute(m, inputs));
    return std::nullopt;
  }
  batch_outcome finish() override {
    log_->push_back("finish");
    auto out = std::move(started_.front());
    started_.pop_front();
    return out;
  }

 private:
  std::shared_ptr<std::vector<std::string>> log_;
  std::deque<batch_outcome> started_;
};

// An executor that cannot load model m (a switch it does not fit, a file too large).
class refusing_executor final : public device_executor {
 public:
  explicit refusing_executor(std::shared_ptr<int> tries = std::make_shared<int>()) : tries_(std::move(tries)) {}
  device_kind kind() const override { return device_kind::emulated; }
  status load(const model_spec& m) override {
    if (m.name != "m") return {};
    ++*tries_;
    return fail("model 'm' does not fit this device: it needs 9 stages, the device has 8");
    return {};
  }
  batch_outcome execute(const model_spec& m, const std::vector<const std::vector<tensor>*>& inputs) override {
    batch_outcome out;
    for (size_t i = 0; i < inputs.size(); ++i) out.outputs.push_back({make_tensor(m.output, 7, "output")});
    return out;
  }

 private:
  std::shared_ptr<int> tries_;  // loads of 'm'
};

// An executor that runs each model from the file it last loaded, and cannot load a file named
// broken; it logs its loads and runs.
class file_executor final : public device_executor {
 public:
  explicit file_executor(std::shared_ptr<std::vector<std::string>> log) : log_(std::move(log)) {}
  device_kind kind() const override { return device_kind::emulated; }
  status load(const model_spec& m) override {
    if (m.path.find("broken") != std::string::npos) return fail("cannot load model '" + m.name + "' from " + m.path);
    files_[m.name] = m.path;
    log_->push_back("load " + m.name + " " + m.path);
    return {};
  }
  void unload(const std::string& model) override { files_.erase(model); }
  status reload(const model_spec& m) override {
    auto kept = files_[m.name];
    if (auto s = load(m); !s) {
      files_[m.name] = kept;
      log_->push_back("kept " + m.name + " " + kept);
      return s;
    }
    return {};
  }
  batch_outcome execute(const model_spec& m, const std::vector<const std::vector<tensor>*>& inputs) override {
    log_->push_back("run " + m.name + " " + files_[m.name]);
    batch_outcome out;
    for (size_t i = 0; i < inputs.size(); ++i) out.outputs.push_back({make_tensor(m.output, 7, "output")});
    return out;
  }

 private:
  std::shared_ptr<std::vector<std::string>> log_;
  std::map<std::string, std::string> files_;
};

// An apply that gives a model another file under its name: the device loads it in place and runs
// it from then on; a file that will not load leaves the old one running, and the device's answer
// to the apply says so (the worker passes it on to the controller).
TEST(file_device, an_apply_with_a_new_file_loads_it_in_place_and_a_bad_one_keeps_the_old) {
  caf_fixture f;
  std::vector<std::shared_ptr<const cluster_config>> ran;  // a node keeps every configuration it ran
  auto with_path = [&](const std::string& path) {
    std::string y = yaml;
    auto at = y.find("max_batch: 4, profile: {batch: [1, 2, 4], latency_ms: [10, 12, 16]}");
    y.insert(at, "path: " + path + ", ");
    auto r = parse_cluster_config(y, "/w/cluster.yaml");
    EXPECT_TRUE(r) << r.error_text();
    return ran.emplace_back(std::make_shared<const cluster_config>(std::move(*r.config)));
  };
  auto net = std::make_shared<recording_link>("w");
  auto log = std::make_shared<std::vector<std::string>>();
  auto dev = f.keep(spawn_device(*f.sys, {with_path("m1.pt"), net, 1}, 0, std::make_unique<file_executor>(log)));
  caf::anon_send(dev, msg::device_schedule{0, 0, {{"m", 1}}});
  f.run();
  auto invoke = [&](uint64_t id) {
    caf::anon_send(dev, msg::invocation{id, "fe", "m", 0, 100'000'000, {make_tensor({dtype::float32, {2}}, id)}});
    f.run();
    f.advance(20ms);
  };
  auto apply = [&](std::shared_ptr<const cluster_config> c) {
    auto said = std::make_shared<std::vector<std::string>>(1, "no answer");
    f.keep(f.sys->spawn([dev, c, said](caf::event_based_actor* self) {
      self->request(dev, caf::infinite, new_config{c, 9}).then([said](std::vector<std::string>& p) { *said = p; });
    }));
    f.run();
    return *said;
  };
  invoke(1);
  EXPECT_EQ(apply(with_path("m2.pt")), std::vector<std::string>{});
  invoke(2);
  auto kept = apply(with_path("broken.pt"));
  ASSERT_EQ(kept.size(), 1u);
  EXPECT_EQ(kept[0], "device 0 kept /w/m2.pt for model 'm': cannot load model 'm' from /w/broken.pt");
  invoke(3);
  // Another bad file: the word names the file it still runs, not the one that failed before;
  // back to that file: nothing to load.
  kept = apply(with_path("broken2.pt"));
  ASSERT_EQ(kept.size(), 1u);
  EXPECT_EQ(kept[0], "device 0 kept /w/m2.pt for model 'm': cannot load model 'm' from /w/broken2.pt");
  EXPECT_EQ(apply(with_path("m2.pt")), std::vector<std::string>{});
  invoke(4);
  EXPECT_EQ(*log, (std::vector<std::string>{"load m /w/m1.pt", "run m /w/m1.pt", "load m /w/m2.pt", "run m /w/m2.pt",
                                            "kept m /w/m2.pt", "run m /w/m2.pt", "kept m /w/m2.pt", "run m /w/m2.pt"}));
  auto results = net->take<msg::invocation_result>();
  ASSERT_EQ(results.size(), 4u);
  for (auto& [node, r] : results) EXPECT_EQ(r.code, msg::status::ok) << r.reason;
}

// A model the schedule asks for that will not load is not served, the schedule's answer says so,
// and requests that reach it anyway are answered with why it would not load; the others are served.
TEST(refusing_device, a_model_that_would_not_load_answers_why) {
  caf_fixture f;
  auto cfg = testing::parse_or_die(yaml);
  auto net = std::make_shared<recording_link>("w");
  auto tries = std::make_shared<int>(0);
  auto dev = f.keep(spawn_device(*f.sys, {cfg, net, 1}, 0, std::make_unique<refusing_executor>(tries)));
  auto failed = std::make_shared<std::vector<msg::unloaded_model>>();
  auto schedule = [&](std::vector<msg::session_schedule> sessions) {
    f.keep(f.sys->spawn([dev, failed, sessions](caf::event_based_actor* self) {
      self->request(dev, caf::infinite, msg::device_schedule{0, 0, sessions})
          .then([failed](std::vector<msg::unloaded_model>& f) { *failed = f; });
    }));
    f.run();
  };
  schedule({{"m", 2}, {"n", 2}});
  EXPECT_EQ(*tries, 1);
  schedule({{"n", 2}, {"m", 4}});  // the same models again: not tried again, the same answer
  EXPECT_EQ(*tries, 1);
  // The schedule's answer names what would not load, and why: the worker reports it.
  ASSERT_EQ(failed->size(), 1u);
  EXPECT_EQ((*failed)[0].node, "w");
  EXPECT_EQ((*failed)[0].device, 0u);
  EXPECT_EQ((*failed)[0].model, "m");
  EXPECT_EQ((*failed)[0].reason, "model 'm' does not fit this device: it needs 9 stages, the device has 8");
  schedule({{"m", 2}});  // another schedule: tried again
  EXPECT_EQ(*tries, 2);
  schedule({{"m", 2}, {"n", 2}});
  caf::anon_send(dev, msg::invocation{1, "fe", "m", 0, 100'000'000, {make_tensor({dtype::float32, {2}}, 1)}});
  caf::anon_send(dev, msg::invocation{2, "fe", "n", 0, 100'000'000, {make_tensor({dtype::float32, {2}}, 2)}});
  f.run();
  f.advance(20ms);
  auto results = net->take<msg::invocation_result>();
  ASSERT_EQ(results.size(), 2u);
  for (auto& [node, r] : results) {
    if (r.id == 1) {
      EXPECT_EQ(r.code, msg::status::error);
      EXPECT_EQ(r.reason,
                "model 'm' could not load on device 0 of w: model 'm' does not fit this device: it needs 9 stages, "
                "the device has 8");
    } else {
      EXPECT_EQ(r.code, msg::status::ok) << r.reason;
    }
  }
}

// On a pipelined executor a full batch is staged while the one before runs, a partial one waits
// for the device, and every request gets one answer.
TEST(pipelined_device, stages_the_next_full_batch_while_one_runs) {
  caf_fixture f;
  auto cfg = testing::parse_or_die(yaml);
  auto net = std::make_shared<recording_link>("w");
  auto log = std::make_shared<std::vector<std::string>>();
  auto dev = f.keep(spawn_device(*f.sys, {cfg, net, 1}, 0, std::make_unique<pipelined_executor>(log)));
  caf::anon_send(dev, msg::device_schedule{0, 0, {{"m", 2}}});
  f.run();
  for (uint64_t id = 1; id <= 5; ++id) {  // all in the mailbox before the device reads any
    tensor in = make_tensor({dtype::float32, {2}}, id);
    float v = static_cast<float>(id);
    std::string data = in.data.str();
    std::memcpy(data.data(), &v, 4);
    in.data = std::move(data);
    caf::anon_send(dev, msg::invocation{id, "fe", "m", 0, std::chrono::nanoseconds(1s).count(), {in}});
  }
  f.run();
  EXPECT_EQ(*log, (std::vector<std::string>{"start 1", "start 2,3", "finish", "start 4,5", "finish", "finish"}));
  auto results = net->take<msg::invocation_result>();
  ASSERT_EQ(results.size(), 5u);
  for (size_t i = 0; i < results.size(); ++i) {
    EXPECT_EQ(results[i].second.id, i + 1);
    EXPECT_EQ(results[i].second.code, msg::status::ok) << results[i].second.reason;
  }
}

}  // namespace
}  // namespace sloserve

namespace sloserve {
namespace {

// Make before break on one device: an apply that drops model m leaves m's session draining; what
// was queued on it runs and is answered, and the session goes only once idle.
TEST_F(device_fixture, an_apply_that_drops_a_model_answers_everything_queued_on_it) {
  invoke(1, 200ms);  // runs at once
  invoke(2, 200ms);
  invoke(3, 200ms);  // queued behind it
  auto without_m = testing::parse_or_die(R"(
nodes:
  - {name: fe, address: tcp://127.0.0.1:0, roles: [controller, frontend]}
  - {name: w, address: tcp://127.0.0.1:0, roles: [worker], devices: [{kind: emulated}]}
models:
  - {name: n, input: {dtype: float32, shape: [2]}, output: {dtype: float32, shape: [1]}, max_batch: 4, profile: {batch: [1, 2, 4], latency_ms: [5, 6, 8]}}
runtime: {max_queue_length: 3}
)");
  caf::anon_send(dev, new_config{without_m});
  caf::anon_send(dev, msg::device_schedule{0, 0, {{"n", 4}}});
  run();
  invoke(4, 200ms);  // a frontend whose table still routes m here
  advance(10ms);
  advance(12ms);
  advance(12ms);
  auto r = results();
  ASSERT_EQ(r.size(), 4u);
  for (auto& x : r) EXPECT_EQ(x.code, msg::status::ok) << x.id << ": " << x.reason;
  auto sessions = [&] {
    caf::scoped_actor self{*sys};
    device_load load;
    self->send(dev, stats_atom::value);
    run();
    self->receive([&](device_load& l) { load = std::move(l); }, caf::after(0s) >> [] {});
    std::set<std::string> names;
    for (auto& s : load.sessions) names.insert(s.model);
    return names;
  };
  EXPECT_EQ(sessions(), (std::set<std::string>{"m", "n"})) << "drained, not yet idle long enough";
  advance(2s);
  EXPECT_EQ(sessions(), (std::set<std::string>{"n"})) << "idle: gone, and the model unloaded";
  invoke(5, 200ms);
  r = results();
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].code, msg::status::error) << "m runs here no more";
}

}  // namespace
}  // namespace sloserve
