// The frontend's CAF-free parts alone: its routes (readiness, liveness, outstanding work, stage
// deadlines) and its account of clients' clocks and network time.

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "actors/client_registry.hpp"
#include "actors/client_time.hpp"
#include "actors/dummy_padding.hpp"
#include "actors/frontend_routes.hpp"
#include "actors/frontend_state.hpp"
#include "actors/kserve_call.hpp"
#include "actors/route_publisher.hpp"
#include "caf_fixture.hpp"
#include "scheduling/balancer.hpp"

namespace sloserve {
namespace {

using namespace std::chrono_literals;

const char* yaml = R"(
nodes:
  - {name: fe, address: tcp://127.0.0.1:0, roles: [controller, frontend]}
  - {name: w1, address: tcp://127.0.0.1:0, roles: [worker], devices: [{kind: emulated}]}
  - {name: w2, address: tcp://127.0.0.1:0, roles: [worker], devices: [{kind: emulated}]}
models:
  - {name: m, input: {dtype: float32, shape: [2]}, output: {dtype: float32, shape: [2]}, profile: {alpha_ms: 1, beta_ms: 1}}
pipelines:
  - {name: p, slo_ms: 100, stages: [{name: a, model: m}, {name: b, model: m, after: [a]}]}
)";

msg::routing_table table(std::vector<msg::route_instance> instances, bool budgets = true) {
  msg::routing_table t;
  t.epoch = 5;
  t.routes = {{"m", std::move(instances)}};
  if (budgets) t.budgets = {{"p", "a", 30}, {"p", "b", 70}};
  return t;
}

// Dummies at 2.5/s come evenly, progress survives a table that keeps the instance, a stall counts
// as one second at most, and instances of models no stage runs get none.
TEST(dummy_padding, spaces_an_instances_share_and_carries_progress_across_tables) {
  msg::routing_table t;
  t.routes = {{"a", {{"w", 0, 1, 5}, {"w", 1, 1, 0}}}, {"orphan", {{"w", 2, 1, 5}}}};
  t.budgets = {{"p", "s", 80, "a"}, {"q", "s", 30, "a"}};
  t.frontends = 2;
  dummy_padding pad;
  pad.apply(t);
  EXPECT_DOUBLE_EQ(pad.rate(), 2.5);
  EXPECT_TRUE(pad.due(10).empty()) << "the first call starts the clock";
  EXPECT_TRUE(pad.due(10.3).empty());
  auto d = pad.due(10.5);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].model, "a");
  EXPECT_EQ(d[0].node, "w");
  EXPECT_EQ(d[0].device, 0u);
  EXPECT_DOUBLE_EQ(d[0].budget_ms, 30) << "the tightest stage that runs it";
  EXPECT_TRUE(pad.due(10.7).empty());
  pad.apply(t);                         // 0.75 of the next one owed, kept
  EXPECT_EQ(pad.due(11.0).size(), 1u);  // 0.75 + 0.75
  EXPECT_EQ(pad.due(30.0).size(), 3u);  // a stall of 19 s counts as 1 s: 0.5 + 2.5
  EXPECT_TRUE(pad.due(30.2).empty());
  EXPECT_EQ(pad.due(30.7).size(), 1u);
  t.routes[0].instances[0].dummy_rate = 0;
  pad.apply(t);
  EXPECT_TRUE(pad.due(40).empty());
  EXPECT_DOUBLE_EQ(pad.rate(), 0);
}

TEST(frontend_routes, say_why_a_pipeline_cannot_be_served_until_it_can) {
  auto cfg = testing::parse_or_die(yaml);
  frontend_routes r(*cfg, sched::make_balancer(balancer_kind::p2c));
  EXPECT_EQ(r.blocker(0), "no routing table from the controller yet");
  r.apply(table({}, false));
  EXPECT_EQ(r.blocker(0), "no stage budgets for pipeline 'p'");
  EXPECT_EQ(r.split(0), nullptr);
  r.apply(table({}));
  EXPECT_EQ(r.blocker(0), "no live instance serves model 'm'");
  r.apply(table({{"w1", 0, 1}}));
  EXPECT_EQ(r.blocker(0), "") << "served: w1 is live until it goes down";
  // Ready only once w1 is heard both ways (the node agent's peer_up), or runs on this node.
  EXPECT_EQ(r.readiness("fe"), "model 'm' runs only on nodes not heard both ways yet");
  EXPECT_EQ(r.readiness("w1"), "");
  EXPECT_FALSE(r.set_live("w1", true)) << "live already: nothing changes but that it is heard";
  EXPECT_EQ(r.readiness("fe"), "");
  EXPECT_EQ(r.readiness("fe", 0), "");
  EXPECT_EQ(r.epoch(), 5u);
  ASSERT_NE(r.split(0), nullptr);
  EXPECT_DOUBLE_EQ(r.split(0)->finish_offset_ms[1], 100) << "b finishes by 30 + 70 ms";
  EXPECT_TRUE(r.set_live("w1", false));
  EXPECT_FALSE(r.set_live("w1", false)) << "already down";
  EXPECT_EQ(r.blocker(0), "no live instance serves model 'm'");
  EXPECT_EQ(r.readiness("fe"), "no live instance serves model 'm'");
  EXPECT_TRUE(r.set_live("w1", true));
  EXPECT_EQ(r.readiness("fe"), "");
  // No instance because the only one could not load the model: the reason comes with it.
  frontend_routes fresh(*cfg, sched::make_balancer(balancer_kind::p2c));
  auto t = table({});
  t.unloaded = {{"w2", 0, "m", "cannot load model 'm' from /x/m.pt"}};
  fresh.apply(t);
  EXPECT_EQ(fresh.readiness("fe"),
            "no live instance serves model 'm': it could not load on device 0 of node 'w2': cannot load model 'm' "
            "from /x/m.pt");
}

// A table's quota (a plan short of devices, by priority): this frontend admits its share of the
// rate the plan carries (as its share of the load offered), a fifth of a second of it at once, and
// answers the rest with the reason;
// a table without quotas sheds nothing.
TEST(frontend_routes, a_quota_admits_this_frontends_share_of_what_the_plan_carries) {
  auto cfg = testing::parse_or_die(yaml);
  frontend_routes r(*cfg, sched::make_balancer(balancer_kind::p2c));
  auto t = table({{"w1", 0, 1}});
  t.frontends = 2;
  t.quotas = {{"p", 40, 200, 0}};  // 40/s of 200 for the cluster: 20/s here, where half the 200 come
  r.apply(t);
  int admitted = 0;
  std::string why;
  for (int i = 0; i < 500; ++i) {  // 100/s for five seconds
    auto w = r.admit(0, -1, 10 + i * 0.01).why;
    if (w.empty())
      ++admitted;
    else
      why = w;
  }
  EXPECT_NEAR(admitted, 5 * 20, 5);  // the rate (the first burst is as small as the share measured then)
  EXPECT_EQ(why,
            "shed for priority: the cluster is short of devices and carries 40.0 of the 200.0 queries/s sent to "
            "pipeline 'p' (priority 0), pipelines of higher priority first");
  t.quotas.clear();
  r.apply(t);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(r.admit(0, -1, 16 + i * 0.001).why, "");
}

TEST(frontend_routes, pick_live_instances_and_keep_outstanding_work_across_tables) {
  auto cfg = testing::parse_or_die(yaml);
  frontend_routes r(*cfg, sched::make_balancer(balancer_kind::p2c));
  r.apply(table({{"w1", 0, 1}, {"w2", 0, 1}}));
  std::mt19937_64 rng(1);
  r.set_live("w2", false);
  for (int i = 0; i < 10; ++i) {
    auto b = r.pick("m", rng);
    ASSERT_TRUE(b);
    EXPECT_EQ(b->node, "w1") << "w2 is down";
  }
  EXPECT_FALSE(r.pick("unknown", rng));
  r.set_live("w2", true);
  // w1 carries 10 outstanding invocations into the next table: p2c now prefers w2.
  r.apply(table({{"w1", 0, 1}, {"w2", 0, 1}}));
  for (int i = 0; i < 5; ++i) EXPECT_EQ(r.pick("m", rng)->node, "w2");
  for (int i = 0; i < 10; ++i) r.release("m", "w1", 0);
  r.release("m", "w1", 0);  // more releases than picks leave it at zero
  r.set_live("w2", false);
  r.set_live("w1", false);
  EXPECT_FALSE(r.pick("m", rng)) << "nothing live";
}

// Whole batches in turn (routing_table instances with a batch, as Piccolo's whole_batches sends):
// each instance takes its batch in a row; while a batch is open the stream owes it dummies at the
// table's dummy rate, which close it once they and the requests make it, and count as
// outstanding; a table that keeps the instances at their batches keeps the turn.
TEST(frontend_routes, whole_batches_go_in_turn_and_dummies_close_them) {
  auto cfg = testing::parse_or_die(yaml);
  frontend_routes r(*cfg, std::make_unique<sched::fill_balancer>());
  // Batches of 3, each instance planned 2 requests/s and 4 dummies/s: the stream owes 8 dummies/s.
  auto t = table({{"w1", 0, 2, 4, 0, false, 3, 100}, {"w2", 0, 2, 4, 0, false, 3, 100}});
  r.apply(t);
  EXPECT_TRUE(r.in_turn("m"));
  std::mt19937_64 rng(1);
  std::string order;
  auto send = [&](double at) {
    r.set_clock(at);
    order += r.pick("m", rng)->node;
    for (auto& d : r.padding_due("m", rng)) order += "+" + d.node;
    order += " ";
  };
  for (double at : {0.0, 0.13, 0.14, 0.27}) send(at);
  EXPECT_EQ(order, "w1 w1+w1 w2 w2+w2 ") << "a batch open 0.13 s is owed a dummy: it closes with two requests";
  r.apply(t);  // the same instances at the same batches: the turn goes on
  r.set_clock(0.3);
  EXPECT_EQ(r.pick("m", rng)->node, "w1");
  EXPECT_TRUE(r.padding_due("m", rng).empty()) << "less than the two dummies it lacks are owed";
  // Outstanding counts the dummies: released on their replies. w1's first batch is done, w2's is
  // not when its second fills: the stream is ahead of the machines, so the next batch's dummies
  // are forgiven and requests fill it.
  for (int i = 0; i < 3; ++i) r.release("m", "w1", 0);
  order.clear();
  for (double at : {0.43, 0.44, 0.57, 0.58, 0.71, 0.72}) send(at);
  EXPECT_EQ(order, "w1+w1 w2 w2+w2 w1 w1 w1 ");
  // Without batches the model is not in turn: its dummies go where the table pads, on the clock.
  r.apply(table({{"w1", 0, 3, 1}}));
  EXPECT_FALSE(r.in_turn("m"));
  r.pick("m", rng);
  EXPECT_TRUE(r.padding_due("m", rng).empty());
}

// A worker that comes back may reach the controller before the frontend hears it: a table that
// moves a model onto it alone keeps the model's instances before as stand-ins until it is live.
TEST(frontend_routes, a_model_moved_to_a_node_not_heard_yet_keeps_its_old_instances_until_then) {
  auto cfg = testing::parse_or_die(yaml);
  frontend_routes r(*cfg, sched::make_balancer(balancer_kind::p2c));
  r.set_live("w2", false);
  r.apply(table({{"w1", 0, 1}}));
  r.apply(table({{"w2", 0, 1}}));
  EXPECT_EQ(r.blocker(0), "");
  std::mt19937_64 rng(3);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(r.pick("m", rng)->node, "w1");
  EXPECT_TRUE(r.set_live("w2", true));
  for (int i = 0; i < 5; ++i) EXPECT_EQ(r.pick("m", rng)->node, "w2") << "the stand-in is gone";
  // A table with no instance at all for a model (one a controller made while it heard only part
  // of the cluster) keeps the live one as a stand-in, until it is down too.
  r.apply(table({}));
  EXPECT_EQ(r.blocker(0), "");
  for (int i = 0; i < 3; ++i) EXPECT_EQ(r.pick("m", rng)->node, "w2");
  EXPECT_TRUE(r.set_live("w2", false));
  EXPECT_EQ(r.blocker(0), "no live instance serves model 'm'");
}

const char* variants_yaml = R"(
nodes:
  - {name: fe, address: tcp://127.0.0.1:0, roles: [controller, frontend]}
  - {name: w1, address: tcp://127.0.0.1:0, roles: [worker], devices: [{kind: emulated, count: 2}]}
models:
  - {name: small, input: {dtype: float32, shape: [2]}, output: {dtype: float32, shape: [2]}, profile: {alpha_ms: 1, beta_ms: 1},
     accuracy: 60}
  - {name: big, input: {dtype: float32, shape: [2]}, output: {dtype: float32, shape: [2]}, profile: {alpha_ms: 2, beta_ms: 2},
     accuracy: 70}
  - {name: m, input: {dtype: float32, shape: [2]}, output: {dtype: float32, shape: [2]}, profile: {alpha_ms: 1, beta_ms: 1}}
pipelines:
  - {name: p, slo_ms: 100, stages: [{name: a, variants: [small, big]}, {name: b, model: m, after: [a]}]}
)";

TEST(frontend_routes, a_stage_runs_the_variant_the_table_names) {
  auto cfg = testing::parse_or_die(variants_yaml);
  frontend_routes r(*cfg, sched::make_balancer(balancer_kind::p2c));
  EXPECT_EQ(r.stage_model(0, 0), "big") << "the most accurate, before any table";
  msg::routing_table t;
  t.epoch = 2;
  t.routes = {{"small", {{"w1", 0, 1}}}, {"m", {{"w1", 1, 1}}}};
  t.budgets = {{"p", "a", 40, "small"}, {"p", "b", 60, "m"}};
  r.apply(t);
  EXPECT_EQ(r.stage_model(0, 0), "small");
  EXPECT_EQ(r.blocker(0), "");
  // A table naming a model that is no variant of the stage leaves it on the one the file names.
  t.budgets[0].model = "m";
  r.apply(t);
  EXPECT_EQ(r.stage_model(0, 0), "big");
  EXPECT_EQ(r.blocker(0), "no live instance serves model 'big'");
}

// w1 runs `variant` on `device` and m on device 1 (schedule epoch `epoch`); stage a of p has
// budget `a_ms` on `variant`, stage b the rest of 100 ms on m.
cluster_placement variant_placement(const std::string& variant, uint32_t device, uint64_t epoch, double a_ms) {
  cluster_placement p;
  p.schedules["w1"] = {epoch, {{device, 0, {{variant, 1}}}, {1, 0, {{"m", 1}}}}};
  p.table.routes = {{"small", {}}, {"big", {}}, {"m", {{"w1", 1, 1}}}};
  for (auto& r : p.table.routes)
    if (r.model == variant) r.instances = {{"w1", device, 1}};
  p.table.budgets = {{"p", "a", a_ms, variant}, {"p", "b", 100 - a_ms, "m"}};
  return p;
}

// The controller's side of a variant switch: the table keeps the pipeline on its old variants
// and budgets until the new variant's instance is acknowledged by its worker.
TEST(route_publisher, holds_a_variant_switch_until_the_new_variant_may_take_traffic) {
  auto cfg = testing::parse_or_die(variants_yaml);
  worker_registry w(0);
  w.on_register("w1", 1, 1);
  auto placement = [](const std::string& variant, uint32_t device, uint64_t epoch) {
    return variant_placement(variant, device, epoch, variant == "big" ? 60 : 30);
  };
  route_publisher pub;
  auto first = placement("big", 0, 1);
  pub.adopt(first);
  EXPECT_EQ(pub.publish(first, w, 1).budgets[0].model, "big");
  auto next = placement("small", 0, 2);
  pub.adopt(next);
  auto& held = pub.publish(next, w, 2);
  ASSERT_EQ(held.budgets.size(), 2u);
  for (auto& b : held.budgets) EXPECT_EQ(b.model, b.stage == "a" ? "big" : "m");
  for (auto& b : held.budgets) EXPECT_DOUBLE_EQ(b.budget_ms, b.stage == "a" ? 60 : 40) << "the old budgets, together";
  bool big_routed = false;
  for (auto& route : held.routes) big_routed |= route.model == "big" && route.instances.size() == 1;
  EXPECT_TRUE(big_routed) << "the old variant's instance drains and serves meanwhile";
  // The worker acknowledges epoch 2: small has loaded.
  w.on_register("w1", 1, 2);
  auto& switched = pub.publish(next, w, 3);
  for (auto& b : switched.budgets) EXPECT_EQ(b.model, b.stage == "a" ? "small" : "m");
  EXPECT_DOUBLE_EQ(switched.budgets[0].budget_ms, 30);
}

// A variant the placement stopped running leaves routing: a later switch back to it waits for its
// new instance instead of reaching devices that no longer hold it.
TEST(route_publisher, a_model_placed_nowhere_keeps_no_stale_instances) {
  auto cfg = testing::parse_or_die(variants_yaml);
  worker_registry w(0);
  w.on_register("w1", 1, 1);
  auto placement = [](const std::string& variant, uint32_t device, uint64_t epoch) {
    return variant_placement(variant, device, epoch, 50);
  };
  route_publisher pub;
  auto first = placement("big", 0, 1);
  pub.adopt(first);
  pub.publish(first, w, 1);
  w.on_register("w1", 1, 2);
  auto second = placement("small", 0, 2);  // big is placed nowhere now
  pub.adopt(second);
  for (auto& r : pub.publish(second, w, 2).routes) {
    if (r.model == "big") {
      EXPECT_TRUE(r.instances.empty()) << "no stale instance of big";
    }
  }
  // Back to big on device 0 again, not acknowledged yet: the pipeline stays on small.
  auto third = placement("big", 0, 3);
  pub.adopt(third);
  auto& held = pub.publish(third, w, 3);
  for (auto& b : held.budgets) EXPECT_EQ(b.model, b.stage == "a" ? "small" : "m");
}

// An instance whose device could not load its model is not routed, and the table says why, so
// that a frontend can; the model stays off that worker's plan (`unloadable`) until the worker
// restarts or an apply, though it no longer fails there once planned elsewhere.
TEST(route_publisher, an_instance_that_could_not_load_its_model_is_not_routed_and_the_table_says_why) {
  worker_registry w(0);
  w.on_register("w1", 1, 1);
  w.on_register("w2", 1, 1);
  cluster_placement p;
  p.schedules["w1"] = {1, {{0, 0, {{"m", 1}}}}};
  p.schedules["w2"] = {1, {{0, 0, {{"m", 1}}}}};
  p.table.routes = {{"m", {{"w1", 0, 1}, {"w2", 0, 1}}}};
  route_publisher pub;
  pub.adopt(p);
  EXPECT_EQ(pub.publish(p, w, 1).routes[0].instances.size(), 2u);
  auto fresh = w.set_unloaded("w2", {{0, "m", "cannot load model 'm' from /x/m.pt"}});
  ASSERT_EQ(fresh.size(), 1u);
  EXPECT_TRUE(w.set_unloaded("w2", {{0, "m", "cannot load model 'm' from /x/m.pt"}}).empty()) << "said once";
  auto& t = pub.publish(p, w, 2);
  ASSERT_EQ(t.routes[0].instances.size(), 1u);
  EXPECT_EQ(t.routes[0].instances[0].node, "w1");
  ASSERT_EQ(t.unloaded.size(), 1u);
  EXPECT_EQ(t.unloaded[0].node, "w2");
  EXPECT_EQ(t.unloaded[0].reason, "cannot load model 'm' from /x/m.pt");
  EXPECT_EQ(w.unloadable(), (std::map<std::string, std::vector<std::string>>{{"w2", {"m"}}}));
  // Planned elsewhere, it no longer fails there; it stays off w2's plan all the same.
  w.set_unloaded("w2", {});
  EXPECT_TRUE(pub.publish(p, w, 3).unloaded.empty());
  EXPECT_EQ(w.unloadable().size(), 1u);
  w.on_register("w2", 1, 3);
  EXPECT_EQ(w.unloadable().size(), 1u) << "the same incarnation";
  w.on_register("w2", 2, 3);
  EXPECT_TRUE(w.unloadable().empty()) << "a restart tries again";
  w.set_unloaded("w2", {{0, "m", "again"}});
  w.forget_unloadable();
  EXPECT_TRUE(w.unloadable().empty()) << "an apply tries again";
  EXPECT_TRUE(w.unloaded("w2", 0, "m")) << "while it still fails there";
}

// A client Jellyfish moves to a variant its device has not loaded yet stays on the instance it was
// published with (the device keeps the old variant resident), which stays routed meanwhile.
TEST(route_publisher, a_client_moves_to_its_new_instance_once_it_may_take_traffic) {
  auto cfg = testing::parse_or_die(variants_yaml);
  worker_registry w(0);
  w.on_register("w1", 1, 1);
  auto placement = [](const std::string& variant, uint64_t epoch) {
    auto p = variant_placement(variant, 0, epoch, 50);
    if (variant == "small") p.schedules["w1"].devices[0].sessions = {{"small", 1}, {"big", 1}};  // big stays resident
    p.table.clients = {{"cam", "p", variant, "w1", 0, 80, variant == "big" ? 320u : 160u, 320u}};
    return p;
  };
  route_publisher pub;
  auto first = placement("big", 1);
  pub.adopt(first);
  ASSERT_EQ(pub.publish(first, w, 1).clients.size(), 1u);
  auto next = placement("small", 2);
  pub.adopt(next);
  auto& held = pub.publish(next, w, 2);
  ASSERT_EQ(held.clients.size(), 1u);
  EXPECT_EQ(held.clients[0].model, "big") << "small is not acknowledged yet";
  EXPECT_EQ(held.clients[0].input_height, 320u);
  bool big_routed = false;
  for (auto& r : held.routes) big_routed |= r.model == "big" && r.instances.size() == 1;
  EXPECT_TRUE(big_routed);
  w.on_register("w1", 1, 2);
  auto& moved = pub.publish(next, w, 3);
  ASSERT_EQ(moved.clients.size(), 1u);
  EXPECT_EQ(moved.clients[0].model, "small");
  // A route to a variant its device does not hold is no route, and the old one is gone with it.
  auto gone = variant_placement("big", 0, 4, 50);
  gone.table.clients = {{"cam", "p", "small", "w1", 0, 80, 160, 320}};
  pub.adopt(gone);
  auto& none = pub.publish(gone, w, 4);
  EXPECT_TRUE(none.clients.empty()) << "small is placed nowhere now";
}

TEST(uplink_estimate, harmonic_mean_of_the_last_second) {
  sched::uplink_estimate u;
  EXPECT_EQ(u.mbps(0), -1);
  u.add(0.0, 125000, 100);  // 1 Mbit in 100 ms: 10 Mbps
  u.add(0.5, 125000, 25);   // 40 Mbps
  EXPECT_NEAR(u.mbps(0.5), 2 / (1 / 10.0 + 1 / 40.0), 1e-9);
  EXPECT_NEAR(u.mbps(1.2), 40, 1e-9) << "the first is over a second old";
  EXPECT_EQ(u.mbps(3), -1);
  u.add(3, 1000, 0);  // no measurable time: counted at 10 Gbps
  EXPECT_NEAR(u.mbps(3), 1e4, 1e-9);
}

// The low uplink: the estimate scaled by a low quantile of each upload against the estimate
// before it, over the last 10 s; the estimate itself on a steady link or with few uploads.
TEST(uplink_estimate, a_changeable_link_is_timed_at_the_dips_it_had) {
  sched::uplink_estimate steady, shaky;
  for (int i = 0; i < 40; ++i) {
    double t = i * 0.05;
    steady.add(t, 125000, 100);  // 10 Mbps every time
    // 10 Mbps, with one upload in ten at 2.5 Mbps.
    shaky.add(t, 125000, i % 10 == 9 ? 400 : 100);
  }
  EXPECT_NEAR(steady.low_mbps(2, 0.05), steady.mbps(2), 1e-9);
  EXPECT_NEAR(steady.low_mbps(2, 0.05), 10, 1e-9);
  double m = shaky.mbps(2);
  EXPECT_LT(shaky.low_mbps(2, 0.05), 0.4 * m) << "its dips fall to about a quarter of the estimate";
  EXPECT_NEAR(shaky.low_mbps(2, 0.5), m, 1e-9) << "the median upload meets the estimate (at most 1)";
  EXPECT_NEAR(shaky.low_mbps(2, 0), m, 1e-9) << "quantile 0: the estimate itself";
  EXPECT_NEAR(shaky.low_mbps(2, 1), m, 1e-9) << "quantile 1: no upload fell below the estimate that often";
  sched::uplink_estimate few;
  for (int i = 0; i < 10; ++i) few.add(i * 0.05, 125000, i % 2 ? 400 : 100);
  EXPECT_NEAR(few.low_mbps(0.5, 0.05), few.mbps(0.5), 1e-9) << "fewer than 20 uploads to judge by";
  EXPECT_NEAR(shaky.low_mbps(20, 0.05), shaky.mbps(20), 1e-9) << "nothing in the last 10 s";
}

// Outcomes of named clients' requests, and the frames they report skipping, move the quantile of
// uplink dips that their pipeline's uploads are reported at.
TEST(client_registry, a_pipelines_misses_move_the_dips_its_uplinks_are_reported_at) {
  client_registry reg;
  reg.plan_dips(0.1, 0.02, 0);  // the wait share may go down to none
  std::string cam = "cam", p = "p", q = "q";
  // 30 uploads a second to each pipeline, one in ten at half the rate (1 KB in 2 ms, else in 1 ms):
  // rates against the estimate fall at or below the 0.1 quantile only for the halved ones.
  double t = 0;
  auto upload = [&](int seconds, uint32_t skipped = 0) {
    for (int k = 0; k < 30 * seconds; ++k, t += 1.0 / 30) {
      double ms = k % 10 == 9 ? 2 : 1;
      ASSERT_TRUE(reg.on_request({cam, p, 150, 30, 0, 1000, 0, ms, 100, 0, k == 0 ? skipped : 0}, t));
      ASSERT_TRUE(reg.on_request({cam, q, 150, 30, 0, 1000, 0, ms, 100}, t));
    }
  };
  upload(3);
  auto before = reg.report(t, 3);
  ASSERT_EQ(before.size(), 2u);
  EXPECT_DOUBLE_EQ(reg.uplink_quantile(p), 0.1);
  EXPECT_DOUBLE_EQ(reg.uplink_quantile("nobody"), -1);
  EXPECT_DOUBLE_EQ(before[0].uplink_low_mbps, before[1].uplink_low_mbps);
  EXPECT_LT(before[0].uplink_low_mbps, before[0].uplink_mbps);
  // Pipeline p: 12 of 120 requests missed, and its client skipped 10 frames; q: none missed.
  double from = t;
  for (int k = 0; k < 120; ++k) {
    reg.on_outcome(p, k % 10 == 0, true, t);
    reg.on_outcome(q, false, false, t);
  }
  upload(2, 10);
  auto after = reg.report(from + 2, 2);
  ASSERT_EQ(after.size(), 2u);
  EXPECT_DOUBLE_EQ(reg.uplink_quantile(p), 0.1 / 2) << "22 of 130 missed: over twice the target";
  EXPECT_DOUBLE_EQ(reg.uplink_quantile(q), 0.1 * 2) << "none missed";
  // p plans for the halved uploads still; q, whose clients missed nothing, for its estimate.
  EXPECT_LT(after[0].uplink_low_mbps, after[0].uplink_mbps);
  EXPECT_DOUBLE_EQ(after[1].uplink_low_mbps, after[1].uplink_mbps);
  EXPECT_DOUBLE_EQ(after[1].wait_share, 1) << "the quantile rises to 1 first";
  EXPECT_DOUBLE_EQ(reg.wait_share(q), 1);
  // q's clients go on missing nothing: its quantile reaches 1 (0.4, 0.8, 1), then the lift onto
  // spare compute plans for less of the wait behind a running batch.
  for (int s = 0; s < 4; ++s) {
    for (int k = 0; k < 120; ++k) reg.on_outcome(q, false, false, t);
    upload(2);
    after = reg.report(t, 2);
  }
  ASSERT_EQ(after.size(), 2u);
  EXPECT_DOUBLE_EQ(reg.uplink_quantile(q), 1);
  EXPECT_DOUBLE_EQ(after[1].wait_share, 0.75);
  EXPECT_DOUBLE_EQ(reg.wait_share(q), 0.75);
  EXPECT_DOUBLE_EQ(after[0].wait_share, 1) << "p still plans for dips";
  EXPECT_DOUBLE_EQ(reg.wait_share("nobody"), -1);
}

TEST(client_registry, reports_what_clients_declare_and_what_their_uploads_show) {
  client_registry reg(2);
  std::string cam = "cam", p = "p", other = "other";
  // 50,000 bytes of a 200x250 image, 40 ms after it was sent, with a 20 ms round trip: 30 ms up.
  ASSERT_TRUE(reg.on_request({cam, p, 150, 0, 20, 50000, 50000, 40, 100}, 10.0));
  ASSERT_TRUE(reg.on_request({cam, p, 150, 0, 20, 50000, 50000, 40, 100}, 10.5));
  ASSERT_TRUE(reg.on_request({other, p, 0, 25, -1, 1000, 0, -1, 100}, 10.5));
  EXPECT_FALSE(reg.on_request({std::string("third"), p, 0, 0, -1, 1, 0, -1, 100}, 10.5)) << "full";
  auto r = reg.report(10.6, 0.5);
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].client, "cam");
  EXPECT_DOUBLE_EQ(r[0].slo_ms, 150);
  EXPECT_DOUBLE_EQ(r[0].rate_hz, 4) << "measured: 2 in 0.5 s";
  EXPECT_NEAR(r[0].uplink_mbps, 50000 * 8 / 30e3, 1e-9);
  EXPECT_DOUBLE_EQ(r[0].rtt_ms, 20);
  EXPECT_DOUBLE_EQ(r[0].bytes_per_pixel, 1);
  EXPECT_DOUBLE_EQ(r[0].image_pixels, 50000);
  ASSERT_EQ(r[0].images.size(), 1u) << "one size sent";
  EXPECT_DOUBLE_EQ(r[0].images[0].pixels, 50000);
  EXPECT_DOUBLE_EQ(r[0].images[0].bytes, 50000);
  EXPECT_EQ(r[1].client, "other");
  EXPECT_DOUBLE_EQ(r[1].slo_ms, 100) << "the pipeline's";
  EXPECT_DOUBLE_EQ(r[1].rate_hz, 25) << "declared";
  EXPECT_EQ(r[1].uplink_mbps, -1) << "no send time";
  // An uplink that moves much since the report is worth reporting at once.
  EXPECT_FALSE(reg.moved(cam, p, 10.6));
  // Time a request waited on its client before its upload began is no upload time.
  client_registry queued;
  ASSERT_TRUE(queued.on_request({cam, p, 150, 0, 20, 50000, 50000, 140, 100, 100}, 1));
  EXPECT_NEAR(queued.report(1, 1)[0].uplink_mbps, 50000 * 8 / 30e3, 1e-9);
  // Each size it sends is remembered by what it weighed, the most recent first, so many at most.
  for (int k = 1; k <= 10; ++k)
    ASSERT_TRUE(queued.on_request({cam, p, 150, 0, 20, int64_t{1000} * k, int64_t{10000} * k, 140, 100, 100}, 1));
  ASSERT_TRUE(queued.on_request({cam, p, 150, 0, 20, 12000, 100000, 140, 100, 100}, 1));
  auto sizes = queued.report(1, 1)[0].images;
  ASSERT_EQ(sizes.size(), client_registry::max_image_sizes);
  EXPECT_DOUBLE_EQ(sizes[0].pixels, 100000);
  EXPECT_DOUBLE_EQ(sizes[0].bytes, 0.8 * 10000 + 0.2 * 12000) << "a mean over its recent images";
  EXPECT_DOUBLE_EQ(sizes[1].pixels, 90000);
  ASSERT_TRUE(reg.on_request({cam, p, 150, 0, 20, 50000, 50000, 15, 100}, 10.7));  // 5 ms up: 80 Mbps
  EXPECT_FALSE(reg.moved(cam, p, 10.7, 1.5)) << "one fast upload among slow ones moves it less than 1.5x";
  ASSERT_TRUE(reg.on_request({cam, p, 150, 0, 20, 50000, 50000, 15, 100}, 10.7));
  EXPECT_TRUE(reg.moved(cam, p, 10.7));
  EXPECT_FALSE(reg.moved(other, p, 10.7)) << "no uplink known";
  EXPECT_EQ(reg.report(30, 1).size(), 0u) << "silent clients are forgotten";
  // Routes from the controller.
  EXPECT_EQ(reg.route(cam, p), nullptr);
  reg.apply({{"cam", "p", "big", "w1", 0, 80, 320, 320}});
  ASSERT_NE(reg.route(cam, p), nullptr);
  EXPECT_EQ(reg.route(cam, p)->model, "big");
  EXPECT_EQ(reg.route(other, p), nullptr);
}

// An uplink is worth planning again on when it moved by more than the factor, or across the
// rate at which a size the client sends can be carried at its frame rate (the plan's size for it
// changes there, however small the move).
TEST(client_registry, an_uplink_crossing_the_rate_a_size_takes_is_worth_reporting) {
  EXPECT_FALSE(sched::uplink_moved(-1, 5, {})) << "nothing reported yet";
  EXPECT_TRUE(sched::uplink_moved(4, 5.1, {}));
  EXPECT_TRUE(sched::uplink_moved(5.1, 4, {}));
  EXPECT_FALSE(sched::uplink_moved(4, 4.9, {}));
  EXPECT_TRUE(sched::uplink_moved(4, 4.6, {2, 4.5}));
  EXPECT_TRUE(sched::uplink_moved(4.6, 4, {4.5}));
  EXPECT_FALSE(sched::uplink_moved(4, 4.4, {4.5, 0}));
  // 50,000-byte frames at 10 a second take 4 Mbps.
  EXPECT_EQ(carried_at_mbps({{40000, 50000}}, 10), std::vector<double>{4});
  EXPECT_TRUE(carried_at_mbps({{40000, 50000}}, 0).empty()) << "no frame rate declared";
  client_registry reg;
  std::string cam = "cam", anon = "anon", p = "p";
  for (auto* c : {&cam, &anon})
    ASSERT_TRUE(reg.on_request({*c, p, 150, c == &cam ? 10.0 : 0.0, 0, 50000, 40000, 50000 * 8 / 3.9e3, 100}, 1));
  ASSERT_EQ(reg.report(1, 1).size(), 2u);
  for (auto* c : {&cam, &anon})
    ASSERT_TRUE(reg.on_request({*c, p, 150, c == &cam ? 10.0 : 0.0, 0, 50000, 40000, 50000 * 8 / 4.2e3, 100}, 2.2));
  EXPECT_TRUE(reg.moved(cam, p, 2.2)) << "3.9 to 4.2 Mbps: across the 4 Mbps its frames take";
  EXPECT_FALSE(reg.moved(anon, p, 2.2)) << "no frame rate: only a move beyond 1.25x counts";
}

// A miss is the servers' where the request was kept past its plan: answered later than its
// route's compute budget after it came, or dropped later than half of it; earlier, its upload
// left it less than planned. Without a route every miss is the servers'.
TEST(frontend_queries, a_miss_is_the_servers_where_the_request_was_kept_past_its_plan) {
  frontend_impl::query q;
  q.arrival = frontend_impl::clock_time{} + std::chrono::seconds(10);
  auto at = [&](double ms) { return q.arrival + std::chrono::microseconds(static_cast<int64_t>(ms * 1e3)); };
  EXPECT_TRUE(frontend_impl::servers_miss(q, at(1), false)) << "no plan";
  q.route = msg::client_route{};
  q.route->budget_ms = 60;
  EXPECT_FALSE(frontend_impl::servers_miss(q, at(55), true)) << "late, but within the budget planned";
  EXPECT_TRUE(frontend_impl::servers_miss(q, at(61), true));
  EXPECT_FALSE(frontend_impl::servers_miss(q, at(25), false)) << "dropped within one batch's wait";
  EXPECT_TRUE(frontend_impl::servers_miss(q, at(31), false));
}

TEST(client_time, reported_network_time_counts_and_is_remembered_for_requests_without_it) {
  client_time c;
  auto now = std::chrono::steady_clock::time_point{};
  auto t = c.on_request("a", 12, 0, 0, now, 100);
  EXPECT_DOUBLE_EQ(t.spent_ms, 12);
  EXPECT_DOUBLE_EQ(t.waited_ms, -1);
  t = c.on_request("a", -1, 0, 0, now, 100);
  EXPECT_DOUBLE_EQ(t.network_ms, 12) << "estimated from what it reported before";
  EXPECT_DOUBLE_EQ(c.on_request("b", -1, 0, 0, now, 100).spent_ms, 0) << "a client that never reported";
}

TEST(client_time, send_times_count_as_they_are_within_the_tolerance_and_beyond_an_offset_otherwise) {
  client_time c;
  auto now = std::chrono::steady_clock::time_point{} + 1h;
  int64_t wall = 1'000'000'000;
  // Clocks that agree: a request sent 30 ms ago has spent 30 ms.
  EXPECT_DOUBLE_EQ(c.on_request("a", -1, wall - 30'000, wall, now, 100).spent_ms, 30);
  // A client 5 s behind: its least delay is taken as the offset, and only what a request took
  // beyond it counts.
  EXPECT_DOUBLE_EQ(c.on_request("b", -1, wall - 5'002'000, wall, now, 100).spent_ms, 0);
  auto t = c.on_request("b", -1, wall - 5'040'000, wall, now + 1s, 100);
  EXPECT_DOUBLE_EQ(t.waited_ms, 38);
  EXPECT_DOUBLE_EQ(t.spent_ms, 38);
  // A client ahead of the frontend (sent "in the future"): the negative offset is removed too.
  EXPECT_DOUBLE_EQ(c.on_request("c", -1, wall + 3'000'000, wall, now, 100).spent_ms, 0);
}

// The KServe ingresses' requests of a partitioned model: from a start layer the input is that
// layer's, with or without a batch of 1 in front; the request carries the start and its SLO.
TEST(kserve_call, a_partitioned_models_request_from_a_later_layer_takes_that_layers_input) {
  auto cfg = testing::parse_or_die(R"(
nodes:
  - {name: fe, address: tcp://127.0.0.1:0, roles: [controller, frontend, worker], devices: [{kind: emulated}]}
models:
  - name: m
    input: {dtype: float32, shape: [4]}
    output: {dtype: float32, shape: [3]}
    layers:
      - {profile: {alpha_ms: 1, beta_ms: 1}}
      - {input: {dtype: float32, shape: [6]}, profile: {alpha_ms: 1, beta_ms: 1}}
pipelines:
  - {name: ph, slo_ms: 200, stages: [{name: rest, model: m}]}
)");
  auto& p = cfg->pipelines[0];
  auto input = [](std::vector<int64_t> shape) {
    return std::vector<tensor>{make_tensor({dtype::float32, std::move(shape)}, 1, "input")};
  };
  auto c = kserve::prepare_call(*cfg, p, input({1, 6}), 7, {1, 120});
  ASSERT_TRUE(c) << c.error();
  EXPECT_TRUE(c->batched);
  ASSERT_EQ(c->requests.size(), 1u);
  EXPECT_EQ(c->requests[0].start_layer, 1u);
  EXPECT_DOUBLE_EQ(c->requests[0].slo_ms, 120);
  EXPECT_EQ(c->requests[0].inputs[0].shape, std::vector<int64_t>{6});
  EXPECT_TRUE(kserve::prepare_call(*cfg, p, input({4}), 8));
  auto wrong = kserve::prepare_call(*cfg, p, input({4}), 9, {1, 0});
  ASSERT_FALSE(wrong);
  EXPECT_NE(wrong.error().find("float32[6]"), std::string::npos) << wrong.error();
  auto beyond = kserve::prepare_call(*cfg, p, input({6}), 10, {2, 0});
  ASSERT_FALSE(beyond);
  EXPECT_NE(beyond.error().find("start_layer 2 is not below the 2 layers"), std::string::npos) << beyond.error();
}

// A request's `outputs`: names the signature has (a two-leaf pipeline's are its leaf stages'),
// and the reply keeps those alone; an unknown name is the client's mistake.
TEST(kserve_call, a_request_gets_the_outputs_it_names_and_an_unknown_one_is_refused) {
  auto cfg = testing::parse_or_die(R"(
nodes:
  - {name: fe, address: tcp://127.0.0.1:0, roles: [controller, frontend, worker], devices: [{kind: emulated}]}
models:
  - {name: det, input: {dtype: float32, shape: [4]}, output: {dtype: float32, shape: [4]}, profile: {alpha_ms: 1, beta_ms: 1}}
  - {name: car, input: {dtype: float32, shape: [4]}, output: {dtype: float32, shape: [3]}, profile: {alpha_ms: 1, beta_ms: 1}}
  - {name: face, input: {dtype: float32, shape: [4]}, output: {dtype: float32, shape: [2]}, profile: {alpha_ms: 1, beta_ms: 1}}
pipelines:
  - {name: t, slo_ms: 200, stages: [{name: detect, model: det}, {name: car, model: car, after: [detect]},
                                    {name: face, model: face, after: [detect]}]}
)");
  auto& p = cfg->pipelines[0];
  auto input = [] { return std::vector<tensor>{make_tensor({dtype::float32, {4}}, 1, "input")}; };
  auto reply = [] {
    return std::vector<tensor>{make_tensor({dtype::float32, {3}}, 1, "car"),
                               make_tensor({dtype::float32, {2}}, 2, "face"),
                               make_tensor({dtype::float32, {3}}, 3, "car")};
  };
  auto all = kserve::prepare_call(*cfg, p, input(), 1);
  ASSERT_TRUE(all) << all.error();
  auto out = reply();
  kserve::shape_outputs(*cfg, p, *all, out);
  ASSERT_EQ(out.size(), 2u) << "none named: every output, each once";
  EXPECT_EQ(out[0].name, "car");
  EXPECT_EQ(out[1].name, "face");
  auto face = kserve::prepare_call(*cfg, p, input(), 2, {0, 0, {"face"}});
  ASSERT_TRUE(face) << face.error();
  out = reply();
  kserve::shape_outputs(*cfg, p, *face, out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].name, "face");
  auto bad = kserve::prepare_call(*cfg, p, input(), 3, {0, 0, {"face", "plate"}});
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().find("no output 'plate'; its outputs are 'car', 'face'"), std::string::npos) << bad.error();
  EXPECT_EQ(kserve::version_of(p, "1"), 1u);
  EXPECT_EQ(kserve::version_of(p, ""), 0u) << "none named";
  EXPECT_FALSE(kserve::version_of(p, "2"));
  EXPECT_FALSE(kserve::version_of(p, "-1"));
  EXPECT_EQ(kserve::no_version(p, "2"), "pipeline '" + p.name + "' has no version '2'; its versions: 1");
}

// An output asked as classes comes back ranked and labelled by its model's `labels` file (one
// a line, read with the configuration), batched or not; one that holds no scores is refused
// before anything is sent.
TEST(kserve_call, an_output_asked_as_classes_comes_ranked_and_labelled) {
  auto labels = std::filesystem::temp_directory_path() / ("sloserve_labels_" + std::to_string(::getpid()) + ".txt");
  std::ofstream(labels) << "cat\r\ndog\neel\n";
  auto cfg = testing::parse_or_die(R"(
nodes:
  - {name: fe, address: tcp://127.0.0.1:0, roles: [controller, frontend, worker], devices: [{kind: emulated}]}
models:
  - {name: m, input: {dtype: float32, shape: [4]}, output: {dtype: float32, shape: [3]}, labels: )" +
                                   labels.string() + R"(, profile: {alpha_ms: 1, beta_ms: 1}}
  - {name: w, input: {dtype: float32, shape: [4]}, output: {dtype: bytes, shape: [1]}, profile: {alpha_ms: 1, beta_ms: 1}}
pipelines:
  - {name: t, slo_ms: 200, stages: [{name: s, model: m}]}
  - {name: words, slo_ms: 200, stages: [{name: s, model: w}]}
)");
  std::filesystem::remove(labels);
  EXPECT_EQ(cfg->models[0].label_names, (std::vector<std::string>{"cat", "dog", "eel"}));
  auto& p = cfg->pipelines[0];
  auto scores = [](float a, float b, float c) {
    tensor t;
    t.name = "s";
    t.type = dtype::float32;
    t.shape = {3};
    float xs[3] = {a, b, c};
    t.data = std::string(reinterpret_cast<const char*>(xs), sizeof xs);
    return t;
  };
  auto strings = [](const tensor& t) {
    std::vector<std::string> out;
    auto items = bytes_elements(t.data.view(), t.spec().elements().value_or(0));
    if (items)
      for (auto x : *items) out.emplace_back(x);
    return out;
  };
  auto reply = [](std::vector<tensor> outputs) {
    msg::client_reply r;
    r.code = msg::status::ok;
    r.outputs = std::move(outputs);
    return r;
  };
  kserve::call_parameters asked{0, 0, {"output"}, 0, {{"output", 2}}};
  auto one = kserve::prepare_call(*cfg, p, {make_tensor({dtype::float32, {4}}, 1, "input")}, 1, asked);
  ASSERT_TRUE(one) << one.error();
  std::vector<msg::client_reply> replies;
  replies.push_back(reply({scores(0.1f, 0.5f, 0.9f)}));
  auto r = kserve::combine_replies(*cfg, p, *one, std::move(replies));
  ASSERT_EQ(r.code, msg::status::ok) << r.reason;
  ASSERT_EQ(r.outputs.size(), 1u);
  EXPECT_EQ(r.outputs[0].shape, (std::vector<int64_t>{2}));
  EXPECT_EQ(strings(r.outputs[0]), (std::vector<std::string>{"0.900000:2:eel", "0.500000:1:dog"}));
  // A client's batch of two: [2, 2].
  auto two = kserve::prepare_call(*cfg, p, {make_tensor({dtype::float32, {2, 4}}, 1, "input")}, 3, asked);
  ASSERT_TRUE(two) << two.error();
  replies.clear();
  replies.push_back(reply({scores(3, 2, 1)}));
  replies.push_back(reply({scores(1, 2, 3)}));
  r = kserve::combine_replies(*cfg, p, *two, std::move(replies));
  ASSERT_EQ(r.code, msg::status::ok) << r.reason;
  EXPECT_EQ(r.outputs[0].shape, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(strings(r.outputs[0]),
            (std::vector<std::string>{"3.000000:0:cat", "2.000000:1:dog", "3.000000:2:eel", "2.000000:1:dog"}));
  // Strings have no scores to rank.
  auto refused = kserve::prepare_call(*cfg, cfg->pipelines[1], {make_tensor({dtype::float32, {4}}, 1, "input")}, 5,
                                      {0, 0, {"output"}, 0, {{"output", 1}}});
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error(), "output 'output' is bytes[1]: classification needs a vector of class scores");
}

// A leaf invoked once per row of the detector's output (a `fanout` stage, and the stage after
// it) answers one output, its invocations stacked along a leading dimension ([k, ...], k >= 0,
// the metadata's -1), in the signature's order whatever order they ended in; a leaf invoked once
// keeps its shape; a client's batch of 1 comes back in front of both.
TEST(kserve_call, a_fan_out_leaf_answers_its_invocations_stacked_as_one_output) {
  auto cfg = testing::parse_or_die(R"(
nodes:
  - {name: fe, address: tcp://127.0.0.1:0, roles: [controller, frontend, worker], devices: [{kind: emulated}]}
models:
  - {name: det, input: {dtype: float32, shape: [4]}, output: {dtype: float32, shape: [3, 4]}, profile: {alpha_ms: 1, beta_ms: 1}}
  - {name: crop, input: {dtype: float32, shape: [4]}, output: {dtype: float32, shape: [4]}, profile: {alpha_ms: 1, beta_ms: 1}}
  - {name: car, input: {dtype: float32, shape: [4]}, output: {dtype: float32, shape: [2]}, profile: {alpha_ms: 1, beta_ms: 1}}
  - {name: scene, input: {dtype: float32, shape: [4]}, output: {dtype: float32, shape: [5]}, profile: {alpha_ms: 1, beta_ms: 1}}
pipelines:
  - {name: t, slo_ms: 200, stages: [{name: detect, model: det}, {name: crops, model: crop, after: [detect], fanout: 2},
                                    {name: car, model: car, after: [crops]}, {name: scene, model: scene, after: [detect]}]}
)");
  auto& p = cfg->pipelines[0];
  EXPECT_TRUE(kserve::invoked_per_row(p, 1));
  EXPECT_TRUE(kserve::invoked_per_row(p, 2)) << "after a fanout stage";
  EXPECT_FALSE(kserve::invoked_per_row(p, 3));
  auto sig = kserve::signature_of(*cfg, p);
  ASSERT_EQ(sig.outputs.size(), 2u);
  EXPECT_EQ(sig.outputs[0].name, "car");
  EXPECT_EQ(sig.outputs[0].spec.shape, (std::vector<int64_t>{-1, 2}));
  EXPECT_EQ(sig.outputs[1].spec.shape, (std::vector<int64_t>{5}));
  auto input = [] { return std::vector<tensor>{make_tensor({dtype::float32, {4}}, 1, "input")}; };
  auto call = kserve::prepare_call(*cfg, p, input(), 1);
  ASSERT_TRUE(call) << call.error();
  std::vector<tensor> out{make_tensor({dtype::float32, {2}}, 1, "car"), make_tensor({dtype::float32, {5}}, 2, "scene"),
                          make_tensor({dtype::float32, {2}}, 3, "car"), make_tensor({dtype::float32, {2}}, 4, "car")};
  auto rows = out[0].data.str() + out[2].data.str() + out[3].data.str();
  kserve::shape_outputs(*cfg, p, *call, out);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].name, "car");
  EXPECT_EQ(out[0].shape, (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(out[0].data.str(), rows) << "the invocations' rows in the order they ended";
  EXPECT_EQ(out[1].name, "scene");
  EXPECT_EQ(out[1].shape, (std::vector<int64_t>{5}));
  // No crop at all: an empty [0, 2]; and a batch of one.
  auto batched = kserve::prepare_call(*cfg, p, {make_tensor({dtype::float32, {1, 4}}, 1, "input")}, 2);
  ASSERT_TRUE(batched) << batched.error();
  out = {make_tensor({dtype::float32, {5}}, 2, "scene")};
  kserve::shape_outputs(*cfg, p, *batched, out);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].shape, (std::vector<int64_t>{1, 0, 2}));
  EXPECT_TRUE(out[0].data.empty());
  EXPECT_EQ(out[0].type, dtype::float32);
  EXPECT_EQ(out[1].shape, (std::vector<int64_t>{1, 5}));
}

// A client's batch of N: N requests to the frontend (numbered on, each its item's bytes), answered
// as one: every output stacked [N, ...], a per-row leaf padded to the most rows an item has with
// its rows per item beside it; an item not answered OK answers the whole call, saying which.
TEST(kserve_call, a_batch_of_n_is_n_requests_answered_as_one) {
  auto cfg = testing::parse_or_die(R"(
nodes:
  - {name: fe, address: tcp://127.0.0.1:0, roles: [controller, frontend, worker], devices: [{kind: emulated}]}
models:
  - {name: det, input: {dtype: float32, shape: [2]}, output: {dtype: float32, shape: [2]}, profile: {alpha_ms: 1, beta_ms: 1}}
  - {name: car, input: {dtype: float32, shape: [2]}, output: {dtype: float32, shape: [1]}, profile: {alpha_ms: 1, beta_ms: 1}}
  - {name: scene, input: {dtype: float32, shape: [2]}, output: {dtype: float32, shape: [3]}, profile: {alpha_ms: 1, beta_ms: 1}}
pipelines:
  - {name: t, slo_ms: 200, stages: [{name: detect, model: det}, {name: car, model: car, after: [detect], fanout: 2},
                                    {name: scene, model: scene, after: [detect]}]}
)");
  auto& p = cfg->pipelines[0];
  std::vector<float> x{1, 2, 3, 4, 5, 6};
  tensor in{"input", dtype::float32, {3, 2}, bytes(std::string(reinterpret_cast<const char*>(x.data()), 24))};
  auto call = kserve::prepare_call(*cfg, p, {in}, 40, {0, 75});
  ASSERT_TRUE(call) << call.error();
  EXPECT_TRUE(call->batched);
  ASSERT_EQ(call->requests.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(call->requests[i].request_id, 40 + i);
    EXPECT_DOUBLE_EQ(call->requests[i].slo_ms, 75);
    EXPECT_EQ(call->requests[i].inputs[0].shape, std::vector<int64_t>{2});
    EXPECT_EQ(call->requests[i].inputs[0].data.view(), in.data.view().substr(8 * i, 8));
  }
  auto f = [](float v, const char* name, int64_t n) {
    std::vector<float> d(static_cast<size_t>(n), v);
    return tensor{name, dtype::float32, {n}, bytes(std::string(reinterpret_cast<const char*>(d.data()), d.size() * 4))};
  };
  auto ok = [&](std::vector<tensor> outputs) {
    msg::client_reply r;
    r.code = msg::status::ok;
    r.outputs = std::move(outputs);
    return r;
  };
  // Item 0 found two cars, item 1 none, item 2 one.
  std::vector<msg::client_reply> replies{ok({f(1, "car", 1), f(9, "scene", 3), f(2, "car", 1)}), ok({f(8, "scene", 3)}),
                                         ok({f(7, "scene", 3), f(3, "car", 1)})};
  auto r = kserve::combine_replies(*cfg, p, *call, replies);
  ASSERT_EQ(r.code, msg::status::ok);
  ASSERT_EQ(r.outputs.size(), 3u);
  EXPECT_EQ(r.outputs[0].name, "car");
  EXPECT_EQ(r.outputs[0].shape, (std::vector<int64_t>{3, 2, 1}));
  std::vector<float> cars(6);
  std::memcpy(cars.data(), r.outputs[0].data.data(), 24);
  EXPECT_EQ(cars, (std::vector<float>{1, 2, 0, 0, 3, 0})) << "padded with zero rows";
  EXPECT_EQ(r.outputs[1].name, "car_rows");
  EXPECT_EQ(r.outputs[1].type, dtype::int64);
  std::vector<int64_t> rows(3);
  std::memcpy(rows.data(), r.outputs[1].data.data(), 24);
  EXPECT_EQ(rows, (std::vector<int64_t>{2, 0, 1}));
  EXPECT_EQ(r.outputs[2].name, "scene");
  EXPECT_EQ(r.outputs[2].shape, (std::vector<int64_t>{3, 3}));
  EXPECT_TRUE(r.late_paths.empty());
  // Items late on a path (per-path SLOs): the call is late on each of those paths, once.
  replies[1].late_paths = {"car"};
  replies[2].late_paths = {"car", "scene"};
  EXPECT_EQ(kserve::combine_replies(*cfg, p, *call, replies).late_paths, (std::vector<std::string>{"car", "scene"}));
  // One item dropped: the call answers its status, saying which item.
  replies[1].code = msg::status::dropped;
  replies[1].reason = "early drop";
  r = kserve::combine_replies(*cfg, p, *call, replies);
  EXPECT_EQ(r.code, msg::status::dropped);
  EXPECT_EQ(r.reason, "item 1 of 3: early drop");
  EXPECT_TRUE(r.outputs.empty());
  // Bytes that are not N whole items, and too many items, are the client's mistake.
  in.data = bytes(std::string(20, '\0'));
  auto bad = kserve::prepare_call(*cfg, p, {in}, 1);
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().find("3 items of float32[2]: tensor 'input' float32[3,2] needs 24 bytes but carries 20"),
            std::string::npos)
      << bad.error();
  in.shape = {kserve::max_batch_items + 1, 2};
  EXPECT_FALSE(kserve::prepare_call(*cfg, p, {in}, 1));
}

// The replies of a call's items come on any thread, in any order: the call is answered once,
// when the last arrives, with them in the items' order; a second reply for an item is ignored.
TEST(kserve_call, replies_are_gathered_in_item_order_and_answered_once) {
  int calls = 0;
  std::vector<uint64_t> ids;
  auto sink = kserve::gather_replies(3, [&](std::vector<msg::client_reply> all) {
    ++calls;
    for (auto& r : all) ids.push_back(r.request_id);
  });
  auto reply = [](uint64_t id) {
    msg::client_reply r;
    r.request_id = id;
    return r;
  };
  (*sink(2))(reply(12));
  (*sink(0))(reply(10));
  (*sink(0))(reply(99));
  EXPECT_EQ(calls, 0);
  (*sink(1))(reply(11));
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(ids, (std::vector<uint64_t>{10, 11, 12}));
  (*sink(1))(reply(11));
  EXPECT_EQ(calls, 1);
}

}  // namespace
}  // namespace sloserve
