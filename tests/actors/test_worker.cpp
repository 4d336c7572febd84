// The worker on the deterministic scheduler, over emulated devices and a recording link: it
// registers and reports load every beacon, acknowledges a schedule only once its devices have
// loaded what it brings, asks to leave when told to, and the node hands invocations straight to
// their device (an invocation for a device it lacks is answered ERROR with the reason).

#include <gtest/gtest.h>

#include "actors/roles.hpp"
#include "caf_fixture.hpp"

namespace sloserve {
namespace {

using namespace std::chrono_literals;
using testing::caf_fixture;
using testing::recording_link;

const char* yaml = R"(
nodes:
  - {name: ctl, address: tcp://127.0.0.1:0, roles: [controller, frontend]}
  - {name: w, address: tcp://127.0.0.1:0, roles: [worker], devices: [{kind: emulated, count: 2}]}
models:
  - {name: m, input: {dtype: float32, shape: [2]}, output: {dtype: float32, shape: [3]}, max_batch: 4,
     profile: {batch: [1, 2, 4], latency_ms: [10, 12, 16]}, load_ms: 500}
runtime: {beacon_ms: 1000}
)";

struct worker_fixture : caf_fixture, ::testing::Test {
  worker_fixture() {
    cfg_ = testing::parse_or_die(yaml);
    net = std::make_shared<recording_link>("w");
    actor_args args{cfg_, net, 42};
    net->actors.devices = spawn_devices(*sys, args);
    for (auto& d : net->actors.devices) keep(d);
    net->actors.worker = keep(spawn_worker(*sys, args, net->actors.devices));
    caf::anon_send(net->actors.worker, start_atom::value);
    run();
  }
  // The registrations sent to the controller since the last call.
  std::vector<msg::register_node> registrations() {
    std::vector<msg::register_node> out;
    for (auto& [to, r] : net->take<msg::register_node>()) {
      EXPECT_EQ(to, "ctl");
      out.push_back(r);
    }
    return out;
  }
  void invoke(uint64_t id, uint32_t device) {
    msg::invocation inv{
        id, "ctl", "m", device, std::chrono::nanoseconds(100ms).count(), {make_tensor({dtype::float32, {2}}, id)}};
    dispatch(*net, {{"ctl"}, std::move(inv)}, {});
    run();
  }
  std::shared_ptr<const cluster_config> cfg_;
  std::shared_ptr<recording_link> net;
};

TEST_F(worker_fixture, registers_at_start_and_again_with_a_load_report_every_beacon) {
  auto regs = registrations();
  ASSERT_EQ(regs.size(), 1u);
  EXPECT_EQ(regs[0].node, "w");
  EXPECT_EQ(regs[0].roles, std::vector<std::string>{"worker"});
  EXPECT_EQ(regs[0].devices, 2u);
  EXPECT_EQ(regs[0].incarnation, 42u);
  EXPECT_EQ(regs[0].schedule_epoch, 0u) << "no schedule yet";
  EXPECT_TRUE(net->take<msg::load_report>().empty());
  advance(1s);
  EXPECT_EQ(registrations().size(), 1u);
  auto reports = net->take<msg::load_report>();
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_EQ(reports[0].second.node, "w");
  EXPECT_NEAR(reports[0].second.window_s, 1.0, 1e-9);
}

TEST_F(worker_fixture, acknowledges_a_schedule_once_its_devices_have_loaded_the_models) {
  registrations();
  caf::anon_send(net->actors.worker, msg::schedule{7, {{0, 0, {{"m", 4}}}, {1, 0, {}}}});
  run();
  EXPECT_TRUE(registrations().empty()) << "device 0 is still loading m (500 ms)";
  advance(499ms);
  EXPECT_TRUE(registrations().empty());
  advance(1ms);
  auto regs = registrations();
  ASSERT_EQ(regs.size(), 1u);
  EXPECT_EQ(regs[0].schedule_epoch, 7u);
  // Load reports now list the session device 0 runs.
  advance(500ms);
  auto reports = net->take<msg::load_report>();
  ASSERT_EQ(reports.size(), 1u);
  ASSERT_EQ(reports[0].second.sessions.size(), 1u);
  EXPECT_EQ(reports[0].second.sessions[0].model, "m");
  EXPECT_EQ(reports[0].second.sessions[0].device, 0u);
}

TEST_F(worker_fixture, a_schedule_for_devices_it_lacks_is_acknowledged_for_those_it_has) {
  registrations();
  caf::anon_send(net->actors.worker, msg::schedule{3, {{5, 0, {{"m", 4}}}}});
  run();
  auto regs = registrations();
  ASSERT_EQ(regs.size(), 1u);
  EXPECT_EQ(regs[0].schedule_epoch, 3u);
}

// An apply reaches the node: the worker hands it to both devices and, once both have answered,
// tells the controller once that it runs the revision.
TEST_F(worker_fixture, acknowledges_an_apply_once_every_device_has_answered) {
  net->config = std::make_shared<config_source>(cfg_);
  std::string next = yaml;
  next.replace(next.find("latency_ms: [10, 12, 16]"), 24, "latency_ms: [10, 12, 18]");
  dispatch(*net, {"ctl", msg::config_update{77, next, "next.yaml"}}, {});
  run();
  auto acks = net->take<msg::config_ack>();
  ASSERT_EQ(acks.size(), 1u);
  EXPECT_EQ(acks[0].first, "ctl");
  EXPECT_EQ(acks[0].second.revision, 77u);
  EXPECT_EQ(acks[0].second.node, "w");
  EXPECT_TRUE(acks[0].second.problems.empty());
  // One the node refuses (a node dropped) is acknowledged at once, with the reason.
  std::string dropped = next;
  dropped.erase(dropped.find("  - {name: w,"), dropped.find("models:") - dropped.find("  - {name: w,"));
  dispatch(*net, {"ctl", msg::config_update{78, dropped, "bad.yaml"}}, {});
  run();
  acks = net->take<msg::config_ack>();
  ASSERT_EQ(acks.size(), 1u);
  ASSERT_EQ(acks[0].second.problems.size(), 1u);
  EXPECT_EQ(acks[0].second.problems[0].substr(0, 11), "refused it:") << acks[0].second.problems[0];
}

TEST_F(worker_fixture, asks_to_leave_in_every_registration_once_told_to) {
  registrations();
  caf::anon_send(net->actors.worker, leave_atom::value);
  run();
  auto regs = registrations();
  ASSERT_EQ(regs.size(), 1u);
  EXPECT_TRUE(regs[0].leaving);
  advance(1s);
  regs = registrations();
  ASSERT_EQ(regs.size(), 1u);
  EXPECT_TRUE(regs[0].leaving);
}

TEST_F(worker_fixture, invocations_go_straight_to_their_device_and_one_for_a_missing_device_fails) {
  caf::anon_send(net->actors.worker, msg::schedule{7, {{0, 0, {}}, {1, 0, {{"m", 4}}}}});
  run();
  advance(500ms);
  invoke(1, 1);
  advance(10ms);
  invoke(2, 9);
  auto results = net->take<msg::invocation_result>();
  ASSERT_EQ(results.size(), 2u);
  EXPECT_EQ(results[0].first, "ctl");
  EXPECT_EQ(results[0].second.id, 1u);
  EXPECT_EQ(results[0].second.code, msg::status::ok) << results[0].second.reason;
  EXPECT_EQ(results[0].second.device, 1u);
  EXPECT_EQ(results[1].second.id, 2u);
  EXPECT_EQ(results[1].second.code, msg::status::error);
  EXPECT_NE(results[1].second.reason.find("has no device 9"), std::string::npos) << results[1].second.reason;
}

}  // namespace
}  // namespace sloserve
