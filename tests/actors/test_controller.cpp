// The controller on the deterministic scheduler, with the monitor beside it and a recording link
// standing in for the other nodes: acknowledgements gate routing, a draining worker serves until
// its replacement has loaded, a restarted worker leaves routing until it acknowledges again, and
// a worker lost in the middle of an epoch loses its sessions to the survivors. Its pure parts
// (the worker registry and the route publisher) are tested alone below.

#include <gtest/gtest.h>

#include <set>

#include "actors/roles.hpp"
#include "actors/route_publisher.hpp"
#include "actors/worker_registry.hpp"
#include "caf_fixture.hpp"

namespace sloserve {
namespace {

using namespace std::chrono_literals;
using testing::caf_fixture;
using testing::recording_link;

std::string yaml(const std::string& policy) {
  return R"(
nodes:
  - {name: ctl, address: tcp://127.0.0.1:0, roles: [controller]}
  - {name: fe, address: tcp://127.0.0.1:0, roles: [frontend]}
  - {name: w1, address: tcp://127.0.0.1:0, roles: [worker], devices: [{kind: emulated, count: 1}]}
  - {name: w2, address: tcp://127.0.0.1:0, roles: [worker], devices: [{kind: emulated, count: 1}]}
models:
  - {name: m, input: {dtype: float32, shape: [2]}, output: {dtype: float32, shape: [2]}, max_batch: 8,
     profile: {alpha_ms: 5, beta_ms: 5}}
pipelines:
  - {name: p, slo_ms: 100, stages: [{name: s, model: m}]}
scheduler: {policy: )" +
         policy + R"(, epoch_s: 30, min_epoch_s: 5}
)";
}

// A planner that answers only when the test releases a plan (`tick`, its index): plans stay
// pending meanwhile. Untyped, so that it also takes the release; the controller sees a planner.
struct held_plans {
  std::vector<caf::response_promise> promises;
  std::vector<planned_epoch> plans;
  caf::actor self;
};
planner_actor held_planner(caf::actor_system& sys, std::shared_ptr<held_plans> held) {
  held->self = sys.spawn([held](caf::event_based_actor* self) -> caf::behavior {
    return {
        [=](plan_request& r) {
          held->plans.push_back(run_plan_request(r));
          held->promises.push_back(self->make_response_promise());
        },
        [=](tick_atom, size_t k) { held->promises[k].deliver(std::move(held->plans[k])); },
    };
  });
  return caf::actor_cast<planner_actor>(held->self);
}

struct controller_fixture : caf_fixture, ::testing::Test {
  void start(const std::string& policy, std::shared_ptr<held_plans> held = nullptr) { start_with(yaml(policy), held); }
  void start_with(const std::string& text, std::shared_ptr<held_plans> held = nullptr) {
    cfg_ = testing::parse_or_die(text);
    net = std::make_shared<recording_link>("ctl");
    net->config = std::make_shared<config_source>(cfg_);
    actor_args args{cfg_, net, 1};
    // Planning on the test scheduler, so that the test decides when it happens.
    args.planner = [held](caf::actor_system& sys) {
      return held ? held_planner(sys, held) : spawn_planner(sys, false);
    };
    net->actors.monitor = keep(spawn_monitor(*sys, args));
    net->actors.controller = keep(spawn_controller(*sys, args));
    caf::anon_send(net->actors.controller, start_atom::value);
    run();
    reg("fe", {"frontend"}, 1, 0);
  }
  void reg(const std::string& node, std::vector<std::string> roles, uint64_t incarnation, uint64_t epoch,
           bool leaving = false) {
    msg::register_node r;
    r.node = node;
    r.roles = std::move(roles);
    r.devices = 1;
    r.incarnation = incarnation;
    r.schedule_epoch = epoch;
    r.leaving = leaving;
    caf::anon_send(net->actors.controller, r);
    run();
  }
  // The latest schedule sent to `node` since the last call for it (epoch 0 when none).
  msg::schedule schedule_of(const std::string& node) {
    for (auto& x : net->take<msg::schedule>()) pending.push_back(std::move(x));
    msg::schedule out;
    for (auto& [to, s] : pending)
      if (to == node) out = s;
    std::erase_if(pending, [&](auto& x) { return x.first == node; });
    return out;
  }
  // The nodes that the latest table sent to the frontend routes model m to; "-" when no table
  // was sent since the last call.
  std::string routed() {
    auto tables = net->take<msg::routing_table>();
    if (tables.empty()) return "-";
    std::string out;
    for (auto& r : tables.back().second.routes)
      for (auto& i : r.instances) out += (out.empty() ? "" : ",") + i.node;
    return out;
  }
  // A second of frontend counts at `rate` queries/s, then a beacon.
  void second_at(double rate) {
    msg::load_report r;
    r.node = "fe";
    r.window_s = 1;
    r.pipelines.push_back({"p", static_cast<uint64_t>(rate), {static_cast<uint64_t>(rate)}});
    caf::anon_send(net->actors.monitor, r);
    run();
    advance(1s);
  }

  // w1 and w2 register and acknowledge, and seconds at 300 queries/s pass until an epoch plans
  // them; returns w1's schedule epoch then (0: none came), with both workers' schedules taken.
  uint64_t plan_on_both_workers() { return plan_on_both_workers_at(300); }
  uint64_t plan_on_both_workers_at(double rate) { return first_plan_at(rate).first.epoch; }
  // w1 and w2 register and acknowledge, and seconds at `rate` pass until an epoch plans them:
  // both workers' schedules then (w1's epoch 0: none came).
  std::pair<msg::schedule, msg::schedule> first_plan_at(double rate) {
    for (std::string w : {"w1", "w2"}) {
      reg(w, {"worker"}, 7, 0);
      reg(w, {"worker"}, 7, schedule_of(w).epoch);
    }
    // Before any load, they were planned for what they hold; the plan for the load comes once it
    // has settled (min_epoch_s after that first plan).
    schedule_of("w1");
    schedule_of("w2");
    msg::schedule w1;
    for (int s = 0; s < 40 && !w1.epoch; ++s) {
      second_at(rate);
      w1 = schedule_of("w1");
    }
    return {w1, schedule_of("w2")};
  }
  static size_t sessions(const msg::schedule& s) {
    size_t n = 0;
    for (auto& d : s.devices) n += d.sessions.size();
    return n;
  }

  std::shared_ptr<const cluster_config> cfg_;
  std::shared_ptr<recording_link> net;
  std::vector<std::pair<std::string, msg::schedule>> pending;
};

TEST_F(controller_fixture, routes_to_a_worker_only_once_it_acknowledges_its_schedule) {
  start("static");
  EXPECT_EQ(routed(), "") << "a frontend gets a table at once, empty while no worker serves";
  reg("w1", {"worker"}, 7, 0);
  auto s = schedule_of("w1");
  ASSERT_GT(s.epoch, 0u) << "a new worker gets its schedule";
  ASSERT_EQ(s.devices.size(), 1u);
  ASSERT_EQ(s.devices[0].sessions.size(), 1u);
  EXPECT_EQ(s.devices[0].sessions[0].model, "m");
  EXPECT_EQ(routed(), "-") << "not routed before it acknowledges";
  reg("w1", {"worker"}, 7, s.epoch);
  EXPECT_EQ(routed(), "w1");
  reg("w2", {"worker"}, 3, 0);
  auto s2 = schedule_of("w2");
  EXPECT_EQ(routed(), "-");
  reg("w2", {"worker"}, 3, s2.epoch);
  EXPECT_EQ(routed(), "w1,w2");
  reg("w2", {"worker"}, 3, s2.epoch);
  EXPECT_EQ(routed(), "-") << "a registration that changes nothing publishes nothing";
}

TEST_F(controller_fixture, a_draining_worker_serves_until_its_replacement_has_loaded) {
  start("static");
  reg("w1", {"worker"}, 7, 0);
  reg("w1", {"worker"}, 7, schedule_of("w1").epoch);
  EXPECT_EQ(routed(), "w1");
  reg("w1", {"worker"}, 7, 0, true);
  EXPECT_EQ(routed(), "w1") << "the only instance keeps serving while it drains";
  reg("w2", {"worker"}, 3, 0);
  reg("w2", {"worker"}, 3, schedule_of("w2").epoch);
  EXPECT_EQ(routed(), "w2") << "the replacement takes over once it acknowledges";
  caf::anon_send(net->actors.controller, peer_down_atom::value, std::string("w1"));
  run();
  EXPECT_EQ(routed(), "w2");
}

TEST_F(controller_fixture, a_restarted_worker_leaves_routing_until_it_acknowledges_again) {
  start("static");
  for (std::string w : {"w1", "w2"}) {
    reg(w, {"worker"}, 7, 0);
    reg(w, {"worker"}, 7, schedule_of(w).epoch);
  }
  EXPECT_EQ(routed(), "w1,w2");
  reg("w1", {"worker"}, 8, 0);  // a new incarnation runs no schedule yet
  auto s = schedule_of("w1");
  EXPECT_GT(s.epoch, 0u) << "the restarted worker gets its schedule again";
  EXPECT_EQ(routed(), "w2");
  reg("w1", {"worker"}, 8, s.epoch);
  EXPECT_EQ(routed(), "w1,w2");
}

TEST_F(controller_fixture, a_worker_lost_in_the_middle_of_an_epoch_loses_its_sessions_to_the_survivors) {
  start("nexus");
  for (std::string w : {"w1", "w2"}) {
    reg(w, {"worker"}, 7, 0);
    reg(w, {"worker"}, 7, schedule_of(w).epoch);
  }
  EXPECT_EQ(routed(), "w1,w2");
  // Planned for what they hold before any load; then load settles, and the first epoch for the
  // load plans it (one device carries 300 req/s at SLO 100 ms).
  schedule_of("w1");
  schedule_of("w2");
  uint64_t planned = 0;
  for (int s = 0; s < 10 && !planned; ++s) {
    second_at(300);
    planned = schedule_of("w1").epoch;
  }
  ASSERT_GT(planned, 0u) << "an epoch ran";
  EXPECT_EQ(schedule_of("w2").epoch, planned);
  // w1 is lost before it acknowledges the epoch: the controller re-plans on w2 at once.
  caf::anon_send(net->actors.controller, peer_down_atom::value, std::string("w1"));
  run();
  EXPECT_EQ(schedule_of("w1").epoch, 0u) << "nothing is sent to a lost worker";
  auto s2 = schedule_of("w2");
  ASSERT_GT(s2.epoch, planned);
  ASSERT_EQ(s2.devices.size(), 1u);
  ASSERT_EQ(s2.devices[0].sessions.size(), 1u) << "the survivor runs the model";
  auto table = routed();
  EXPECT_EQ(table.find("w1"), std::string::npos) << table;
  reg("w2", {"worker"}, 7, s2.epoch);
  EXPECT_EQ(routed(), "w2");
}

// A controller that stops hearing most of the cluster (it is the one cut off) keeps its placement
// and routing: tables made then would reach the frontends after the partition heals, naming no
// worker. Once it hears the cluster again it plans and publishes as before.
TEST_F(controller_fixture, cut_off_from_most_nodes_it_keeps_the_routing_it_has) {
  start("static");
  for (std::string w : {"w1", "w2"}) {
    reg(w, {"worker"}, 7, 0);
    reg(w, {"worker"}, 7, schedule_of(w).epoch);
  }
  EXPECT_EQ(routed(), "w1,w2");
  for (std::string n : {"fe", "w1"}) caf::anon_send(net->actors.controller, peer_down_atom::value, n);
  run();
  // 2 of 3 others unheard: one lost worker was acted on before that (fe went first, 1 of 3),
  // but nothing once the controller hears fewer than half of them.
  EXPECT_EQ(routed(), "-");
  caf::anon_send(net->actors.controller, peer_down_atom::value, std::string("w2"));
  run();
  EXPECT_EQ(routed(), "-") << "no table that names no worker";
  EXPECT_EQ(schedule_of("w2").epoch, 0u);
  // Heard again: routing resumes with what registers.
  for (std::string n : {"fe", "w1", "w2"}) caf::anon_send(net->actors.controller, peer_up_atom::value, n);
  run();
  reg("w1", {"worker"}, 7, 0);
  reg("w1", {"worker"}, 7, schedule_of("w1").epoch);
  auto table = routed();
  EXPECT_NE(table, "-");
  EXPECT_NE(table.find("w1"), std::string::npos) << table;
}

// A worker behind a slow link (the monitor says so from the frontends' transfer times) is planned
// without, at once, while another worker can serve; and again once it is no longer slow.
TEST_F(controller_fixture, a_worker_behind_a_slow_link_is_planned_without) {
  start("nexus");
  auto planned = plan_on_both_workers();
  ASSERT_GT(planned, 0u);
  // The frontend's report: w1's results spend 80 ms outside its queue and device (over a tenth
  // of the 100 ms SLO); the monitor tells the controller.
  msg::load_report r;
  r.node = "fe";
  r.window_s = 1;
  r.pipelines.push_back({"p", 300, {300}});
  r.links.push_back({"w1", 80.0, 20});
  r.links.push_back({"w2", 0.4, 20});
  caf::anon_send(net->actors.monitor, r);
  run();
  auto w1 = schedule_of("w1"), w2 = schedule_of("w2");
  ASSERT_GT(w1.epoch, planned) << "planned again at once";
  EXPECT_EQ(sessions(w1), 0u) << "nothing on the slow worker";
  EXPECT_GE(sessions(w2), 1u);
  // Every worker slow: planning uses them rather than none.
  caf::anon_send(net->actors.controller, link_verdicts{{"w1", "w2"}, {}});
  run();
  EXPECT_GE(sessions(schedule_of("w1")) + sessions(schedule_of("w2")), 1u);
}

// An asymmetric partition: the controller hears w1, the frontend does not. The frontend says so,
// and w1 is planned without at once, while that lasts (and a few seconds after).
TEST_F(controller_fixture, a_worker_a_frontend_does_not_hear_is_planned_without) {
  start("nexus");
  auto planned = plan_on_both_workers();
  ASSERT_GT(planned, 0u);
  msg::load_report r;
  r.node = "fe";
  msg::link_load l;
  l.node = "w1";
  l.unheard = true;
  r.links.push_back(l);
  caf::anon_send(net->actors.monitor, r);
  run();
  auto w1 = schedule_of("w1"), w2 = schedule_of("w2");
  ASSERT_GT(w1.epoch, planned) << "planned again at once";
  EXPECT_EQ(sessions(w1), 0u);
  EXPECT_GE(sessions(w2), 1u);
  // Heard again: no more reports of it; a few seconds on, w1 may serve again.
  for (int s = 0; s < 5; ++s) {
    msg::load_report quiet;
    quiet.node = "fe";
    quiet.window_s = 1;
    quiet.pipelines.push_back({"p", 300, {300}});
    msg::link_load fine;
    fine.node = "w1";
    fine.ms_per_mb = 0.01;
    quiet.links.push_back(fine);
    caf::anon_send(net->actors.monitor, quiet);
    run();
    advance(1s);
  }
  EXPECT_GT(schedule_of("w1").epoch, w1.epoch) << "planned again once the frontend hears it";
}

// The frontend's link probes find w1's link slow per byte (1 Mbit/s: 8,000 ms per MB): the stage
// with 48 KB inputs is planned on w2, at once, while the stage with 8-byte inputs may stay on w1.
// When every worker's link is too slow for it, it is placed all the same.
TEST_F(controller_fixture, a_model_too_large_for_a_workers_link_is_planned_elsewhere) {
  auto text = yaml("nexus");
  auto at = text.find("pipelines:");
  text = text.substr(0, at) +
         "  - {name: big, input: {dtype: float32, shape: [3, 64, 64]}, output: {dtype: float32, shape: [2]},\n"
         "     max_batch: 8, profile: {alpha_ms: 2, beta_ms: 3}}\n"
         "pipelines:\n"
         "  - {name: p, slo_ms: 100, stages: [{name: a, model: big}, {name: s, model: m, after: [a]}]}\n" +
         text.substr(text.find("scheduler:"));
  start_with(text);
  for (std::string w : {"w1", "w2"}) {
    reg(w, {"worker"}, 7, 0);
    reg(w, {"worker"}, 7, schedule_of(w).epoch);
  }
  uint64_t planned = 0;
  for (int s = 0; s < 5 && !planned; ++s) {
    msg::load_report second;
    second.node = "fe";
    second.window_s = 1;
    second.pipelines.push_back({"p", 300, {300, 300}});
    caf::anon_send(net->actors.monitor, second);
    run();
    advance(1s);
    planned = schedule_of("w1").epoch;
  }
  ASSERT_GT(planned, 0u);
  schedule_of("w2");
  auto models_in = [](const msg::schedule& s) {
    std::set<std::string> out;
    for (auto& d : s.devices)
      for (auto& x : d.sessions) out.insert(x.model);
    return out;
  };
  msg::load_report r;
  r.node = "fe";
  msg::link_load slow, fast;
  slow.node = "w1", slow.ms_per_mb = 8000, slow.base_ms = 0.3;
  fast.node = "w2", fast.ms_per_mb = 0.05, fast.base_ms = 0.3;
  r.links = {slow, fast};
  caf::anon_send(net->actors.monitor, r);
  run();
  auto w1 = schedule_of("w1"), w2 = schedule_of("w2");
  ASSERT_GT(std::max(w1.epoch, w2.epoch), planned) << "planned again at once";
  EXPECT_EQ(models_in(w1).count("big"), 0u) << "48 KB take 393 ms to cross w1's link";
  EXPECT_EQ(models_in(w2).count("big"), 1u);
  // Both links slow per byte: `big` is served all the same.
  slow.node = "w2";
  r.links = {slow};
  caf::anon_send(net->actors.monitor, r);
  run();
  w1 = schedule_of("w1"), w2 = schedule_of("w2");
  EXPECT_EQ(models_in(w1).count("big") + models_in(w2).count("big"), 1u) << "placed on one of them";
}

TEST_F(controller_fixture, serves_while_a_plan_is_pending_and_a_stale_plan_is_not_applied) {
  auto held = std::make_shared<held_plans>();
  start("nexus", held);
  for (std::string w : {"w1", "w2"}) {
    reg(w, {"worker"}, 7, 0);
    reg(w, {"worker"}, 7, schedule_of(w).epoch);
  }
  routed();
  for (int s = 0; s < 5 && held->promises.empty(); ++s) second_at(300);
  ASSERT_EQ(held->promises.size(), 1u) << "an epoch is being planned";
  // Registrations, routing and heartbeat losses are served while it plans.
  reg("fe", {"frontend"}, 2, 0);
  EXPECT_EQ(routed(), "w1,w2") << "a frontend that registers gets the current table at once";
  caf::anon_send(net->actors.controller, peer_down_atom::value, std::string("w1"));
  run();
  EXPECT_EQ(routed(), "w2") << "w1 leaves routing at once";
  EXPECT_EQ(schedule_of("w2").epoch, 0u) << "no plan applied yet";
  // The plan made before w1 was lost is stale: the controller plans again instead of applying it.
  caf::anon_send(held->self, tick_atom::value, size_t{0});
  run();
  EXPECT_EQ(schedule_of("w2").epoch, 0u) << "the stale plan was not applied";
  ASSERT_EQ(held->promises.size(), 2u) << "a new plan for the survivors";
  for (auto& slot : held->plans[1].input.slots) EXPECT_EQ(slot.node, "w2");
  caf::anon_send(held->self, tick_atom::value, size_t{1});
  run();
  auto s = schedule_of("w2");
  ASSERT_GT(s.epoch, 0u) << "the fresh plan is applied";
  EXPECT_FALSE(s.devices.empty());
  EXPECT_EQ(schedule_of("w1").epoch, 0u);
}

// A surge is planned for within two beacons of its start, whatever min_epoch_s says (here as long
// as epoch_s): the plan made for a light load carries too little for it.
TEST_F(controller_fixture, an_overloaded_pipeline_is_planned_again_within_two_beacons) {
  auto text = yaml("nexus");
  text.replace(text.find("min_epoch_s: 5"), 14, "min_epoch_s: 30");
  start_with(text);
  ASSERT_GT(plan_on_both_workers_at(20), 0u) << "the light load was planned for";
  auto before = now();
  uint64_t surge_epoch = 0;
  int beacons = 0;
  while (beacons < 2 && !surge_epoch) {
    second_at(300);
    ++beacons;
    surge_epoch = std::max(schedule_of("w1").epoch, schedule_of("w2").epoch);
  }
  EXPECT_GT(surge_epoch, 0u) << "planned again within two beacons";
  EXPECT_LE(now() - before, std::chrono::seconds(2));
  // Not again for noise: the next seconds at the same load keep that plan.
  for (int s = 0; s < 3; ++s) second_at(300);
  EXPECT_EQ(schedule_of("w1").epoch, 0u);
  EXPECT_EQ(schedule_of("w2").epoch, 0u);
}

// A lull keeps the plan: seconds with no load never plan for nothing, and what an epoch on the
// period plans meanwhile (for the recent peak) runs the same sessions on the same devices.
TEST_F(controller_fixture, a_lull_keeps_the_sessions_where_they_are) {
  start("nexus");
  auto [w1, w2] = first_plan_at(300);
  ASSERT_GT(w1.epoch, 0u);
  for (int s = 0; s < 60; ++s) {
    second_at(0);
    for (auto [name, was] : {std::pair{"w1", &w1}, std::pair{"w2", &w2}}) {
      auto now = schedule_of(name);
      if (!now.epoch) continue;
      ASSERT_EQ(now.devices.size(), was->devices.size());
      for (size_t d = 0; d < now.devices.size(); ++d)
        EXPECT_EQ(now.devices[d].sessions, was->devices[d].sessions) << name << " second " << s;
    }
  }
}

// Online profile refresh: w1's batches of m run at twice the profile for three windows; the
// monitor tells the controller, which plans m at twice its profile at once: smaller batches, and
// the load one device carried needs two. One slow window alone changes nothing.
TEST_F(controller_fixture, a_model_that_runs_twice_its_profile_is_planned_again_at_what_it_measures) {
  auto text = yaml("nexus");
  text.replace(text.find("min_epoch_s: 5}"), 15, "min_epoch_s: 5, spares: false, peak_half_life_s: 0}");
  start_with(text);
  auto [w1, w2] = first_plan_at(100);
  ASSERT_GT(w1.epoch, 0u);
  auto largest_batch = [&] {
    uint32_t b = 0;
    for (auto* s : {&w1, &w2})
      for (auto& d : s->devices)
        for (auto& x : d.sessions) b = std::max(b, x.batch);
    return b;
  };
  // l(b) = 5b + 5 ms: batches of 8 (45 ms) fit the 100 ms SLO.
  EXPECT_EQ(largest_batch(), 8u);
  for (int s = 0; s < 12; ++s) second_at(100);
  EXPECT_EQ(schedule_of("w1").epoch, 0u) << "the plan holds at the same load";
  auto report = [&](double ratio) {
    msg::load_report r;
    r.node = "w1";
    r.window_s = 1;
    msg::session_load l;
    l.model = "m";
    l.arrived = 100;
    l.completed = 100;
    l.exec_batches = 20;
    l.expected_exec_ms = 20 * 45;
    l.exec_ms = ratio * l.expected_exec_ms;
    r.sessions.push_back(l);
    caf::anon_send(net->actors.monitor, r);
    run();
  };
  report(2);
  report(1);
  report(2);
  report(2);
  EXPECT_EQ(schedule_of("w1").epoch + schedule_of("w2").epoch, 0u) << "two slow windows in a row are not three";
  report(2);
  w1 = schedule_of("w1"), w2 = schedule_of("w2");
  ASSERT_GT(w1.epoch + w2.epoch, 0u) << "planned again at once";
  // At 10b + 10 ms, batches of 4 (50 ms) are the largest that fit: 80 queries/s a device, two
  // devices for 100 (and headroom). The devices are told the scale (their early drop).
  EXPECT_EQ(largest_batch(), 4u);
  EXPECT_EQ(sessions(w1) + sessions(w2), 2u);
  for (auto* s : {&w1, &w2})
    for (auto& d : s->devices)
      for (auto& x : d.sessions) EXPECT_DOUBLE_EQ(x.latency_scale, 2);
}

// `sloserve apply` as the controller sees it: the text of a new file from an operator. The other
// nodes acknowledge what they are sent (`acks`: each with no problem), unless told otherwise.
msg::apply_reply apply_text(controller_fixture& f, const std::string& text, bool dry_run = false, bool acks = true) {
  msg::apply_request rq;
  rq.token = 7;
  rq.text = text;
  rq.file = "new.yaml";
  rq.dry_run = dry_run;
  caf::anon_send(f.net->actors.controller, admin_call{"operator", rq});
  f.run();
  for (auto& [node, e] : f.net->sent)
    if (auto* u = std::get_if<msg::config_update>(&e.content); u && acks)
      caf::anon_send(f.net->actors.controller, msg::config_ack{u->revision, node, {}});
  f.run();
  msg::apply_reply out;
  for (auto& [client, b] : f.net->replies)
    if (auto* r = std::get_if<msg::apply_reply>(&b)) out = *r;
  f.net->replies.clear();
  return out;
}

std::string with_second_model(const std::string& base) {
  auto text = base;
  auto at = text.find("pipelines:");
  text.insert(
      at,
      "  - {name: m2, input: {dtype: float32, shape: [2]}, output: {dtype: float32, shape: [2]}, max_batch: 8,\n"
      "     profile: {alpha_ms: 5, beta_ms: 5}, load_ms: 300}\n");
  at = text.find("scheduler:");
  text.insert(at, "  - {name: p2, slo_ms: 200, stages: [{name: s, model: m2}]}\n");
  return text;
}

// Make before break: after an apply brings a model, the frontends' table routes to it only once
// the worker acknowledged the schedule that loads it, and the model that was there keeps its
// route throughout.
TEST_F(controller_fixture, an_apply_routes_a_new_model_only_once_its_worker_has_loaded_it) {
  start("static");
  reg("w1", {"worker"}, 7, 0);
  reg("w1", {"worker"}, 7, schedule_of("w1").epoch);
  EXPECT_EQ(routed(), "w1");
  auto reply = apply_text(*this, with_second_model(yaml("static")));
  ASSERT_TRUE(reply.ok) << reply.reason;
  EXPECT_EQ(reply.changes, (std::vector<std::string>{"+ model 'm2'", "+ pipeline 'p2'"}));
  ASSERT_FALSE(reply.plan.empty());
  EXPECT_EQ(reply.plan[0], "load m2 on w1 device 0, then route to it");
  EXPECT_NE(reply.revision, 0u);
  // Every other node got the file before any schedule made for it.
  std::set<std::string> updated;
  for (auto& [node, u] : net->take<msg::config_update>()) {
    updated.insert(node);
    EXPECT_EQ(u.revision, reply.revision);
    EXPECT_EQ(u.file, "new.yaml");
  }
  EXPECT_EQ(updated, (std::set<std::string>{"fe", "w1", "w2"}));
  auto s = schedule_of("w1");
  ASSERT_GT(s.epoch, 0u);
  ASSERT_EQ(s.devices.size(), 1u);
  EXPECT_EQ(s.devices[0].sessions.size(), 2u) << "m stays, m2 joins";
  auto tables = net->take<msg::routing_table>();
  ASSERT_FALSE(tables.empty());
  for (auto& r : tables.back().second.routes) {
    if (r.model == "m2") {
      EXPECT_TRUE(r.instances.empty()) << "not routed while it loads";
    }
  }
  reg("w1", {"worker"}, 7, s.epoch);  // loaded and warm
  net->take<msg::config_update>();    // (it registered as running the old file: sent it again)
  tables = net->take<msg::routing_table>();
  ASSERT_FALSE(tables.empty());
  std::set<std::string> models;
  for (auto& r : tables.back().second.routes)
    if (!r.instances.empty()) models.insert(r.model);
  EXPECT_EQ(models, (std::set<std::string>{"m", "m2"}));
  // A node that registers with the file it started with gets the applied one again.
  msg::register_node again;
  again.node = "fe";
  again.roles = {"frontend"};
  again.schedule_epoch = s.epoch;
  caf::anon_send(net->actors.controller, again);
  run();
  auto resent = net->take<msg::config_update>();
  ASSERT_EQ(resent.size(), 1u);
  EXPECT_EQ(resent[0].first, "fe");
  again.config_revision = reply.revision;
  caf::anon_send(net->actors.controller, again);
  run();
  EXPECT_TRUE(net->take<msg::config_update>().empty()) << "it runs the applied one";
}

// The caller of an apply hears what each node made of it, once all have said: a node that kept a
// model's old file, or that does not answer within the wait, makes the answer not ok.
TEST_F(controller_fixture, an_apply_is_answered_with_what_every_node_made_of_it) {
  start("static");
  reg("w1", {"worker"}, 7, 0);
  auto reply = apply_text(*this, with_second_model(yaml("static")), false, false);
  EXPECT_EQ(reply.token, 0u) << "not answered before the nodes have acknowledged";
  auto updates = net->take<msg::config_update>();
  ASSERT_EQ(updates.size(), 3u);
  auto revision = updates[0].second.revision;
  auto ack = [&](const std::string& node, std::vector<std::string> problems) {
    caf::anon_send(net->actors.controller, msg::config_ack{revision, node, std::move(problems)});
    run();
  };
  auto answer = [&] {
    msg::apply_reply out;
    for (auto& [client, b] : net->replies)
      if (auto* r = std::get_if<msg::apply_reply>(&b)) out = *r;
    net->replies.clear();
    return out;
  };
  ack("fe", {});
  ack("w1", {"device 0 kept /m/a.pt for model 'm': cannot open /m/b.pt"});
  ack("w1", {});  // a second word from a node changes nothing
  EXPECT_EQ(answer().token, 0u) << "w2 has not answered";
  advance(20s);
  reply = answer();
  EXPECT_EQ(reply.token, 7u);
  EXPECT_FALSE(reply.ok);
  EXPECT_EQ(reply.revision, revision);
  EXPECT_EQ(reply.nodes, (std::vector<std::string>{"ctl: applied", "fe: applied",
                                                   "w1: device 0 kept /m/a.pt for model 'm': cannot open /m/b.pt",
                                                   "w2: no acknowledgement within 20 s"}));
  EXPECT_NE(reply.reason.find("2 of 4 nodes do not run all of revision"), std::string::npos) << reply.reason;
  // All acknowledged: answered at once, ok.
  auto back = apply_text(*this, yaml("static"));
  EXPECT_TRUE(back.ok) << back.reason;
  EXPECT_EQ(back.nodes, (std::vector<std::string>{"ctl: applied", "fe: applied", "w1: applied", "w2: applied"}));
}

TEST_F(controller_fixture, a_refused_or_dry_apply_changes_nothing) {
  start("static");
  reg("w1", {"worker"}, 7, 0);
  reg("w1", {"worker"}, 7, schedule_of("w1").epoch);
  routed();
  auto moved = yaml("static");
  moved.replace(moved.find("{name: w2, address: tcp://127.0.0.1:0"), 37, "{name: w2, address: tcp://127.0.0.9:0");
  auto reply = apply_text(*this, with_second_model(moved));
  EXPECT_FALSE(reply.ok);
  EXPECT_EQ(reply.reason.substr(0, 13), "new.yaml:6:25") << reply.reason;
  EXPECT_NE(reply.reason.find("node 'w2': 'address' cannot change"), std::string::npos) << reply.reason;
  auto bad = yaml("static") + "bogus: 1\n";
  reply = apply_text(*this, bad);
  EXPECT_FALSE(reply.ok);
  EXPECT_NE(reply.reason.find("new.yaml:"), std::string::npos) << reply.reason;
  EXPECT_NE(reply.reason.find("unknown key 'bogus'"), std::string::npos) << reply.reason;
  reply = apply_text(*this, with_second_model(yaml("static")), true);
  EXPECT_TRUE(reply.ok) << reply.reason;
  EXPECT_EQ(reply.changes.size(), 2u);
  EXPECT_EQ(reply.revision, 0u) << "still the file it started with";
  EXPECT_TRUE(net->take<msg::config_update>().empty());
  EXPECT_EQ(schedule_of("w1").epoch, 0u);
  EXPECT_EQ(routed(), "-");
  reply = apply_text(*this, yaml("static"));
  EXPECT_TRUE(reply.ok);
  EXPECT_TRUE(reply.changes.empty());
  EXPECT_TRUE(net->take<msg::config_update>().empty());
}

TEST(worker_registry, serves_only_on_a_schedule_of_this_controller) {
  worker_registry r(1000);
  auto j = r.on_register("w", 5, 0);
  EXPECT_TRUE(j.fresh);
  EXPECT_FALSE(j.changed);
  EXPECT_FALSE(r.serving("w"));
  EXPECT_TRUE(r.up("w"));
  EXPECT_TRUE(r.on_register("w", 5, 999).changed) << "the epoch it runs changed";
  EXPECT_FALSE(r.serving("w")) << "an epoch of an earlier controller serves nothing";
  j = r.on_register("w", 5, 1001);
  EXPECT_TRUE(j.changed);
  EXPECT_FALSE(j.fresh);
  EXPECT_TRUE(r.serving("w"));
  EXPECT_EQ(r.serving_count(), 1u);
  EXPECT_TRUE(r.on_register("w", 6, 0).restarted);
  EXPECT_FALSE(r.serving("w"));
}

TEST(worker_registry, a_leaving_worker_stands_in_until_it_is_gone) {
  worker_registry r(1000);
  r.on_register("w", 5, 1001);
  auto left = r.on_leave("w");
  EXPECT_TRUE(left.was_up);
  EXPECT_TRUE(left.was_serving);
  EXPECT_FALSE(r.up("w"));
  EXPECT_FALSE(r.serving("w"));
  EXPECT_TRUE(r.standing_in("w"));
  EXPECT_FALSE(r.on_leave("w").was_up) << "a second request to leave changes nothing";
  EXPECT_TRUE(r.on_lost("w").stopped_draining);
  EXPECT_FALSE(r.standing_in("w"));
  EXPECT_TRUE(r.on_register("w", 5, 1001).came_back);
  EXPECT_TRUE(r.up_workers() == std::vector<std::string>{"w"});
  EXPECT_FALSE(r.on_lost("nobody").was_up);
}

TEST(route_publisher, an_instance_routes_from_the_epoch_that_brought_it) {
  cluster_placement p;
  p.schedules["w"] = {5, {{0, 0, {{"m", 4}}}}};
  p.table.routes = {{"m", {{"w", 0, 1.0}}}};
  route_publisher pub;
  pub.adopt(p);
  worker_registry r(0);
  r.on_register("w", 1, 4);
  EXPECT_TRUE(pub.live_table(p, r, 9).routes[0].instances.empty()) << "runs epoch 4, the model came with 5";
  EXPECT_TRUE(pub.acknowledged(p, r).empty());
  r.on_register("w", 1, 5);
  auto t = pub.publish(p, r, 9);
  EXPECT_EQ(t.epoch, 9u);
  ASSERT_EQ(t.routes[0].instances.size(), 1u);
  ASSERT_EQ(pub.acknowledged(p, r).size(), 1u);
  EXPECT_EQ(pub.acknowledged(p, r)[0].node, "w");
  // A later epoch that keeps the model there does not take it out of routing.
  p.schedules["w"].epoch = 6;
  pub.adopt(p);
  EXPECT_EQ(pub.live_table(p, r, 10).routes[0].instances.size(), 1u);
}

}  // namespace
}  // namespace sloserve
