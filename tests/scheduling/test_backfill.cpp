// Backfill: the idle time of a higher priority's devices goes to the pipelines a plan cut.

#include <gtest/gtest.h>

#include <algorithm>
#include <iostream>

#include "config/cluster_config.hpp"
#include "scheduling/backfill.hpp"
#include "scheduling/placement.hpp"
#include "tests/parse_config.hpp"

namespace sloserve {
namespace {

// Two devices of about 105 queries/s each at batch 4 (l(b) = 9b + 2 ms), a high-priority pipeline
// at `high` queries/s and a low one at 320, SLO `slo` ms, headroom 15%.
struct planned {
  cluster_config cfg;
  sched::epoch_input in;
  sched::load_epoch epoch;
  cluster_placement placed;
};

planned plan_two(double high, double slo) {
  planned p;
  p.cfg = testing::parse_config(R"(
nodes:
  - {name: ctl, address: tcp://127.0.0.1:0, roles: [controller, frontend]}
  - {name: w1, address: tcp://127.0.0.1:0, roles: [worker], devices: [{kind: emulated}]}
  - {name: w2, address: tcp://127.0.0.1:0, roles: [worker], devices: [{kind: emulated}]}
models:
  - {name: hm, input: {dtype: float32, shape: [4]}, output: {dtype: float32, shape: [2]}, max_batch: 4, profile: {alpha_ms: 9, beta_ms: 2}}
  - {name: lm, input: {dtype: float32, shape: [4]}, output: {dtype: float32, shape: [2]}, max_batch: 4, profile: {alpha_ms: 9, beta_ms: 2}}
pipelines:
  - {name: high, slo_ms: )" + std::to_string(slo) +
                                R"(, priority: 1, stages: [{name: s, model: hm}]}
  - {name: low, slo_ms: )" + std::to_string(slo) +
                                R"(, stages: [{name: s, model: lm}]}
scheduler: {headroom: 0.15}
)");
  p.in = planning_input(p.cfg, p.cfg.models);
  p.in.rates = {1.15 * high, 1.15 * 320};  // the planning rates with the headroom, as the controller sets them
  auto e = sched::plan_for_load(p.in, nullptr, false, {high, 320});
  EXPECT_TRUE(e) << e.error();
  p.epoch = std::move(*e);
  p.placed = epoch_placement(p.cfg, p.in, p.epoch.plan.result, 1);
  return p;
}

const msg::device_schedule* device_of(const cluster_placement& pl, const std::string& node) {
  auto s = pl.schedules.find(node);
  return s == pl.schedules.end() || s->second.devices.empty() ? nullptr : &s->second.devices[0];
}

bool holds(const msg::device_schedule* d, const std::string& model) {
  return d && std::any_of(d->sessions.begin(), d->sessions.end(), [&](auto& s) { return s.model == model; });
}

TEST(backfill, the_devices_a_higher_priority_leaves_idle_carry_the_pipeline_the_plan_cut) {
  auto p = plan_two(80, 100);
  ASSERT_LT(p.epoch.plan.scale, 1) << "two devices cannot carry 400 queries/s";
  // The plan gives each pipeline a device of its own.
  std::string high_node;
  for (auto& [node, s] : p.placed.schedules)
    if (holds(&s.devices[0], "hm")) high_node = node;
  ASSERT_FALSE(high_node.empty());
  ASSERT_FALSE(holds(device_of(p.placed, high_node), "lm"));
  double quota = p.in.rates[1];

  auto extra = backfill_cut_priorities(p.cfg, p.in, p.epoch.plan.result, p.epoch.planned.rate, p.placed);
  ASSERT_EQ(extra.size(), 2u);
  EXPECT_EQ(extra[0], 0) << "the high pipeline was not cut";
  // At 80 of its 92 planned queries/s, batch 4 every 43 ms: 38 of each 43.5 ms busy at the
  // planned rate, a quarter idle at the real one; a batch of 1 (11 ms) fits the 18.5 ms its
  // budget leaves, so about 0.24 x 91 = 22 queries/s more.
  EXPECT_NEAR(extra[1], 22, 3);
  std::cout << "backfilled " << extra[1] << " queries/s beside a quota of " << quota << "\n";
  EXPECT_LT(quota + extra[1], 1.15 * 320);
  auto* d = device_of(p.placed, high_node);
  ASSERT_TRUE(holds(d, "lm"));
  for (auto& s : d->sessions)
    if (s.model == "lm") {
      EXPECT_EQ(s.batch, 1u) << "a batch the high one's budget can wait for";
    }
  bool spare = false;
  for (auto& r : p.placed.table.routes)
    if (r.model == "lm")
      for (auto& i : r.instances) spare |= i.node == high_node && i.spare && i.spill_at > 0;
  EXPECT_TRUE(spare) << "the low pipeline reaches it as a spare";
}

TEST(backfill, a_device_whose_budgets_leave_no_room_for_a_batch_backfills_nothing) {
  // At 60 ms the high one's batch of 2 every ~22 ms (l(2) = 20) leaves 60 - 22 - 20 = 18 ms,
  // enough for one request of 11 ms; at 40 ms it leaves none.
  auto tight = plan_two(80, 40);
  ASSERT_LT(tight.epoch.plan.scale, 1);
  bool high_planned = false;
  for (auto& [node, s] : tight.placed.schedules) high_planned |= holds(&s.devices[0], "hm");
  ASSERT_TRUE(high_planned);
  auto extra =
      backfill_cut_priorities(tight.cfg, tight.in, tight.epoch.plan.result, tight.epoch.planned.rate, tight.placed);
  for (auto& [node, s] : tight.placed.schedules)
    if (holds(&s.devices[0], "hm")) {
      EXPECT_FALSE(holds(&s.devices[0], "lm")) << node;
    }
  EXPECT_EQ(extra[1], 0);
}

// The other way round: the device the plan gives the low pipeline alone also holds the high one's
// model as a spare, at the batch the plan runs it at, routed as a spare; the high one's own
// device gets nothing of the low one from this; a slot whose memory cannot hold it gets none.
TEST(backfill, the_lower_ones_devices_hold_the_higher_ones_models_as_spares) {
  auto p = plan_two(80, 100);
  std::string low_node, high_node;
  for (auto& [node, s] : p.placed.schedules) {
    if (holds(&s.devices[0], "lm") && !holds(&s.devices[0], "hm")) low_node = node;
    if (holds(&s.devices[0], "hm")) high_node = node;
  }
  ASSERT_FALSE(low_node.empty());
  ASSERT_FALSE(high_node.empty());
  auto placed = p.placed;
  EXPECT_TRUE(spare_higher_priorities(p.cfg, p.in, p.epoch.plan.result, placed));
  auto* d = device_of(placed, low_node);
  ASSERT_TRUE(holds(d, "hm"));
  auto hm = std::find_if(d->sessions.begin(), d->sessions.end(), [](auto& s) { return s.model == "hm"; });
  EXPECT_EQ(hm->batch, 4u) << "the batch the plan runs it at";
  EXPECT_FALSE(holds(device_of(placed, high_node), "lm"));
  auto route =
      std::find_if(placed.table.routes.begin(), placed.table.routes.end(), [](auto& r) { return r.model == "hm"; });
  ASSERT_NE(route, placed.table.routes.end());
  auto spare =
      std::find_if(route->instances.begin(), route->instances.end(), [&](auto& i) { return i.node == low_node; });
  ASSERT_NE(spare, route->instances.end());
  EXPECT_TRUE(spare->spare);
  // Without room in memory, no spare.
  for (auto& m : p.cfg.models) m.memory_mb = 100;
  auto in = p.in;
  in.models = &p.cfg.models;
  auto r = p.epoch.plan.result;
  for (auto& slot : r.slots) slot.memory_mb = 150;
  placed = p.placed;
  EXPECT_FALSE(spare_higher_priorities(p.cfg, in, r, placed));
  EXPECT_FALSE(holds(device_of(placed, low_node), "hm"));
}

// At 95 queries/s the high pipeline's 109 planned take its device and a residual of 4 beside the
// low one: that instance takes the high model's overflow, as a spare, instead of its 4%.
TEST(backfill, a_higher_ones_small_residual_beside_a_lower_one_is_routed_as_a_spare) {
  auto p = plan_two(95, 100);
  auto route = [](const cluster_placement& pl) {
    return *std::find_if(pl.table.routes.begin(), pl.table.routes.end(), [](auto& r) { return r.model == "hm"; });
  };
  auto before = route(p.placed);
  ASSERT_EQ(before.instances.size(), 2u);
  auto small = std::min_element(before.instances.begin(), before.instances.end(),
                                [](auto& a, auto& b) { return a.weight < b.weight; });
  double total = before.instances[0].weight + before.instances[1].weight;
  ASSERT_LT(small->weight, 0.1 * total) << "a residual";
  ASSERT_FALSE(small->spare);
  auto placed = p.placed;
  EXPECT_TRUE(spare_higher_priorities(p.cfg, p.in, p.epoch.plan.result, placed));
  auto after = route(placed);
  for (auto& i : after.instances) EXPECT_EQ(i.spare, i.node == small->node) << i.node;
}

TEST(backfill, nothing_is_added_where_the_plan_cut_nothing) {
  auto p = plan_two(20, 100);
  p.in.rates = {20 * 1.15, 320 * 1.15};  // as if the plan carried both
  auto before = p.placed.table.routes;
  auto extra = backfill_cut_priorities(p.cfg, p.in, p.epoch.plan.result, {20, 320}, p.placed);
  EXPECT_EQ(extra, (std::vector<double>{0, 0}));
  EXPECT_EQ(p.placed.table.routes, before);
}

}  // namespace
}  // namespace sloserve
