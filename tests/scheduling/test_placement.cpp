// Placements alone: the static plan, an epoch's plan with backups for models it left out, and a
// scaler's deployment; each gives every worker a schedule and frontends a table.

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <sstream>

#include "config/cluster_config.hpp"
#include "scheduling/placement.hpp"
#include "scheduling/policies/piccolo/epoch.hpp"
#include "tests/parse_config.hpp"
#include "tests/routed.hpp"

namespace sloserve {
namespace {

using testing::routed;

cluster_config parse(const std::string& yaml) {
  return testing::parse_config(yaml);
}

const char* two_models = R"(
nodes:
  - {name: ctl, address: tcp://127.0.0.1:0, roles: [controller, frontend]}
  - {name: w1, address: tcp://127.0.0.1:0, roles: [worker], devices: [{kind: emulated, count: 2}]}
  - {name: w2, address: tcp://127.0.0.1:0, roles: [worker], devices: [{kind: emulated, models: [b]}]}
models:
  - {name: a, input: {dtype: float32, shape: [2]}, output: {dtype: float32, shape: [2]}, max_batch: 8,
     profile: {alpha_ms: 5, beta_ms: 4}, cores: {gamma_ms: 10, epsilon_ms: 20, delta_ms: 1, eta_ms: 2}}
  - {name: b, input: {dtype: float32, shape: [2]}, output: {dtype: float32, shape: [2]}, max_batch: 8,
     profile: {alpha_ms: 1, beta_ms: 1}}
pipelines:
  - {name: p, slo_ms: 100, stages: [{name: s1, model: a}, {name: s2, model: b, after: [s1]}]}
)";

TEST(placement, the_static_plan_runs_every_model_a_device_may_serve_at_the_even_split) {
  auto cfg = parse(two_models);
  auto p = static_placement(cfg, 7);
  ASSERT_EQ(p.schedules.size(), 2u) << "one schedule per worker";
  EXPECT_EQ(p.schedules["w1"].epoch, 7u);
  ASSERT_EQ(p.schedules["w1"].devices.size(), 2u);
  EXPECT_EQ(p.schedules["w1"].devices[0].sessions.size(), 2u);
  ASSERT_EQ(p.schedules["w2"].devices[0].sessions.size(), 1u) << "w2's device serves b only";
  EXPECT_EQ(p.schedules["w2"].devices[0].sessions[0].model, "b");
  EXPECT_EQ(routed(p, "a"), (std::vector<std::string>{"w1/0", "w1/1"}));
  EXPECT_EQ(routed(p, "b"), (std::vector<std::string>{"w1/0", "w1/1", "w2/0"}));
  ASSERT_EQ(p.table.budgets.size(), 2u);
  EXPECT_DOUBLE_EQ(p.table.budgets[0].budget_ms, 50);
  // Each model batches up to the saturating size for its budget: 2·l(b) <= 50 ms (a: 5b + 4).
  for (auto& s : p.schedules["w1"].devices[0].sessions) EXPECT_EQ(s.batch, s.model == "a" ? 4u : 8u) << s.model;
}

TEST(placement, an_epoch_gives_a_model_it_left_out_a_backup_instance) {
  auto cfg = parse(two_models);
  auto in = planning_input(cfg, cfg.models);
  EXPECT_EQ(in.slots.size(), 3u);
  in.rates = {0};  // no traffic: the plan places nothing
  auto planned = sched::plan_epoch(in);
  ASSERT_TRUE(planned) << planned.error();
  auto p = epoch_placement(cfg, in, *planned, 9);
  EXPECT_EQ(routed(p, "a").size(), 1u) << "a backup for a";
  EXPECT_EQ(routed(p, "b").size(), 1u) << "a backup for b";
  EXPECT_NE(routed(p, "a"), routed(p, "b")) << "on different free devices";
  in.rates = {40};
  planned = sched::plan_epoch(in);
  ASSERT_TRUE(planned) << planned.error();
  p = epoch_placement(cfg, in, *planned, 10);
  EXPECT_FALSE(routed(p, "a").empty());
  EXPECT_FALSE(routed(p, "b").empty());
  EXPECT_EQ(p.table.epoch, 10u);
  EXPECT_EQ(p.table.budgets.size(), 2u);
}

// A plan for a light load leaves devices free: they keep what they ran (here the static
// placement's every model), routed as spares, so that a surge finds them loaded. The planned
// instances are no spares, and every instance names the batch frontends spill past.
TEST(placement, devices_a_plan_leaves_free_keep_their_models_as_spares) {
  auto cfg = parse(two_models);
  auto before = static_placement(cfg, 1);
  auto in = planning_input(cfg, cfg.models);
  in.rates = {5};
  auto planned = sched::plan_epoch(in);
  ASSERT_TRUE(planned) << planned.error();
  auto used = planned->placement.devices.size();
  ASSERT_LT(used, 3u) << "a light load leaves a device free";
  auto bare = epoch_placement(cfg, in, *planned, 2);
  auto p = epoch_placement(cfg, in, *planned, 2, &before);
  size_t spares = 0, planned_instances = 0;
  for (auto& r : p.table.routes)
    for (auto& i : r.instances) {
      (i.spare ? spares : planned_instances) += 1;
      EXPECT_GE(i.spill_at, 1u) << r.model << " on " << i.node << "/" << i.device;
      auto& sessions = p.schedules.at(i.node).devices[i.device].sessions;
      EXPECT_TRUE(std::any_of(sessions.begin(), sessions.end(), [&](auto& x) { return x.model == r.model; }));
    }
  size_t bare_instances = 0;
  for (auto& r : bare.table.routes) bare_instances += r.instances.size();
  EXPECT_EQ(planned_instances, bare_instances) << "the plan's own instances are as without spares";
  EXPECT_GT(spares, 0u);
  // Every device now runs something: none of the three sits empty.
  for (auto& [node, s] : p.schedules)
    for (auto& d : s.devices) EXPECT_FALSE(d.sessions.empty()) << node << "/" << d.device;
  // A spare never holds a model its device may not serve (w2's device serves only b).
  for (auto& ss : p.schedules.at("w2").devices[0].sessions) EXPECT_EQ(ss.model, "b");
}

// A model refreshed to twice its profile (the controller's models, `in.models`) spills at the
// latencies it runs at: fewer outstanding invocations fit its budget than at the file's profile.
TEST(placement, spill_points_follow_a_refreshed_profile) {
  auto cfg = parse(two_models);
  auto in = planning_input(cfg, cfg.models);
  in.rates = {40};
  auto planned = sched::plan_epoch(in);
  ASSERT_TRUE(planned) << planned.error();
  auto spill = [](const cluster_placement& p, const std::string& model) {
    std::vector<uint32_t> out;
    for (auto& r : p.table.routes)
      if (r.model == model)
        for (auto& i : r.instances)
          if (!i.spare) out.push_back(i.spill_at);
    return out;
  };
  auto as_written = epoch_placement(cfg, in, *planned, 2);
  auto slow = cfg.models;
  scale_latency(slow[1], 2);  // b: l(b) = 2b + 2
  in.models = &slow;
  auto refreshed = epoch_placement(cfg, in, *planned, 2);
  auto before = spill(as_written, "b"), after = spill(refreshed, "b");
  ASSERT_FALSE(before.empty());
  ASSERT_EQ(before.size(), after.size());
  for (size_t k = 0; k < before.size(); ++k) EXPECT_LT(after[k], before[k]) << k;
  EXPECT_EQ(spill(as_written, "a"), spill(refreshed, "a")) << "a runs as profiled";
}

// Before any load, a plan for what the devices hold: every pipeline at the largest rate that fits.
TEST(placement, a_capacity_plan_fills_the_cluster_at_the_largest_rate_that_fits) {
  auto cfg = parse(two_models);
  auto in = planning_input(cfg, cfg.models);
  auto planned = sched::plan_capacity_epoch(in, nullptr);
  ASSERT_TRUE(planned) << planned.error();
  EXPECT_GT(planned->scale, 10);
  ASSERT_EQ(in.rates.size(), 1u);
  EXPECT_DOUBLE_EQ(in.rates[0], planned->scale);
  EXPECT_EQ(planned->result.devices_missing, 0u);
  EXPECT_TRUE(planned->result.placement.infeasible.empty());
  EXPECT_EQ(planned->result.placement.devices.size(), 3u) << "it takes every device";
  // A tenth more does not fit.
  for (auto& r : in.rates) r *= 1.1;
  auto more = sched::plan_epoch(in);
  ASSERT_TRUE(more);
  EXPECT_TRUE(more->devices_missing > 0 || !more->placement.infeasible.empty());
}

TEST(placement, a_deployment_weighs_instances_by_throughput_and_keeps_budgets_it_does_not_set) {
  auto cfg = parse(two_models);
  deployment d;
  d.instances = {{"w1", 0, "a", 4, 2}, {"w1", 1, "a", 1, 1}, {"w2", 0, "b", 8, 1}, {"nowhere", 0, "a", 1, 1}};
  std::vector<msg::stage_budget> old{{"p", "s1", 60}, {"p", "s2", 40}};
  auto p = deployment_placement(cfg, d, 3, old);
  EXPECT_EQ(routed(p, "a"), (std::vector<std::string>{"w1/0", "w1/1"})) << "an unknown node is skipped";
  auto& a = p.table.routes[0];
  ASSERT_EQ(a.model, "a");
  core_latency l{10, 20, 1, 2};
  EXPECT_DOUBLE_EQ(a.instances[0].weight, l.throughput(4, 2));
  EXPECT_DOUBLE_EQ(a.instances[1].weight, l.throughput(1, 1));
  EXPECT_DOUBLE_EQ(p.table.routes[1].instances[0].weight, 1) << "b declares no cores: weight 1";
  EXPECT_EQ(p.table.budgets.size(), 2u);
  EXPECT_DOUBLE_EQ(p.table.budgets[0].budget_ms, 60) << "kept";
  d.budgets = {{"p", "s1", 80}, {"p", "s2", 20}};
  EXPECT_DOUBLE_EQ(deployment_placement(cfg, d, 4, old).table.budgets[0].budget_ms, 80);
  EXPECT_EQ(p.schedules["w1"].devices[0].sessions[0].batch, 4u);
  // With the controller's models, b refreshed to twice its profile spills sooner.
  auto slow = cfg.models;
  scale_latency(slow[1], 2);
  d.budgets = {{"p", "s1", 60, "a"}, {"p", "s2", 40, "b"}};
  auto as_written = deployment_placement(cfg, d, 5, old);
  auto refreshed = deployment_placement(cfg, d, 5, old, nullptr, &slow);
  ASSERT_GT(as_written.table.routes[1].instances[0].spill_at, 0u);
  EXPECT_LT(refreshed.table.routes[1].instances[0].spill_at, as_written.table.routes[1].instances[0].spill_at);
  EXPECT_EQ(refreshed.table.routes[0].instances[0].spill_at, as_written.table.routes[0].instances[0].spill_at);
}

// FA2's central queue: a model dispatched in turn gets its planned batch and l(b, cores) on every
// instance's route, equal weights, and sessions that collect the batch; the others dispatch one
// at a time.
TEST(placement, a_deployment_in_turn_routes_whole_batches_and_its_devices_collect_them) {
  auto cfg = parse(two_models);
  deployment d;
  d.instances = {{"w1", 0, "a", 6, 2}, {"w1", 1, "a", 6, 1}, {"w2", 0, "b", 8, 1}};
  d.in_turn = {{"a", {4, 20}}};
  auto p = deployment_placement(cfg, d, 3, {});
  auto& a = p.table.routes[0];
  ASSERT_EQ(a.model, "a");
  core_latency l{10, 20, 1, 2};
  ASSERT_EQ(a.instances.size(), 2u);
  EXPECT_EQ(a.instances[0].batch, 4u);
  EXPECT_DOUBLE_EQ(a.instances[0].duration_ms, l.at(4, 2));
  EXPECT_DOUBLE_EQ(a.instances[1].duration_ms, l.at(4, 1));
  auto& s = p.schedules["w1"].devices[1].sessions[0];
  EXPECT_EQ(s.batch, 6u) << "the cap stays";
  EXPECT_EQ(s.collect, 4u);
  EXPECT_DOUBLE_EQ(s.collect_ms, 0) << "it waits until whole or urgent, not a fill time";
  // Equal turns: the stage's rate, 4 per 20 ms, shared by its two instances.
  EXPECT_DOUBLE_EQ(a.instances[0].weight, 100);
  EXPECT_DOUBLE_EQ(a.instances[1].weight, 100);
  EXPECT_EQ(p.table.routes[1].instances[0].batch, 0u) << "b: one at a time";
  EXPECT_EQ(p.schedules["w2"].devices[0].sessions[0].collect, 0u);
}

TEST(placement, a_measured_profile_is_adopted_once_for_a_model_without_one) {
  std::vector<model_spec> models(1);
  models[0].name = "m";
  models[0].needs_profile = true;
  cluster_config cfg;
  pipeline p;
  p.stages.resize(1);
  p.stages[0].variant_indices = {0};  // as resolve() leaves it
  cfg.pipelines = {p};
  EXPECT_EQ(unprofiled_model(cfg, models), &models[0]);
  EXPECT_FALSE(adopt_measured_profile(models, {"m", {1, 2}, {5}, false})) << "unequal lists";
  EXPECT_TRUE(adopt_measured_profile(models, {"m", {1, 2}, {5, 7}, true}));
  EXPECT_EQ(unprofiled_model(cfg, models), nullptr);
  EXPECT_DOUBLE_EQ(models[0].profile.latency_ms_at(2), 7);
  EXPECT_FALSE(adopt_measured_profile(models, {"m", {1}, {9}, false})) << "already profiled";
  EXPECT_FALSE(adopt_measured_profile(models, {"other", {1}, {9}, false}));
}

// A cascade stage plans two sessions: its first model on its share of the stage's budget (by
// l(1): 2 of 2 + 6 ms) for every request, its second on the rest for those that fall through,
// declared (1 - pass_rate) or measured.
TEST(placement, a_cascade_plans_its_second_model_at_the_rate_that_falls_through) {
  auto cfg = parse(R"(
nodes:
  - {name: ctl, address: tcp://127.0.0.1:0, roles: [controller, frontend]}
  - {name: w1, address: tcp://127.0.0.1:0, roles: [worker], devices: [{kind: emulated, count: 4}]}
models:
  - {name: fast, input: {dtype: float32, shape: [2]}, output: {dtype: float32, shape: [2]}, max_batch: 8,
     profile: {alpha_ms: 1, beta_ms: 1}, pass_rate: 0.75}
  - {name: slow, input: {dtype: float32, shape: [2]}, output: {dtype: float32, shape: [2]}, max_batch: 8,
     profile: {alpha_ms: 3, beta_ms: 3}}
pipelines:
  - {name: p, slo_ms: 100, stages: [{name: s, cascade: {models: [fast, slow], confidence: 0.8}}]}
)");
  auto in = planning_input(cfg, cfg.models);
  in.rates = {200};
  auto r = sched::plan_epoch(in);
  ASSERT_TRUE(r) << r.error();
  ASSERT_EQ(r->sessions.size(), 2u);
  std::map<std::string, sched::session> by_model;
  for (auto& s : r->sessions) by_model[s.model->name] = s;
  EXPECT_DOUBLE_EQ(by_model["fast"].rate, 200);
  EXPECT_DOUBLE_EQ(by_model["slow"].rate, 50);
  EXPECT_NEAR(by_model["fast"].slo_ms, 25, 0.1);
  EXPECT_NEAR(by_model["slow"].slo_ms, 75, 0.1);
  EXPECT_TRUE(r->placement.infeasible.empty());
  auto t = routing_from(cfg, in, *r, 1);
  ASSERT_EQ(t.budgets.size(), 1u);
  EXPECT_EQ(t.budgets[0].model, "fast");
  EXPECT_FALSE(routed(epoch_placement(cfg, in, *r, 1), "slow").empty());
  // Measured: half fall through.
  in.fallthroughs = {{0.5}};
  auto measured = sched::plan_epoch(in);
  ASSERT_TRUE(measured);
  for (auto& s : measured->sessions) {
    if (s.model->name == "slow") {
      EXPECT_DOUBLE_EQ(s.rate, 100);
    }
  }
}

// A canary: a stage over two versions of its model plans each for its share of the stage's rate,
// at the stage's budget; both are placed and routed, and the static plan places both.
TEST(placement, a_stage_over_versions_plans_each_version_for_its_share) {
  const std::string file = R"(
nodes:
  - {name: ctl, address: tcp://127.0.0.1:0, roles: [controller, frontend]}
  - {name: w1, address: tcp://127.0.0.1:0, roles: [worker], devices: [{kind: emulated, count: 4}]}
models:
  - {name: det, input: {dtype: float32, shape: [2]}, output: {dtype: float32, shape: [2]}, max_batch: 8,
     profile: {alpha_ms: 1, beta_ms: 1}}
  - {name: det, version: 2, input: {dtype: float32, shape: [2]}, output: {dtype: float32, shape: [2]}, max_batch: 8,
     profile: {alpha_ms: 2, beta_ms: 1}}
pipelines:
  - {name: p, slo_ms: 100, stages: [{name: s, model: det, versions: [{version: 1, weight: 90}, {version: 2, weight: 10}]}]}
)";
  auto cfg = parse(file);
  ASSERT_EQ(cfg.models[1].name, "det:v2");
  EXPECT_EQ(cfg.models[1].family(), "det");
  auto in = planning_input(cfg, cfg.models);
  in.rates = {200};
  auto r = sched::plan_epoch(in);
  ASSERT_TRUE(r) << r.error();
  std::map<std::string, double> rate;
  for (auto& x : r->sessions) rate[x.model->name] += x.rate;
  EXPECT_DOUBLE_EQ(rate["det"], 180);
  EXPECT_DOUBLE_EQ(rate["det:v2"], 20);
  auto p = epoch_placement(cfg, in, *r, 3);
  EXPECT_FALSE(routed(p, "det").empty());
  EXPECT_FALSE(routed(p, "det:v2").empty());
  auto st = static_placement(cfg, 4);
  EXPECT_FALSE(routed(st, "det").empty());
  EXPECT_FALSE(routed(st, "det:v2").empty());

  // Piccolo: a module for each version, at its share, on machines of its own, both routed; the
  // stage's budget is the larger of the two modules' (each version's path meets the SLO).
  auto pic = parse(file + "scheduler: {policy: piccolo}\n");
  auto pin = planning_input(pic, pic.models);
  pin.rates = {200};
  auto planned = sched::plan_piccolo(pin);
  ASSERT_EQ(planned.pipelines[0].of.size(), 2u);
  EXPECT_DOUBLE_EQ(planned.pipelines[0].of[1].share, 0.1);
  ASSERT_TRUE(planned.pipelines[0].plan.feasible);
  auto pr = sched::plan_scaled_epoch(pin, nullptr);
  ASSERT_TRUE(pr) << pr.error();
  std::map<std::string, double> picked;
  for (auto& x : pr->result.sessions) picked[x.model->name] += x.rate;
  EXPECT_DOUBLE_EQ(picked["det"], 180);
  EXPECT_DOUBLE_EQ(picked["det:v2"], 20);
  auto& budgets = planned.pipelines[0].plan.budget_s;
  EXPECT_NEAR(pr->result.splits[0].budget_ms[0], 1e3 * std::max(budgets[0], budgets[1]), 0.5);
  std::map<std::string, double> carried;
  for (auto& d : pr->result.placement.devices)
    for (auto& x : d.sessions) carried[pr->result.sessions[x.session].model->name] += x.rate;
  EXPECT_NEAR(carried["det"], 180, 1e-6);
  EXPECT_NEAR(carried["det:v2"], 20, 1e-6);
  auto pp = epoch_placement(pic, pin, pr->result, 3);
  EXPECT_FALSE(routed(pp, "det").empty());
  EXPECT_FALSE(routed(pp, "det:v2").empty());
}

// Short of devices: the pipeline of higher priority keeps its whole load, the lower one the rest.
// Without priorities both give up the same share.
TEST(placement, short_of_devices_the_lower_priority_is_shed_first) {
  const std::string head = R"(
nodes:
  - {name: ctl, address: tcp://127.0.0.1:0, roles: [controller, frontend]}
  - {name: w1, address: tcp://127.0.0.1:0, roles: [worker], devices: [{kind: emulated, count: 2}]}
models:
  - {name: a, input: {dtype: float32, shape: [2]}, output: {dtype: float32, shape: [2]}, max_batch: 8,
     profile: {alpha_ms: 5, beta_ms: 5}}
  - {name: b, input: {dtype: float32, shape: [2]}, output: {dtype: float32, shape: [2]}, max_batch: 8,
     profile: {alpha_ms: 5, beta_ms: 5}}
pipelines:
)";
  auto plan = [&](const std::string& pipes) {
    auto cfg = parse(head + pipes);
    auto in = planning_input(cfg, cfg.models);
    in.rates = {300, 300};  // a device carries about 180/s at batch 8: the two need more than two
    auto r = sched::plan_scaled_epoch(in, nullptr);
    EXPECT_TRUE(r) << r.error();
    EXPECT_EQ(r->result.devices_missing, 0u);
    return std::pair{in.rates, r->scale};
  };
  auto [alike, scale] = plan(
      "  - {name: hi, slo_ms: 100, stages: [{name: s, model: a}]}\n"
      "  - {name: lo, slo_ms: 100, stages: [{name: s, model: b}]}\n");
  EXPECT_LT(scale, 1);
  EXPECT_NEAR(alike[0], alike[1], 1e-9) << "one share for both";
  auto [ranked, least] = plan(
      "  - {name: hi, slo_ms: 100, priority: 5, stages: [{name: s, model: a}]}\n"
      "  - {name: lo, slo_ms: 100, stages: [{name: s, model: b}]}\n");
  EXPECT_DOUBLE_EQ(ranked[0], 300) << "the higher priority keeps its whole load";
  EXPECT_LT(ranked[1], alike[1]) << "the lower one gives up more than it would alike";
  EXPECT_GT(ranked[1], 0) << "and keeps what is left";
  EXPECT_DOUBLE_EQ(least, ranked[1] / 300);
}

}  // namespace
}  // namespace sloserve
