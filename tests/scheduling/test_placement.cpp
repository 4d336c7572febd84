// Placements alone: the static plan, an epoch's plan with backups for models it left out, and a
// scaler's deployment; each gives every worker a schedule and frontends a table.

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <sstream>

#include "config/cluster_config.hpp"
#include "scheduling/placement.hpp"
#include "scheduling/policies/graft/epoch.hpp"
#include "tests/parse_config.hpp"

namespace sloserve {
namespace {

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

std::vector<std::string> routed(const cluster_placement& p, const std::string& model) {
  std::vector<std::string> out;
  for (auto& r : p.table.routes)
    if (r.model == model)
      for (auto& i : r.instances) out.push_back(i.node + "/" + std::to_string(i.device));
  return out;
}

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

// Piccolo as an epoch: every machine of its sets runs on a device of its configuration's type,
// routed the rate the configuration carries; a type with too few devices weighs more until the
// sets fit; a padded module's dummies are in the table beside its weights.
TEST(placement, a_piccolo_epoch_puts_each_machine_on_its_type_and_routes_by_configuration_rates) {
  std::ifstream example(SLOSERVE_EXAMPLES_DIR "/mixed-fleet.yaml");
  std::stringstream text;
  text << example.rdbuf() << "scheduler: {policy: piccolo}\n";
  auto cfg = parse(text.str());
  auto type_of = [&](const std::string& node) {
    return node == "w1" ? std::string("t4") : node == "w2" ? std::string("a10") : std::string("a100");
  };
  for (double rate : {300.0, 1000.0}) {
    auto in = planning_input(cfg, cfg.models);
    in.rates = {rate};
    auto plenty = in;
    for (int i = 0; i < 3; ++i) plenty.slots.insert(plenty.slots.end(), in.slots.begin(), in.slots.end());
    auto unconstrained = sched::plan_piccolo(plenty);
    auto r = sched::plan_scaled_epoch(in, nullptr);
    ASSERT_TRUE(r) << r.error();
    EXPECT_DOUBLE_EQ(r->scale, 1) << "piccolo plans the load, not a multiple of it";
    auto& res = r->result;
    EXPECT_EQ(res.devices_missing, 0u) << rate;
    EXPECT_TRUE(res.placement.infeasible.empty());
    for (size_t k = 0; k < res.placement.devices.size(); ++k) {
      auto& d = res.placement.devices[k];
      ASSERT_GE(res.slot_of[k], 0);
      ASSERT_TRUE(d.type);
      EXPECT_EQ(type_of(res.slots[static_cast<size_t>(res.slot_of[k])].node), *d.type);
      ASSERT_EQ(d.sessions.size(), 1u);
      EXPECT_LE(d.occupancy, 1 + 1e-9);
    }
    auto p = epoch_placement(cfg, in, res, 3);
    std::map<std::string, double> weight;
    for (auto& route : p.table.routes)
      for (auto& i : route.instances) {
        weight[route.model] += i.weight;
        EXPECT_EQ(i.dummy_rate, 0) << "no set here needs padding";
      }
    EXPECT_NEAR(weight["detector"], rate, 1e-6);
    EXPECT_NEAR(weight["classifier"], 2.5 * rate, 1e-6);
    EXPECT_EQ(p.table.frontends, 1u);
    if (rate == 1000) {
      // With devices to spare, the sets want more a10s than there are four of; priced up, they fit.
      EXPECT_GT(unconstrained.needed[1], 4u);
      auto fitted = sched::plan_piccolo(in);
      for (size_t t = 0; t < fitted.needed.size(); ++t) EXPECT_LE(fitted.needed[t], fitted.types.available[t]);
    }
  }
}

TEST(placement, a_padded_piccolo_set_carries_its_dummies_in_the_table) {
  // Table I of the Piccolo paper: 285 req/s within 2 s costs 3.0 with 15 req/s of dummies.
  auto cfg = parse(R"(
nodes:
  - {name: ctl, address: tcp://127.0.0.1:0, roles: [controller, frontend]}
  - {name: w1, address: tcp://127.0.0.1:0, roles: [worker], devices: [{kind: emulated, count: 4}]}
models:
  - {name: m, input: {dtype: float32, shape: [4]}, output: {dtype: float32, shape: [4]}, max_batch: 100,
     profile: {batch: [5, 20, 100], latency_ms: [100, 250, 1000]}}
pipelines:
  - {name: p, slo_ms: 2000, stages: [{name: s, model: m}]}
scheduler: {policy: piccolo}
)");
  auto in = planning_input(cfg, cfg.models);
  in.rates = {285};
  auto r = sched::plan_scaled_epoch(in, nullptr);
  ASSERT_TRUE(r) << r.error();
  auto p = epoch_placement(cfg, in, r->result, 3);
  double weight = 0, dummies = 0;
  for (auto& route : p.table.routes)
    for (auto& i : route.instances) weight += i.weight, dummies += i.dummy_rate;
  EXPECT_NEAR(weight, 285, 1e-6);
  EXPECT_NEAR(dummies, 15, 1e-6);
  EXPECT_EQ(r->result.placement.devices.size(), 3u);
  for (auto& b : p.table.budgets) EXPECT_NEAR(b.budget_ms, 2000, 1e-6) << "the worst case, 4/3 s, leaves slack";
}

// Fractional instances are slots of their own, at their share of the price. Piccolo plans them
// as a type of their own (slowed by the model's rule); other planners use whole devices only.
TEST(placement, fractional_instances_are_slots_that_only_piccolo_plans) {
  const char* text = R"(device_types: [{name: g, price: 2}]
nodes:
  - {name: ctl, address: tcp://127.0.0.1:0, roles: [controller, frontend]}
  - {name: w, address: tcp://127.0.0.1:0, roles: [worker], devices: [{kind: emulated, type: g, shares: [0.25, 0.25, 0.25, 0.25]}, {kind: emulated, type: g}]}
models:
  - {name: m, input: {dtype: float32, shape: [2]}, output: {dtype: float32, shape: [2]}, max_batch: 8,
     profile: {alpha_ms: 1, beta_ms: 4}, share_exponent: 0.5}
pipelines:
  - {name: p, slo_ms: 100, stages: [{name: s, model: m}]}
)";
  auto cfg = parse(std::string(text) + "scheduler: {policy: piccolo}\n");
  auto slots = device_slots(cfg);
  ASSERT_EQ(slots.size(), 5u);
  EXPECT_DOUBLE_EQ(slots[0].share, 0.25);
  EXPECT_DOUBLE_EQ(slots[0].price, 0.5);
  EXPECT_DOUBLE_EQ(slots[4].share, 1);
  EXPECT_DOUBLE_EQ(slots[4].price, 2);
  // A light stage: a quarter of the device (half as fast, a quarter of the price) is cheaper.
  auto in = planning_input(cfg, cfg.models);
  in.rates = {20};
  auto r = sched::plan_scaled_epoch(in, nullptr);
  ASSERT_TRUE(r) << r.error();
  ASSERT_EQ(r->result.placement.devices.size(), 1u);
  EXPECT_DOUBLE_EQ(r->result.placement.devices[0].share, 0.25);
  EXPECT_LT(r->result.slot_of[0], 4) << "bound to a quarter instance";
  // Nexus plans whole devices: only the whole one.
  auto nx = parse(text);
  auto nin = planning_input(nx, nx.models);
  nin.rates = {20};
  auto n = sched::plan_epoch(nin);
  ASSERT_TRUE(n) << n.error();
  ASSERT_EQ(n->placement.devices.size(), 1u);
  EXPECT_EQ(n->slot_of[0], 4);
}

// A graft epoch on the example: fragments from four start layers become re-aligned stages on
// instances of the shares planned (none on a share smaller than planned), each fragment's route
// runs its ranges in layer order from its start to the end, the routed rate of every range is
// what its fragments carry, and the plan takes no more than every fragment alone (GSLICE).
TEST(placement, a_graft_epoch_realigns_fragments_onto_shares_and_routes_each_through_its_ranges) {
  std::ifstream example(SLOSERVE_EXAMPLES_DIR "/graft.yaml");
  std::stringstream text;
  text << example.rdbuf();
  auto cfg = parse(text.str());
  auto in = planning_input(cfg, cfg.models);
  in.rates = {200};
  in.fragments = {{{0, 200, 0.25, 4}, {1, 150, 0.25, 4}, {2, 150, 0.25, 4}, {4, 100, 0.25, 4}}};
  auto r = sched::plan_scaled_epoch(in, nullptr);
  ASSERT_TRUE(r) << r.error();
  auto& res = r->result;
  EXPECT_DOUBLE_EQ(r->scale, 1) << "graft plans the load, not a multiple of it";
  EXPECT_EQ(res.devices_missing, 0u);
  EXPECT_TRUE(res.placement.infeasible.empty());
  EXPECT_GT(res.resources, 0);
  for (size_t k = 0; k < res.placement.devices.size(); ++k) {
    ASSERT_GE(res.slot_of[k], 0);
    EXPECT_GE(res.slots[static_cast<size_t>(res.slot_of[k])].share, res.placement.devices[k].share - 1e-9);
  }
  // Every start layer has a route, from its start to the end, in order.
  std::map<int, int> starts;
  std::map<std::string, double> carried;
  for (auto& f : res.fragment_routes) {
    ++starts[f.start];
    int at = f.start;
    ASSERT_EQ(f.models.size(), f.budget_ms.size());
    double budget = 0;
    for (auto& name : f.models) {
      auto* m = cfg.find_model(name);
      ASSERT_NE(m, nullptr) << name;
      EXPECT_EQ(m->is_fragment() ? m->layer_from : 0, at) << name;
      at = m->is_fragment() ? m->layer_to : 6;
      carried[name] += f.rate;
    }
    for (double b : f.budget_ms) budget += b;
    EXPECT_EQ(at, 6);
    EXPECT_LE(budget, f.slo_ms / 2 + 1e-6) << "execution within half the time left";
  }
  EXPECT_EQ(starts.size(), 4u);
  // The last blocks cost most and batch best: some fragment runs its own first blocks and then a
  // range it shares with fragments that start there.
  EXPECT_TRUE(std::any_of(res.fragment_routes.begin(), res.fragment_routes.end(),
                          [](auto& f) { return f.models.size() == 2; }));
  auto p = epoch_placement(cfg, in, res, 3);
  EXPECT_EQ(p.table.fragments.size(), res.fragment_routes.size());
  std::map<std::string, double> weight;
  for (auto& route : p.table.routes)
    for (auto& i : route.instances) weight[route.model] += i.weight;
  for (auto& [name, rate] : carried) EXPECT_NEAR(weight[name], rate, 1e-6) << name;
  // Queries from a start no plan covers run the rest of the model: every suffix has an instance.
  for (int s = 1; s < 6; ++s) EXPECT_FALSE(routed(p, "resnet18[" + std::to_string(s) + ",6)").empty()) << s;
  // Against every fragment alone at its best share and batch (the fragments after merging).
  auto gm = sched::graft_model(cfg.models[0], {0.05, 0.1, 0.2});
  std::vector<sched::graft::fragment> frags;
  for (auto& f : in.fragments[0])
    for (int c = 0; c < f.clients; ++c) frags.push_back({f.start, f.slo_ms / 1e3, 200 * f.share / f.clients, 1});
  auto gslice = sched::graft::gslice_plan(gm, sched::graft::merge_fragments(gm, frags));
  ASSERT_TRUE(gslice.feasible);
  EXPECT_LT(res.resources, gslice.resources);
  // Before any plan every device serves the model and its rest from every layer.
  auto st = static_placement(cfg, 1);
  EXPECT_EQ(st.schedules["w1"].devices[0].sessions.size(), 6u);
}

}  // namespace
}  // namespace sloserve
