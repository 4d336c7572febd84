// Piccolo as a scheduler epoch: machines on their types, routes by configuration rates, dummies in the
// table, fractional instances.

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "config/cluster_config.hpp"
#include "scheduling/placement.hpp"
#include "scheduling/policies/piccolo/epoch.hpp"
#include "tests/parse_config.hpp"
#include "tests/routed.hpp"

namespace sloserve {
namespace {

using testing::parse_config;
using testing::routed;

// Piccolo as an epoch: every machine of its sets runs on a device of its configuration's type,
// routed the rate the configuration carries; a type with too few devices weighs more until the
// sets fit; a padded module's dummies are in the table beside its weights.
TEST(placement, a_piccolo_epoch_puts_each_machine_on_its_type_and_routes_by_configuration_rates) {
  std::ifstream example(SLOSERVE_EXAMPLES_DIR "/mixed-fleet.yaml");
  std::stringstream text;
  text << example.rdbuf() << "scheduler: {policy: piccolo}\n";
  auto cfg = parse_config(text.str());
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

// Table I of the Piccolo paper (module 1) on four devices, under `scheduler`, planned at 285 req/s.
// `more_nodes`: lines added to the file's nodes.
cluster_placement table_i_at_285(const std::string& scheduler, cluster_config& cfg,
                                 const std::string& more_nodes = "") {
  cfg = parse_config(R"(
nodes:
  - {name: ctl, address: tcp://127.0.0.1:0, roles: [controller, frontend]}
)" + more_nodes + R"(
  - {name: w1, address: tcp://127.0.0.1:0, roles: [worker], devices: [{kind: emulated, count: 4}]}
models:
  - {name: m, input: {dtype: float32, shape: [4]}, output: {dtype: float32, shape: [4]}, max_batch: 100,
     profile: {batch: [5, 20, 100], latency_ms: [100, 250, 1000]}}
pipelines:
  - {name: p, slo_ms: 2000, stages: [{name: s, model: m}]}
scheduler: )" + scheduler +
                     "\n");
  auto in = planning_input(cfg, cfg.models);
  in.rates = {285};
  auto r = sched::plan_scaled_epoch(in, nullptr);
  EXPECT_TRUE(r) << r.error();
  return r ? epoch_placement(cfg, in, r->result, 3) : cluster_placement{};
}

TEST(placement, a_padded_piccolo_set_carries_its_dummies_in_the_table) {
  // Table I of the Piccolo paper: 285 req/s within 2 s costs 3.0 with 15 req/s of dummies.
  cluster_config cfg;
  auto p = table_i_at_285("{policy: piccolo}", cfg);
  auto in = planning_input(cfg, cfg.models);
  in.rates = {285};
  auto r = sched::plan_scaled_epoch(in, nullptr);
  ASSERT_TRUE(r) << r.error();
  double weight = 0, dummies = 0;
  for (auto& route : p.table.routes)
    for (auto& i : route.instances) weight += i.weight, dummies += i.dummy_rate;
  EXPECT_NEAR(weight, 285, 1e-6);
  EXPECT_NEAR(dummies, 15, 1e-6);
  EXPECT_EQ(r->result.placement.devices.size(), 3u);
  for (auto& b : p.table.budgets) EXPECT_NEAR(b.budget_ms, 2000, 1e-6) << "the worst case, 4/3 s, leaves slack";
  for (auto& route : p.table.routes)
    for (auto& i : route.instances) EXPECT_EQ(i.batch, 0u) << "fill by default: no whole batches";
  // With whole batches: each planned machine takes 100 in turn, runs them in 1 s, and its device
  // collects 100 with a fill time of 1/3 s (Theorem 1's b / w).
  cluster_config whole;
  auto wp = table_i_at_285("{policy: piccolo, piccolo: {whole_batches: true}}", whole);
  size_t in_turn = 0, collecting = 0;
  for (auto& route : wp.table.routes)
    for (auto& i : route.instances)
      if (i.batch > 0) {
        ++in_turn;
        EXPECT_EQ(i.batch, 100u);
        EXPECT_NEAR(i.duration_ms, 1000, 1e-6);
      }
  for (auto& [node, sched] : wp.schedules)
    for (auto& d : sched.devices)
      for (auto& ss : d.sessions)
        if (ss.collect > 0) {
          ++collecting;
          EXPECT_EQ(ss.collect, 100u);
          EXPECT_NEAR(ss.collect_ms, 1000.0 / 3, 1e-6);
        }
  EXPECT_EQ(in_turn, 3u);
  EXPECT_EQ(collecting, 3u);
}

// Piccolo's central dispatcher: with whole batches and several frontends, each route names one of
// the file's frontends, the same in every table; with one frontend, without whole batches, or
// with `central_dispatch: false`, none (each frontend keeps its turn).
TEST(placement, with_several_frontends_one_dispatches_each_whole_batch_model_for_all) {
  const std::string fes =
      "  - {name: fe2, address: tcp://127.0.0.1:0, roles: [frontend]}\n"
      "  - {name: fe3, address: tcp://127.0.0.1:0, roles: [frontend]}\n";
  auto dispatchers = [](const cluster_placement& p) {
    std::set<std::string> out;
    for (auto& r : p.table.routes) out.insert(r.dispatcher);
    return out;
  };
  cluster_config cfg;
  auto central = table_i_at_285("{policy: piccolo, piccolo: {whole_batches: true}}", cfg, fes);
  EXPECT_EQ(central.table.frontends, 3u);
  auto named = dispatchers(central);
  ASSERT_EQ(named.size(), 1u);
  EXPECT_TRUE(named.count("ctl") || named.count("fe2") || named.count("fe3")) << *named.begin();
  EXPECT_EQ(dispatchers(table_i_at_285("{policy: piccolo, piccolo: {whole_batches: true}}", cfg, fes)), named)
      << "every table names the same one";
  for (auto [scheduler, more] :
       {std::pair<std::string, std::string>{"{policy: piccolo, piccolo: {whole_batches: true}}", ""},
        {"{policy: piccolo, piccolo: {whole_batches: true, central_dispatch: false}}", fes},
        {"{policy: piccolo}", fes}})
    EXPECT_EQ(dispatchers(table_i_at_285(scheduler, cfg, more)), std::set<std::string>{""}) << scheduler << more;
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
  auto cfg = parse_config(std::string(text) + "scheduler: {policy: piccolo}\n");
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
  auto nx = parse_config(text);
  auto nin = planning_input(nx, nx.models);
  nin.rates = {20};
  auto n = sched::plan_epoch(nin);
  ASSERT_TRUE(n) << n.error();
  ASSERT_EQ(n->placement.devices.size(), 1u);
  EXPECT_EQ(n->slot_of[0], 4);
}

}  // namespace
}  // namespace sloserve
