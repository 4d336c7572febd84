// The scaler on a deterministic scheduler with an injected clock: a rate step makes each policy
// act within one control period; the local provisioner's placement; and the controller routing
// to a new instance only once its worker acknowledges the schedule that brought it.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "actors/roles.hpp"
#include "caf_fixture.hpp"
#include "control/provisioner.hpp"

namespace sloserve {
namespace {

using namespace std::chrono_literals;
using testing::caf_fixture;
using testing::recording_link;

// l(b, c) = 10·b/c + 20/c + b + 2 ms: one core carries 30 req/s at b = 1, 72 at b = 8.
// Load reports come once a beacon; second_at reports once a second.
std::string yaml(const std::string& policy, int beacon_ms = 1000) {
  return R"(
nodes:
  - {name: ctl, address: tcp://127.0.0.1:0, roles: [controller, frontend]}
  - {name: w1, address: tcp://127.0.0.1:0, roles: [worker], cores: 16, devices: [{kind: emulated, count: 6}]}
  - {name: w2, address: tcp://127.0.0.1:0, roles: [worker], cores: 4, devices: [{kind: emulated, count: 2}]}
models:
  - name: m
    input: {dtype: float32, shape: [2]}
    output: {dtype: float32, shape: [2]}
    max_batch: 8
    profile: {alpha_ms: 11, beta_ms: 22}
    cores: {gamma_ms: 10, epsilon_ms: 20, delta_ms: 1, eta_ms: 2}
pipelines:
  - {name: p, slo_ms: 200, stages: [{name: s, model: m}]}
scaler: {policy: )" +
         policy + R"(, vertical_s: 1, horizontal_s: 10, max_cores: 8}
runtime: {beacon_ms: )" +
         std::to_string(beacon_ms) + "}\n";
}

double capacity(const deployment& d) {
  core_latency l{10, 20, 1, 2};
  double sum = 0;
  for (auto& i : d.instances) sum += l.throughput(static_cast<int>(i.batch), static_cast<int>(i.cores));
  return sum;
}

// Instances per model in a deployment.
std::map<std::string, int> models_of(const deployment& d) {
  std::map<std::string, int> n;
  for (auto& i : d.instances) ++n[i.model];
  return n;
}

controller_actor recording_controller(caf::actor_system& sys, std::shared_ptr<std::vector<deployment>> out) {
  return sys.spawn([out]() -> controller_actor::behavior_type {
    return {
        [](start_atom) {},
        [](msg::register_node&) {},
        [](admin_call&) {},
        [](msg::config_ack&) {},
        [](applied_atom, uint64_t) {},
        [out](deployment& d) { out->push_back(std::move(d)); },
        [](beacon_atom) {},
        [](tick_atom) {},
        [](clients_atom) {},
        [](round_atom) {},
        [](peer_down_atom, const std::string&) {},
        [](peer_up_atom, const std::string&) {},
        [](link_verdicts&) {},
        [](profile_scales&) {},
    };
  });
}

struct scaler_fixture : caf_fixture, ::testing::Test {
  void start(const std::string& policy) { start_with(yaml(policy)); }
  void start_with(const std::string& text) {
    cfg_ = testing::parse_or_die(text);
    net = std::make_shared<recording_link>("ctl");
    actor_args args{cfg_, net, 1};
    net->actors.monitor = keep(spawn_monitor(*sys, args));
    net->actors.controller = keep(recording_controller(*sys, deployments));
    net->actors.scaler = keep(spawn_scaler(*sys, args));
    caf::anon_send(net->actors.scaler, start_atom::value);
    caf::anon_send(net->actors.scaler, worker_set{{"w1", "w2"}});
    run();
  }
  // One second of load as the workers would report it: `rate` arrivals over the instances.
  void second_at(double rate) {
    report(rate, 1);
    advance(1s);
  }
  // Load reports over the last `window_s` seconds from each worker, with the clock left where it
  // is: `rate` arrivals spread over the instances that serve. With `loading`, only the oldest
  // instance serves; the others are still loading their model: the controller has not had
  // their workers' acknowledgements, and they report nothing.
  void report(double rate, double window_s) {
    auto& d = deployments->back();
    size_t serving = loading ? 1 : d.instances.size();
    worker_set status{up, {}};
    for (size_t k = 0; k < serving; ++k)
      status.acknowledged.push_back({d.instances[k].node, d.instances[k].device, "m"});
    caf::anon_send(net->actors.scaler, status);
    for (std::string node : {"w1", "w2"}) {
      msg::load_report r;
      r.node = node;
      r.window_s = window_s;
      for (size_t k = 0; k < serving; ++k)
        if (d.instances[k].node == node)
          r.sessions.push_back({"m", d.instances[k].device,
                                static_cast<uint64_t>(rate * window_s / static_cast<double>(serving)), 0, 0, 0, 0,
                                150});
      caf::anon_send(net->actors.monitor, r);
    }
    run();
  }
  bool loading = false;
  std::vector<std::string> up{"w1", "w2"};
  // Seconds after a step from 40 to 300 req/s until the deployment carries 300 req/s.
  int seconds_to_carry_a_step() {
    for (int s = 0; s < 12; ++s) second_at(40);
    EXPECT_LT(capacity(deployments->back()), 300) << "it had capacity for the step before it came";
    for (int s = 1; s <= 30; ++s) {
      second_at(300);
      if (capacity(deployments->back()) >= 300) return s;
    }
    return -1;
  }
  std::shared_ptr<const cluster_config> cfg_;
  std::shared_ptr<recording_link> net;
  std::shared_ptr<std::vector<deployment>> deployments = std::make_shared<std::vector<deployment>>();
};

TEST_F(scaler_fixture, placement_starts_with_one_instance_per_stage) {
  start("biscale");
  ASSERT_FALSE(deployments->empty());
  ASSERT_EQ(deployments->back().instances.size(), 1u);
  EXPECT_EQ(deployments->back().instances[0].model, "m");
  EXPECT_EQ(deployments->back().instances[0].cores, 1u);
}

TEST_F(scaler_fixture, sponge_and_biscale_split_the_slo_by_the_query_analyzer) {
  // det costs four times what cls does: the split gives det the larger share, where the even
  // split gave each 100 ms.
  for (auto policy : {"sponge", "biscale"}) {
    deployments->clear();
    start_with(R"(
nodes:
  - {name: ctl, address: tcp://127.0.0.1:0, roles: [controller, frontend]}
  - {name: w1, address: tcp://127.0.0.1:0, roles: [worker], cores: 16, devices: [{kind: emulated, count: 6}]}
models:
  - {name: det, input: {dtype: float32, shape: [2]}, output: {dtype: float32, shape: [2]}, max_batch: 8,
     profile: {alpha_ms: 11, beta_ms: 22}, cores: {gamma_ms: 10, epsilon_ms: 20, delta_ms: 1, eta_ms: 2}}
  - {name: cls, input: {dtype: float32, shape: [2]}, output: {dtype: float32, shape: [2]}, max_batch: 8,
     profile: {alpha_ms: 2.75, beta_ms: 5.5}, cores: {gamma_ms: 2.5, epsilon_ms: 5, delta_ms: 0.25, eta_ms: 0.5}}
pipelines:
  - {name: p, slo_ms: 200, stages: [{name: det, model: det}, {name: cls, model: cls, after: [det]}]}
scaler: {policy: )" +
               std::string(policy) + R"(, max_cores: 8}
)");
    ASSERT_FALSE(deployments->empty()) << policy;
    auto& budgets = deployments->back().budgets;
    ASSERT_EQ(budgets.size(), 2u) << policy;
    double det = budgets[0].stage == "det" ? budgets[0].budget_ms : budgets[1].budget_ms;
    double cls = budgets[0].stage == "det" ? budgets[1].budget_ms : budgets[0].budget_ms;
    EXPECT_GT(det, 120) << policy;
    EXPECT_NEAR(det + cls, 200, 1e-6) << policy;
    // Each share still lets a one-core instance run a batch of one.
    EXPECT_LE(2 * (core_latency{2.5, 5, 0.25, 0.5}.at(1, 1)), cls) << policy;
  }
}

TEST_F(scaler_fixture, sponge_acts_on_a_rate_step_within_one_vertical_period) {
  start("sponge");
  EXPECT_EQ(seconds_to_carry_a_step(), 1);
  EXPECT_EQ(deployments->back().instances.size(), 1u);  // in place
  EXPECT_GT(deployments->back().instances[0].cores, 1u);
}

TEST_F(scaler_fixture, biscale_acts_on_a_rate_step_within_one_vertical_period_then_goes_horizontal) {
  start("biscale");
  EXPECT_EQ(seconds_to_carry_a_step(), 1);
  auto surge = deployments->back();
  EXPECT_GT(surge.instances[0].cores, 1u);
  // Stable at 300 for a horizontal period: one-core instances replace most of the big one.
  // With 150 ms a one-core instance batches 4 (60.6 req/s); 330 req/s (10% headroom) would take
  // six of them, as many cores as instance 0 at two (batch 8, 133 req/s) and four more, which
  // leave more to spare.
  for (int s = 0; s < 21; ++s) second_at(300);
  auto settled = deployments->back();
  EXPECT_GT(settled.instances.size(), surge.instances.size());
  uint32_t cores = 0;
  for (size_t k = 0; k < settled.instances.size(); ++k) {
    cores += settled.instances[k].cores;
    if (k) {
      EXPECT_EQ(settled.instances[k].cores, 1u);
    }
  }
  EXPECT_LE(cores, 6u);
  EXPECT_LT(cores, surge.instances[0].cores + surge.instances.size() - 1);
  EXPECT_GE(capacity(settled), 300);
  // A lull keeps them (the recent peak, halved every peak_half_life_s = 300 s); back in once
  // the peak has decayed toward the load.
  for (int s = 0; s < 21; ++s) second_at(40);
  EXPECT_GE(capacity(deployments->back()), 300) << "a lull keeps the capacity";
  int waited = 21;
  while (waited < 1500 && capacity(deployments->back()) >= 150) second_at(40), ++waited;
  EXPECT_LT(deployments->back().instances.size(), settled.instances.size());
  EXPECT_GT(waited, 300) << "not before the peak has halved";
}

// Settled on one-core instances, a surge beyond what instance 0 can take in place grows the
// running instances in place together (thesis P4.5.1.2) within a vertical period: none starts
// (no cold start), and the node's cores are shared among them.
TEST_F(scaler_fixture, biscale_grows_the_running_instances_in_place_for_a_surge_beyond_instance_0) {
  start("biscale");
  EXPECT_EQ(seconds_to_carry_a_step(), 1);
  for (int s = 0; s < 21; ++s) second_at(300);
  auto settled = deployments->back();
  ASSERT_GE(settled.instances.size(), 4u);
  second_at(650);
  auto grown = deployments->back();
  EXPECT_EQ(grown.instances.size(), settled.instances.size()) << "no instance started";
  size_t bigger = 0;
  for (auto& i : grown.instances) bigger += i.cores > 1;
  EXPECT_GE(bigger, 2u) << "more than instance 0 grew";
  EXPECT_GE(capacity(grown), 650);
}

// Make before break: when the horizontal loop moves load from instance 0 to new one-core
// instances, instance 0 keeps its cores until they serve (their models load first).
TEST_F(scaler_fixture, biscale_keeps_instance_0_s_cores_until_the_instances_it_starts_serve) {
  start("biscale");
  EXPECT_EQ(seconds_to_carry_a_step(), 1);
  auto surge = deployments->back();
  loading = true;
  for (int s = 0; s < 21; ++s) second_at(300);
  auto waiting = deployments->back();
  ASSERT_GT(waiting.instances.size(), surge.instances.size()) << "it went horizontal";
  EXPECT_EQ(waiting.instances[0].cores, surge.instances[0].cores) << "instance 0 shrank before the others served";
  loading = false;
  second_at(300);
  auto settled = deployments->back();
  EXPECT_LT(settled.instances[0].cores, surge.instances[0].cores);
  EXPECT_EQ(settled.instances.size(), waiting.instances.size());
  EXPECT_GE(capacity(settled), 300);
}

TEST_F(scaler_fixture, a_surge_seen_late_in_a_vertical_period_is_not_averaged_away_at_its_end) {
  // Polls every 250 ms, four to a vertical period. Whichever poll of the period first sees the
  // step, the shape stays sized for it through the period's end, where the polls' mean is far
  // below it.
  for (int offset = 0; offset < 4; ++offset) {
    deployments->clear();
    start_with(yaml("sponge", 250));
    for (int s = 0; s < 6; ++s) second_at(40);
    for (int k = 0; k < offset; ++k) advance(250ms);
    report(300, 0.25);
    for (int k = 0; k < 5; ++k) {
      advance(250ms);
      EXPECT_GE(capacity(deployments->back()), 300) << "step seen " << offset << " polls in, " << k << " polls after";
    }
  }
}

TEST_F(scaler_fixture, fa2_acts_on_a_rate_step_within_one_horizontal_period) {
  start("fa2");
  int s = seconds_to_carry_a_step();
  EXPECT_GE(s, 1);
  EXPECT_LE(s, 10);
  for (auto& i : deployments->back().instances) EXPECT_EQ(i.cores, 1u);
}

// FA2's central queue: the deployment names the plan's batch of m and the time it fills at
// the stage's rate, which the placement turns into whole batches in turn; without it, none.
TEST_F(scaler_fixture, fa2s_central_queue_deploys_the_planned_batch_and_its_fill_time) {
  auto text = yaml("fa2");
  text.replace(text.find("max_cores: 8}"), std::string("max_cores: 8}").size(), "max_cores: 8, central_queue: true}");
  start_with(text);
  for (int s = 0; s < 25; ++s) second_at(150);
  auto& d = deployments->back();
  ASSERT_EQ(d.in_turn.count("m"), 1u);
  auto t = d.in_turn.at("m");
  EXPECT_GE(t.batch, 2u) << "200 ms leaves room to batch";
  EXPECT_LE(t.batch, 8u);
  // b / λ at the planned rate: 150/s and the headroom above it.
  EXPECT_LE(t.fill_ms, t.batch * 1000.0 / 150);
  EXPECT_GE(t.fill_ms, t.batch * 1000.0 / (150 * 1.5));
  // Each instance's batch cap is at least the batch it is sent whole.
  for (auto& i : d.instances) EXPECT_GE(i.batch, t.batch);
}

TEST_F(scaler_fixture, without_a_central_queue_fa2_deploys_no_batches_in_turn) {
  start("fa2");
  for (int s = 0; s < 25; ++s) second_at(150);
  EXPECT_TRUE(deployments->back().in_turn.empty());
}

// The online profile refresh reaches the scaler: told that m runs at twice its profile, fa2
// sizes it so at the same load, with about twice the one-core instances.
// A canary under each scaler: the stage's two versions are sized apart, each for its own share
// of the traffic (75/25 of 240 req/s), both within the budget the stage gets, and the budgets
// routed name each version.
TEST_F(scaler_fixture, each_version_of_a_stage_is_sized_for_its_own_traffic) {
  for (auto policy : {"sponge", "biscale", "fa2"}) {
    deployments->clear();
    start_with(R"(
nodes:
  - {name: ctl, address: tcp://127.0.0.1:0, roles: [controller, frontend]}
  - {name: w1, address: tcp://127.0.0.1:0, roles: [worker], cores: 32, devices: [{kind: emulated, count: 12}]}
models:
  - {name: m, input: {dtype: float32, shape: [2]}, output: {dtype: float32, shape: [2]}, max_batch: 8,
     profile: {alpha_ms: 11, beta_ms: 22}, cores: {gamma_ms: 10, epsilon_ms: 20, delta_ms: 1, eta_ms: 2}}
  - {name: m, version: 2, input: {dtype: float32, shape: [2]}, output: {dtype: float32, shape: [2]}, max_batch: 8,
     profile: {alpha_ms: 11, beta_ms: 22}, cores: {gamma_ms: 10, epsilon_ms: 20, delta_ms: 1, eta_ms: 2}}
pipelines:
  - {name: p, slo_ms: 200, stages: [{name: s, model: m, versions: [{version: 1, weight: 75}, {version: 2, weight: 25}]}]}
scaler: {policy: )" +
               std::string(policy) + R"(, vertical_s: 1, horizontal_s: 10, max_cores: 8}
runtime: {beacon_ms: 1000}
)");
    ASSERT_FALSE(deployments->empty()) << policy;
    EXPECT_EQ(models_of(deployments->back()), (std::map<std::string, int>{{"m", 1}, {"m:v2", 1}})) << policy;
    const std::map<std::string, double> share{{"m", 0.75}, {"m:v2", 0.25}};
    for (int t = 0; t < 25; ++t) {
      auto& d = deployments->back();
      auto count = models_of(d);
      worker_set status{{"w1"}, {}};
      for (auto& i : d.instances) status.acknowledged.push_back({i.node, i.device, i.model});
      caf::anon_send(net->actors.scaler, status);
      msg::load_report r;
      r.node = "w1";
      r.window_s = 1;
      for (auto& i : d.instances)
        r.sessions.push_back(
            {i.model, i.device, static_cast<uint64_t>(240 * share.at(i.model) / count[i.model]), 0, 0, 0, 0, 150});
      caf::anon_send(net->actors.monitor, r);
      run();
      advance(1s);
    }
    auto& d = deployments->back();
    core_latency l{10, 20, 1, 2};
    std::map<std::string, double> carried;
    for (auto& i : d.instances) carried[i.model] += l.throughput(static_cast<int>(i.batch), static_cast<int>(i.cores));
    EXPECT_GE(carried["m"], 180) << policy;
    EXPECT_GE(carried["m:v2"], 60) << policy;
    EXPECT_LT(carried["m:v2"], carried["m"]) << policy << ": the canary is sized for its share, not the stage's";
    // The budgets last routed (a deployment carries them when they change: FA2's every horizontal
    // period; sponge's and biscale's split of a one-stage pipeline never moves from the whole SLO).
    auto routed = std::find_if(deployments->rbegin(), deployments->rend(), [](auto& x) { return !x.budgets.empty(); });
    if (routed == deployments->rend()) {
      EXPECT_NE(std::string(policy), "fa2");
      continue;
    }
    auto& b = routed->budgets;
    ASSERT_EQ(b.size(), 2u) << policy;
    EXPECT_EQ(b[0].stage, "s");
    EXPECT_EQ(b[1].stage, "s");
    EXPECT_NE(b[0].model, b[1].model) << policy;
    EXPECT_DOUBLE_EQ(b[0].budget_ms, b[1].budget_ms) << policy;
  }
}

TEST_F(scaler_fixture, a_model_refreshed_to_twice_its_profile_gets_about_twice_the_instances) {
  start("fa2");
  for (int s = 0; s < 25; ++s) second_at(150);
  auto before = deployments->back().instances.size();
  ASSERT_GE(before, 2u);
  caf::anon_send(net->actors.scaler, profile_scales{{{"m", 2.0}}});
  run();
  for (int s = 0; s < 25; ++s) second_at(150);
  auto after = deployments->back().instances.size();
  EXPECT_GE(static_cast<double>(after), 1.6 * static_cast<double>(before)) << before << " -> " << after;
  EXPECT_LE(static_cast<double>(after), 2.6 * static_cast<double>(before)) << before << " -> " << after;
}

TEST_F(scaler_fixture, lost_workers_lose_their_instances_and_the_cost_is_counted) {
  start("biscale");
  for (int s = 0; s < 25; ++s) second_at(300);
  auto before = deployments->back().instances.size();
  ASSERT_GT(before, 1u);
  up = {"w2"};
  caf::anon_send(net->actors.scaler, worker_set{up, {}});
  run();
  // Everything now runs on w2, within its 2 slots.
  for (auto& i : deployments->back().instances) EXPECT_EQ(i.node, "w2");
  EXPECT_LE(deployments->back().instances.size(), 2u);
  caf::scoped_actor self{*sys};
  // The stats request runs on the test scheduler.
  scaler_stats got;
  self->send(net->actors.scaler, stats_atom::value);
  run();
  self->receive([&](const scaler_stats& s) { got = s; }, caf::after(0s) >> [] {});
  EXPECT_NEAR(got.seconds, 25, 1e-6);
  EXPECT_GT(got.instance_seconds, 25);
  EXPECT_GE(got.core_seconds, got.instance_seconds);
  EXPECT_GT(got.horizontal_changes, 0u);
}

// IPA picks the variant: the accurate one (two cores a replica) while the load is light; at
// 1,000 req/s, 13 of its replicas (26 cores) cost more than its 8.55 points of accuracy are worth
// (beta 0.01 a core), and three one-core replicas of the small one take over. Make before break:
// the big one serves until the small ones do, and the table names the small one from then on.
TEST_F(scaler_fixture, ipa_switches_variants_as_the_load_changes_and_the_old_one_serves_until_the_new_one_does) {
  start_with(R"(
nodes:
  - {name: ctl, address: tcp://127.0.0.1:0, roles: [controller, frontend]}
  - {name: w1, address: tcp://127.0.0.1:0, roles: [worker], cores: 32, devices: [{kind: emulated, count: 8}]}
models:
  - {name: big, input: {dtype: float32, shape: [2]}, output: {dtype: float32, shape: [2]}, max_batch: 8,
     profile: {alpha_ms: 10, beta_ms: 10}, accuracy: 78.31, base_cores: 2}
  - {name: small, input: {dtype: float32, shape: [2]}, output: {dtype: float32, shape: [2]}, max_batch: 8,
     profile: {alpha_ms: 2, beta_ms: 2}, accuracy: 69.76}
pipelines:
  - {name: p, slo_ms: 200, stages: [{name: s, variants: [small, big]}]}
scheduler: {policy: ipa, ipa: {alpha: 1, beta: 0.01, delta: 0.0001, interval_s: 5}}
scaler: {vertical_s: 1, predictor: recent_max}
)");
  ASSERT_EQ(cfg_->scaler.policy, scaler_policy::ipa);
  auto budget_model = [](const deployment& d) { return d.budgets.empty() ? "" : d.budgets[0].model; };
  // One second at `rate`, spread over the instances of `serving` (acknowledged by the controller).
  auto second = [&](double rate, const std::string& serving) {
    auto& d = deployments->back();
    worker_set status{{"w1"}, {}};
    msg::load_report r;
    r.node = "w1";
    r.window_s = 1;
    for (auto& i : d.instances) {
      status.acknowledged.push_back({i.node, i.device, i.model});
      if (i.model == serving)
        r.sessions.push_back({i.model, i.device, static_cast<uint64_t>(rate / models_of(d)[serving]), 0, 0, 0, 0, 150});
    }
    caf::anon_send(net->actors.scaler, status);
    caf::anon_send(net->actors.monitor, r);
    run();
    advance(1s);
  };
  advance(1s);
  ASSERT_FALSE(deployments->empty());
  EXPECT_EQ(models_of(deployments->back()), (std::map<std::string, int>{{"big", 1}}));
  EXPECT_EQ(deployments->back().instances[0].cores, 2u) << "a replica of big has its base cores";
  EXPECT_EQ(budget_model(deployments->back()), "big");
  for (int k = 0; k < 4; ++k) second(20, "big");
  EXPECT_EQ(models_of(deployments->back()), (std::map<std::string, int>{{"big", 1}}));
  // The load rises; at the next interval IPA moves to small and starts its replicas beside big.
  for (int k = 0; k < 6 && budget_model(deployments->back()) != "small"; ++k) {
    auto d = deployments->back();
    worker_set status{{"w1"}, {}};
    for (auto& i : d.instances)
      if (i.model == "big") status.acknowledged.push_back({i.node, i.device, i.model});
    caf::anon_send(net->actors.scaler, status);
    msg::load_report r{"w1", 1, {{"big", d.instances[0].device, 1000, 0, 0, 0, 0, 150}}, {}, {}};
    caf::anon_send(net->actors.monitor, r);
    run();
    advance(1s);
  }
  auto switching = deployments->back();
  ASSERT_EQ(budget_model(switching), "small");
  auto n = models_of(switching);
  EXPECT_EQ(n["small"], 3) << "1,100 req/s (10% headroom) over small's 444 req/s at batch 8";
  EXPECT_GE(n["big"], 1) << "big went before small served";
  // Once the controller acknowledges small's replicas, big stops.
  worker_set status{{"w1"}, {}};
  for (auto& i : switching.instances) status.acknowledged.push_back({i.node, i.device, i.model});
  caf::anon_send(net->actors.scaler, status);
  run();
  advance(1s);
  EXPECT_EQ(models_of(deployments->back()), (std::map<std::string, int>{{"small", 3}}));
}

// IPA chooses a cascade as it chooses a variant. `small` (70%) is sure of 70% of its requests,
// `big` (90%) answers the rest. While the load is light big alone is the better choice (one
// replica, 90%); at 1,000 req/s big alone takes 14 replicas (beta 0.03 a core) and the cascade
// (76%) about half as many: small's replicas start, big keeps a few for what falls through, the
// table names small with the first model's share of the stage's budget, and the fall-through is
// measured from the models' traffic. When the load goes, big alone again: small stops once big's
// replicas serve.
TEST_F(scaler_fixture, ipa_chooses_a_cascade_under_load_and_its_second_alone_when_light) {
  start_with(R"(
nodes:
  - {name: ctl, address: tcp://127.0.0.1:0, roles: [controller, frontend]}
  - {name: w1, address: tcp://127.0.0.1:0, roles: [worker], cores: 32, devices: [{kind: emulated, count: 24}]}
models:
  - {name: big, input: {dtype: float32, shape: [2]}, output: {dtype: float32, shape: [2]}, max_batch: 8,
     profile: {alpha_ms: 10, beta_ms: 20}, accuracy: 90}
  - {name: small, input: {dtype: float32, shape: [2]}, output: {dtype: float32, shape: [2]}, max_batch: 8,
     profile: {alpha_ms: 1, beta_ms: 2}, accuracy: 70, pass_rate: 0.7}
pipelines:
  - {name: p, slo_ms: 200, stages: [{name: s, cascade: {models: [small, big]}}]}
scheduler: {policy: ipa, ipa: {alpha: 1, beta: 0.03, delta: 0.0001, interval_s: 5}}
scaler: {vertical_s: 1, predictor: recent_max}
runtime: {beacon_ms: 1000}
)");
  ASSERT_EQ(cfg_->scaler.policy, scaler_policy::ipa);
  // One second: with `ack_all` (every instance acknowledged) `rate` requests over small's
  // instances and `fell` over big's (all of `rate` while small has none); else only big's are
  // acknowledged, and serve all of `rate`.
  auto second = [&](double rate, double fell, bool ack_all) {
    auto& d = deployments->back();
    auto n = models_of(d);
    worker_set status{{"w1"}, {}};
    msg::load_report r;
    r.node = "w1";
    r.window_s = 1;
    bool cascading = ack_all && n["small"] > 0;
    for (auto& i : d.instances) {
      if (ack_all || i.model == "big") status.acknowledged.push_back({i.node, i.device, i.model});
      double x = i.model == "small" ? rate / n["small"] : (cascading ? fell : rate) / n["big"];
      if (i.model == "small" && !ack_all) continue;
      r.sessions.push_back({i.model, i.device, static_cast<uint64_t>(std::lround(x)), 0, 0, 0, 0, 150});
    }
    caf::anon_send(net->actors.scaler, status);
    caf::anon_send(net->actors.monitor, r);
    run();
    advance(1s);
  };
  advance(1s);
  ASSERT_FALSE(deployments->empty());
  for (int k = 0; k < 4; ++k) second(20, 0, true);
  EXPECT_EQ(models_of(deployments->back()), (std::map<std::string, int>{{"big", 1}})) << "big alone";
  ASSERT_EQ(deployments->back().budgets.size(), 1u);
  EXPECT_EQ(deployments->back().budgets[0].model, "big");
  EXPECT_EQ(deployments->back().budgets[0].first_share, 0) << "no cascade runs";
  // The load rises: IPA moves to the cascade; big serves meanwhile (small not yet acknowledged).
  for (int k = 0; k < 6 && deployments->back().budgets[0].model != "small"; ++k) second(1000, 0, false);
  auto switching = deployments->back();
  ASSERT_EQ(switching.budgets[0].model, "small");
  auto n = models_of(switching);
  EXPECT_GE(n["small"], 2) << "1,100 req/s over small's 800 req/s at batch 8";
  EXPECT_GE(n["big"], 1) << "the second stays for what falls through";
  EXPECT_LT(n["big"], 14) << "fewer than big alone needs";
  double share = switching.budgets[0].first_share;
  EXPECT_GT(share, 0);
  EXPECT_LT(share, 0.5) << "small's part of the stage is the short one";
  // Served as a cascade, 10% falling through (not the declared 30%): the next plan has fewer of big.
  for (int k = 0; k < 12; ++k) second(1000, 100, true);
  auto measured = models_of(deployments->back());
  EXPECT_EQ(deployments->back().budgets[0].model, "small");
  EXPECT_LT(measured["big"], n["big"]) << "sized for the fall-through measured";
  EXPECT_GE(measured["big"], 1);
  // The load goes: big alone; small stops once big's replicas serve.
  for (int k = 0; k < 40 && deployments->back().budgets[0].model != "big"; ++k) second(20, 2, true);
  EXPECT_EQ(deployments->back().budgets[0].model, "big");
  second(20, 0, true);
  second(20, 0, true);
  EXPECT_EQ(models_of(deployments->back()), (std::map<std::string, int>{{"big", 1}}));
}

TEST(local_provisioner, places_within_free_slots_node_cores_and_limits) {
  auto cfg = testing::parse_or_die(yaml("biscale"));
  std::vector<deployment> published;
  local_provisioner p(*cfg, [&](deployment d) { published.push_back(std::move(d)); });
  EXPECT_FALSE(p.start("m", 1, 1)) << "no worker is up yet";
  p.set_workers_up({"w1", "w2"});
  // The node with the most free cores first: w1 (16) over w2 (4).
  auto a = p.start("m", 8, 4);
  ASSERT_TRUE(a);
  EXPECT_EQ(p.instances()[0].node, "w1");
  EXPECT_EQ(p.free_cores("w1"), 8);
  // Growing in place is granted only up to the node's free cores and max_cores.
  EXPECT_EQ(p.resize(*a, 12, 4), 8);
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(p.start("m", 1, 1));
  // w1 has 6 slots and 8 + 5 = 13 of 16 cores used; w2 takes the next two.
  EXPECT_TRUE(p.start("m", 1, 1));
  EXPECT_TRUE(p.start("m", 1, 1));
  EXPECT_FALSE(p.start("m", 1, 1)) << "every slot is taken";
  EXPECT_TRUE(p.commit());
  EXPECT_FALSE(p.commit()) << "nothing changed";
  ASSERT_EQ(published.size(), 1u);
  EXPECT_EQ(published[0].instances.size(), 8u);
  // Losing w1 loses its six.
  p.set_workers_up({"w2"});
  EXPECT_EQ(p.instances().size(), 2u);
  p.stop(p.instances()[0].id);
  EXPECT_EQ(p.free_cores("w2"), 3);
}

}  // namespace
}  // namespace sloserve
