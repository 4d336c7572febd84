// The scaler's per-stage decisions (scheduling/autoscaler) on a model shaped like Table P2.1 of
// thesis 004: l(b, c) = 10·b/c + 20/c + 1·b + 2 ms.

#include <gtest/gtest.h>

#include "scheduling/autoscaler.hpp"

namespace sloserve::sched {
namespace {

core_latency model() {
  return {10, 20, 1, 2};
}

scale_stage stage_at(double rate, double budget_ms = 100) {
  scale_stage s;
  s.l = model();
  s.max_batch = 8;
  s.budget_ms = budget_ms;
  s.rate = s.predicted = rate;
  return s;
}

TEST(autoscaler, sponge_adds_cores_in_place_as_the_rate_rises) {
  auto low = sponge_shape(stage_at(20), 8);
  EXPECT_EQ(low.instances, 1);
  EXPECT_EQ(low.cores, 1);
  auto busy = stage_at(150);
  busy.queued = 4;  // Sponge checks the EDF batches of what is queued
  auto high = sponge_shape(busy, 8);
  EXPECT_EQ(high.instances, 1);
  EXPECT_GT(high.cores, 1);
  EXPECT_GE(model().throughput(high.batch, high.cores), 150);
  EXPECT_LE(model().at(high.batch, high.cores), 100);
  // A smaller budget (more network time) needs more cores for the same rate.
  auto tight_stage = stage_at(150, 25);
  tight_stage.queued = 4;
  auto tight = sponge_shape(tight_stage, 8);
  EXPECT_GT(tight.cores, high.cores);
}

// Sponge checks each request's budget: a tenth of the clients upload slowly and arrive with 16 ms
// left (the mean is 91.6 ms), and queued requests have their own deadlines. Planned with the mean
// budget, the check passes a shape under which those requests miss.
TEST(autoscaler, sponge_checks_each_requests_budget_not_the_mean) {
  auto s = stage_at(20, 91.6);
  auto mean = sponge_shape(s, 8);
  EXPECT_EQ(mean.cores, 1);
  EXPECT_GT(model().at(mean.batch, mean.cores), 16) << "over the slow clients' 16 ms";
  for (int i = 0; i < 90; ++i) s.arrival_budgets_ms.push_back(100);
  for (int i = 0; i < 10; ++i) s.arrival_budgets_ms.push_back(16);
  EXPECT_DOUBLE_EQ(arrival_budget_ms(s), 16);
  auto each = sponge_shape(s, 8);
  EXPECT_EQ(each.cores, 3) << "l(1, 2) = 18 ms, l(1, 3) = 13 ms";
  EXPECT_LE(model().at(each.batch, each.cores), 16);
  // Four queued requests, one with 10 ms left: the first EDF batch must end within it, and the
  // rest after it within theirs. The mean budget's four copies pass at one core, batch 2.
  auto queued = stage_at(20, 91.6);
  queued.queued = 4;
  auto by_mean = sponge_shape(queued, 8);
  EXPECT_EQ(by_mean.cores, 1);
  queued.queue_budgets_ms = {10, 40, 40, 40, -5};
  queued.arrival_budgets_ms = {100};
  auto by_request = sponge_shape(queued, 8);
  EXPECT_EQ(by_request.cores, 5) << "l(1, 5) = 9 ms; the request already late is not planned for";
  EXPECT_EQ(sponge_budgets(queued), (std::vector<double>{10, 40, 40, 40, 100}));
}

TEST(autoscaler, biscale_absorbs_a_surge_vertically_and_goes_horizontal_beyond_max_cores) {
  // Two one-core instances at batch 2 carry 2 x 45.5 = 91 req/s besides instance 0.
  stage_shape now{3, 1, 2, 2, 0, 3};  // three instances planned by the horizontal loop
  auto calm = biscale_vertical(stage_at(110), now, 8);
  // Instance 0 carries the other 19 req/s on one core; batch cap 2: the largest b with
  // 2·l(b, 1) within the 100 ms budget.
  EXPECT_EQ(calm, (stage_shape{3, 1, 2, 2, 0, 3}));
  auto surge = biscale_vertical(stage_at(300), now, 8);
  EXPECT_EQ(surge.instances, 3);  // in place: no instance starts
  EXPECT_GT(surge.cores, 1);
  EXPECT_GE(model().throughput(surge.batch, surge.cores), 300 - 2 * model().throughput(2, 1));
  EXPECT_EQ(surge.in_place(), 1) << "instance 0 alone is enough";
  // Beyond what instance 0 carries at 8 cores (about 355 req/s, with 91 beside it), the running
  // instances grow in place together (thesis P4.5.1.2), still with no instance to start: two of
  // them carry what the third, at one core, does not.
  auto more = biscale_vertical(stage_at(600), now, 8);
  EXPECT_EQ(more.instances, 3);
  EXPECT_EQ(more.in_place(), 2);
  EXPECT_LE(more.cores, 8);
  EXPECT_GE(shape_capacity(model(), more), 600);
  EXPECT_LT(2 * model().throughput(more.batch, more.cores - 1) + model().throughput(2, 1), 600)
      << "at the fewest cores that do";
  // Beyond all three at 8 cores (about 1,065 req/s), one-core instances start now for the rest.
  auto flood = biscale_vertical(stage_at(1500), now, 8);
  EXPECT_GT(flood.instances, 3);
  EXPECT_EQ(flood.cores, 8);
  EXPECT_EQ(flood.in_place(), 3);
  EXPECT_GE(shape_capacity(model(), flood), 1500);
  EXPECT_EQ(flood.total_cores(), 3 * 8 + flood.instances - 3);
  // The instances the surge started stop, and the others shrink, once instance 0 can carry the
  // excess by itself.
  auto after = biscale_vertical(stage_at(110), flood, 8);
  EXPECT_EQ(after.instances, 3);
  EXPECT_EQ(after.cores, 1);
  EXPECT_EQ(after.in_place(), 1);
}

TEST(autoscaler, biscale_takes_in_place_what_one_core_batches_lose_when_the_budget_shrinks) {
  // Two one-core instances at batch 4 carry 121 req/s under a 100 ms budget. A longer upload
  // leaves 80 ms: 2·l(4, 1) = 132 ms no longer fits, only batch 1 does (2 x 30.3 req/s).
  stage_shape now{3, 1, 4, 4, 0, 3};
  auto tight = biscale_vertical(stage_at(110, 80), now, 8);
  EXPECT_EQ(tight.instances, 3);
  EXPECT_EQ(tight.horizontal_batch, 1);
  EXPECT_LE(model().at(tight.batch, tight.cores), 80);  // Sponge's check on instance 0
  EXPECT_GE(model().throughput(tight.batch, tight.cores), 110 - 2 * model().throughput(1, 1));
  EXPECT_GE(shape_capacity(model(), tight), 110);
  // The budget back: the one-core instances batch again and instance 0 returns to one core.
  auto calm = biscale_vertical(stage_at(110, 100), tight, 8);
  EXPECT_EQ(calm.cores, 1);
  EXPECT_EQ(calm.horizontal_batch, 2);
  EXPECT_GE(shape_capacity(model(), calm), 110);
}

TEST(autoscaler, one_core_throughput_is_the_best_batch_within_the_budget) {
  // 2·l(2, 1) = 88 ms fits 100 ms, 2·l(3, 1) = 110 ms does not.
  EXPECT_EQ(one_core_batch(model(), 100, 8), 2);
  EXPECT_NEAR(one_core_throughput(model(), 100, 8), 2 / 0.044, 1e-9);
  EXPECT_EQ(one_core_batch(model(), 100, 1), 1);
  EXPECT_EQ(one_core_batch(model(), 60, 8), 0);
  EXPECT_EQ(one_core_throughput(model(), 60, 8), 0);
}

TEST(autoscaler, biscale_goes_horizontal_only_once_the_load_is_stable) {
  stage_shape surge{3, 6, 4, 4};
  EXPECT_EQ(biscale_horizontal(stage_at(300, 200), surge, false, 8), surge);
  // Per core, one-core instances carry more than one big instance (Amdahl): with a 200 ms
  // budget they batch 7 (2·l(7, 1) = 198 ms), 70.7 req/s a core, and 300 req/s take five
  // one-core instances: instance 0 back to one core.
  auto settled = biscale_horizontal(stage_at(300, 200), surge, true, 8);
  EXPECT_EQ(settled.cores, 1);
  EXPECT_EQ(settled.instances, 5);
  EXPECT_EQ(settled.base_instances, 5);
  EXPECT_EQ(settled.horizontal_batch, 7);
  EXPECT_GE(shape_capacity(model(), settled), 300);
  auto vertical = sponge_shape(stage_at(300, 200), 64);
  EXPECT_LT(settled.total_cores(), vertical.total_cores());
  // A predictor that still remembers a burst asks for more than the current rate needs: not
  // stable yet, what runs stays (instance 0 carries it in place, and the next surge).
  auto remembering = stage_at(300, 200);
  remembering.predicted = 600;
  EXPECT_EQ(biscale_horizontal(remembering, surge, true, 8), surge);
  // A prediction below the current rate plans for the current rate.
  auto falling = stage_at(300, 200);
  falling.predicted = 150;
  EXPECT_EQ(biscale_horizontal(falling, surge, true, 8), settled);
}

TEST(autoscaler, biscale_keeps_cores_in_place_where_a_short_budget_caps_one_core_batches) {
  // Under 100 ms one core batches 2 (45.5 req/s a core); two cores in place batch 6
  // (2·l(6, 2) = 96 ms), 62.5 req/s a core. 120 req/s: one-core instances only need three
  // cores; instance 0 at two cores carries 125 req/s by itself.
  auto settled = biscale_horizontal(stage_at(120, 100), stage_shape{3, 1, 2, 2, 0, 3}, true, 8);
  EXPECT_EQ(settled.instances, 1);
  EXPECT_EQ(settled.cores, 2);
  EXPECT_EQ(settled.batch, 6);
  EXPECT_GE(shape_capacity(model(), settled), 120);
  EXPECT_LT(settled.total_cores(), one_core_instances(model(), 120, 100, 8).first);
  // 300 req/s: a mix of both takes six cores, one fewer than seven one-core instances, and
  // keeps every batch within the budget.
  auto mixed = biscale_horizontal(stage_at(300, 100), stage_shape{}, true, 8);
  EXPECT_EQ(mixed.total_cores(), 6);
  EXPECT_EQ(one_core_instances(model(), 300, 100, 8).first, 7);
  EXPECT_GE(shape_capacity(model(), mixed), 300);
  EXPECT_LE(2 * model().at(mixed.batch, mixed.cores), 100);
  EXPECT_LE(2 * model().at(mixed.horizontal_batch, 1), 100);
  // With most of the budget gone to the upload one core cannot batch at all: instance 0 takes
  // everything in place, or, beyond max_cores, what runs stays.
  auto tight = biscale_horizontal(stage_at(100, 60), stage_shape{3, 6, 4, 4}, true, 8);
  EXPECT_EQ(tight.instances, 1);
  EXPECT_GE(shape_capacity(model(), tight), 100);
  EXPECT_EQ(biscale_horizontal(stage_at(900, 60), stage_shape{3, 6, 4, 4}, true, 8), (stage_shape{3, 6, 4, 4}));
}

TEST(autoscaler, fa2_plans_one_core_instances_for_the_predicted_rate) {
  std::vector<scale_stage> chain{stage_at(50), stage_at(50)};
  chain[0].children = {1};
  auto low = fa2_shapes(chain, 200);
  for (auto& s : low) EXPECT_EQ(s.cores, 1);
  chain[0].predicted = chain[1].predicted = 400;
  auto high = fa2_shapes(chain, 200);
  ASSERT_EQ(high.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_GT(high[i].instances, low[i].instances);
    EXPECT_GE(high[i].instances * model().throughput(high[i].batch, 1), 400);
  }
  EXPECT_LE(model().at(high[0].batch, 1) + model().at(high[1].batch, 1), 200);
  // No traffic still keeps one instance per stage.
  std::vector<scale_stage> idle{stage_at(0)};
  EXPECT_EQ(fa2_shapes(idle, 200)[0].instances, 1);
}

TEST(autoscaler, stable_load_is_within_the_band_of_the_mean) {
  EXPECT_FALSE(stable_load({}, 0.25));
  EXPECT_TRUE(stable_load({100, 110, 95, 105}, 0.25));
  EXPECT_FALSE(stable_load({100, 100, 500, 100}, 0.25));
  EXPECT_TRUE(stable_load({0, 0, 0}, 0.25));
}

}  // namespace
}  // namespace sloserve::sched
