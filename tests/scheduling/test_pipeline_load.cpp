// Per-pipeline load as epochs plan for it: settling windows, smoothing, fan-out, and when an
// epoch is due.

#include <gtest/gtest.h>

#include "scheduling/epoch.hpp"
#include "scheduling/pipeline_load.hpp"

namespace sloserve::sched {
namespace {

TEST(pipeline_load, settles_on_the_mean_of_full_windows_then_smooths_by_half) {
  pipeline_load load({2}, settle_windows(1000));
  EXPECT_EQ(settle_windows(1000), 2);
  EXPECT_EQ(settle_windows(250), 5);
  load.count(0, 30, {30, 60});  // load started mid-window: a third of the rate
  load.close_window(1);
  EXPECT_DOUBLE_EQ(load.rates().pipelines[0].rate, 30);
  load.count(0, 90, {90, 180});
  load.close_window(1);
  EXPECT_DOUBLE_EQ(load.rates().pipelines[0].rate, 90) << "the partial first window is dropped";
  EXPECT_EQ(load.rates().windows_with_load, 2);
  load.count(0, 110, {110, 220});
  load.close_window(1);
  EXPECT_DOUBLE_EQ(load.rates().pipelines[0].rate, 100) << "then the newest window weighs 0.5";
  EXPECT_DOUBLE_EQ(load.rates().pipelines[0].stage[1], 200);
  load.close_window(0);  // a window of no length changes nothing
  EXPECT_DOUBLE_EQ(load.rates().pipelines[0].rate, 100);
  load.count(7, 1, {1});  // an unknown pipeline is ignored
  load.close_window(2);
  EXPECT_DOUBLE_EQ(load.rates().pipelines[0].rate, 50) << "two seconds without queries halve it";
  EXPECT_EQ(load.rates().windows_with_load, 3);
}

// Frontends report on their own clocks: a window that two reports of one frontend reach, or none,
// still measures the rate they report (not twice it, then nothing); a frontend that stops
// reporting counts its latest rate for two windows, then nothing.
TEST(pipeline_load, reports_on_their_own_clock_measure_their_rate_in_every_window) {
  pipeline_load load({1}, 1);
  // Two frontends at 100 and 50 queries/s, each reporting every second; the first's reports drift
  // across the windows' edges: windows 2 and 4 get two of its reports, 3 and 5 none.
  std::vector<int> first_reports = {1, 2, 0, 2, 0, 1};
  for (size_t k = 0; k < first_reports.size(); ++k) {
    for (int i = 0; i < first_reports[k]; ++i) load.count(0, 100, {200}, {}, {}, "f1", 1);
    load.count(0, 50, {100}, {}, {}, "f2", 1);
    load.close_window(1);
    EXPECT_DOUBLE_EQ(load.rates().pipelines[0].window, 150) << "window " << k;
    EXPECT_DOUBLE_EQ(load.rates().pipelines[0].stage[0], 300) << "window " << k;
  }
  // A report that covers two seconds counts as its rate.
  load.count(0, 200, {400}, {}, {}, "f1", 2);
  load.count(0, 50, {100}, {}, {}, "f2", 1);
  load.close_window(1);
  EXPECT_DOUBLE_EQ(load.rates().pipelines[0].window, 150);
  // f1 stops: its latest rate stands for two windows, then it is gone.
  for (int k = 0; k < 3; ++k) {
    load.count(0, 50, {100}, {}, {}, "f2", 1);
    load.close_window(1);
    EXPECT_DOUBLE_EQ(load.rates().pipelines[0].window, k < 2 ? 150 : 50) << "window " << k;
  }
  // Counted per window, the same reports made windows of 250 and 50 queries/s.
  pipeline_load plain({1}, 1);
  plain.count(0, 100, {200}), plain.count(0, 100, {200}), plain.count(0, 50, {100});
  plain.close_window(1);
  EXPECT_DOUBLE_EQ(plain.rates().pipelines[0].window, 250);
}

// Graft's fragments: each (start layer, SLO)'s queries smoothed as the rates are, as a share of
// the pipeline's, with its clients; one below 1% of the queries goes.
TEST(pipeline_load, fragments_are_shares_of_the_queries_smoothed_as_rates_are) {
  pipeline_load load({1}, 1);
  load.count(0, 100, {100}, {}, {{0, 200, 75, 3}, {4, 100, 25, 1}});
  load.close_window(1);
  auto& f = load.rates().pipelines[0].fragments;
  ASSERT_EQ(f.size(), 2u);
  EXPECT_EQ(f[0], (fragment_share{0, 200, 0.75, 3}));
  EXPECT_EQ(f[1], (fragment_share{4, 100, 0.25, 1}));
  // Two frontends report the same fragment: their queries and clients add up.
  load.count(0, 50, {50}, {}, {{4, 100, 25, 2}});
  load.count(0, 50, {50}, {}, {{4, 100, 25, 2}});
  load.close_window(1);
  // 0.5 x 0 + 0.5 x 75 against 0.5 x 50 + 0.5 x 25.
  EXPECT_NEAR(load.rates().pipelines[0].fragments[0].share, 0.5, 1e-9);
  EXPECT_NEAR(load.rates().pipelines[0].fragments[1].share, 0.5, 1e-9);
  EXPECT_EQ(load.rates().pipelines[0].fragments[1].clients, 3);
  for (int i = 0; i < 8; ++i) {
    load.count(0, 100, {100}, {}, {{4, 100, 100, 1}});
    load.close_window(1);
  }
  ASSERT_EQ(load.rates().pipelines[0].fragments.size(), 1u) << "the fragment that stopped fell below 1% and went";
  EXPECT_EQ(load.rates().pipelines[0].fragments[0].start, 4);
  // The epoch's input carries them beside the rates.
  pipeline p;
  p.name = "p";
  p.slo_ms = 100;
  stage s;
  s.name = "s";
  p.stages = {s};
  std::vector<pipeline> pipes{p};
  std::vector<model_spec> models(1);
  epoch_input in;
  in.pipelines = &pipes;
  in.models = &models;
  set_measured_load(in, load.rates(), 0.1);
  ASSERT_EQ(in.fragments.size(), 1u);
  EXPECT_EQ(in.fragments[0], load.rates().pipelines[0].fragments);
}

TEST(pipeline_load, fan_out_is_measured_where_there_is_traffic_and_declared_elsewhere) {
  pipeline p;
  p.name = "p";
  p.slo_ms = 100;
  stage det;
  det.name = "det";
  det.model = "m";
  stage cls = det;
  cls.name = "cls";
  cls.after = {"det"};
  cls.fanout = 2.5;
  p.stages = {det, cls};
  std::vector<model_spec> models(1);
  models[0].name = "m";
  ASSERT_TRUE(resolve(p, models).empty());
  EXPECT_DOUBLE_EQ(measured_fanout(p, {10, {10, 0}})[1], 2.5) << "no cls invocations yet: as declared";
  EXPECT_DOUBLE_EQ(measured_fanout(p, {10, {10, 31}})[1], 3.1);
  epoch_input in;
  in.models = &models;
  std::vector<pipeline> pipes{p};
  in.pipelines = &pipes;
  set_measured_load(in, {{{10, {10, 31}}}, 3}, 0.1);
  ASSERT_EQ(in.rates.size(), 1u);
  EXPECT_DOUBLE_EQ(in.rates[0], 11);
  EXPECT_DOUBLE_EQ(in.fanouts[0][1], 3.1);
  // A surge plan does not take a fanout lower than the file's or the plan in force's: the stages
  // after the first see a surge late (they wait on it).
  set_measured_load(in, {{{100, {100, 150}}}, 3}, 0, true);
  EXPECT_DOUBLE_EQ(in.fanouts[0][1], 2.5) << "measured 1.5 while the surge had not reached cls: the file's";
  planned_load in_force{{10}, {11}, {{11, 44}}};
  set_measured_load(in, {{{100, {100, 150}}}, 3}, 0, true, &in_force);
  EXPECT_DOUBLE_EQ(in.fanouts[0][1], 4) << "the plan in force carried 4 per query";
  set_measured_load(in, {{{100, {100, 150}}}, 3}, 0, false, &in_force);
  EXPECT_DOUBLE_EQ(in.fanouts[0][1], 1.5) << "no surge: as measured";
}

TEST(epoch_due, first_once_settled_then_on_the_period_or_when_a_rate_leaves_its_band) {
  epoch_rule rule{30, 10, 0.8, 1.1, 2};
  pipeline_rates rates{{{100, {}}}, 1};
  EXPECT_EQ(epoch_due(rule, rates, nullptr, 100), epoch_reason::none) << "not settled";
  rates.windows_with_load = 2;
  EXPECT_EQ(epoch_due(rule, rates, nullptr, 0), epoch_reason::first) << "the first plan";
  planned_load planned{{100}, {440}, {}};
  EXPECT_EQ(epoch_due(rule, rates, &planned, 20), epoch_reason::none);
  EXPECT_EQ(epoch_due(rule, rates, &planned, 30), epoch_reason::period) << "every epoch_s";
  rates.pipelines[0].rate = 120;
  EXPECT_EQ(epoch_due(rule, rates, &planned, 5), epoch_reason::none) << "never before min_epoch_s";
  EXPECT_EQ(epoch_due(rule, rates, &planned, 10), epoch_reason::band) << "above the band";
  rates.pipelines[0].rate = 79;
  EXPECT_EQ(epoch_due(rule, rates, &planned, 10), epoch_reason::band) << "below the band";
  rates.pipelines[0].peak = 100;
  EXPECT_EQ(epoch_due(rule, rates, &planned, 10), epoch_reason::none) << "the recent peak holds the plan";
  planned.rate[0] = 0;
  rates.pipelines[0].rate = 0.4;
  rates.pipelines[0].peak = 0.4;
  EXPECT_EQ(epoch_due(rule, rates, &planned, 10), epoch_reason::none)
      << "a pipeline planned idle stays idle below 0.5/s";
  rates.pipelines[0].rate = 1;
  EXPECT_EQ(epoch_due(rule, rates, &planned, 10), epoch_reason::band);
}

// A window with more than the plan carries re-plans at once, whatever min_epoch_s says; Poisson
// noise within three standard deviations does not.
TEST(epoch_due, a_surge_above_what_the_plan_carries_plans_at_once) {
  epoch_rule rule{30, 10, 0.8, 1.1, 2, 1};
  pipeline_rates rates{{{100, {}}}, 5};
  rates.pipelines[0].peak = 100;
  planned_load planned{{100}, {110}, {}};
  rates.pipelines[0].window = 140;  // 110 + 3·sqrt(110) = 141.5
  EXPECT_EQ(epoch_due(rule, rates, &planned, 0.5), epoch_reason::none) << "within the noise";
  rates.pipelines[0].window = 150;
  EXPECT_EQ(epoch_due(rule, rates, &planned, 0.5), epoch_reason::surge);
  EXPECT_EQ(epoch_due(rule, rates, &planned, 50), epoch_reason::surge) << "a surge before the period says so";
  // A plan made for nothing (or never made for this pipeline) meets its first queries.
  planned = {{0}, {0}, {}};
  rates.pipelines[0] = {};
  rates.pipelines[0].window = 4;
  EXPECT_EQ(epoch_due(rule, rates, &planned, 0.5), epoch_reason::surge);
}

// A stage whose rate is beyond the noise above what the plan carries for it plans again at once
// (a fanout larger than the plan's), whatever min_epoch_s says.
TEST(epoch_due, a_stage_above_what_the_plan_carries_for_it_plans_at_once) {
  epoch_rule rule{30, 10, 0.8, 1.1, 2, 1};
  pipeline_rates rates{{{100, {100, 150}}}, 5};
  rates.pipelines[0].window = 100;
  rates.pipelines[0].peak = 100;
  planned_load planned{{100}, {110}, {{110, 165}}};
  EXPECT_EQ(epoch_due(rule, rates, &planned, 0.5), epoch_reason::none);
  rates.pipelines[0].stage[1] = 200;  // 165 + 3·sqrt(165) = 203.5
  EXPECT_EQ(epoch_due(rule, rates, &planned, 0.5), epoch_reason::none) << "within the noise";
  rates.pipelines[0].stage[1] = 240;
  EXPECT_EQ(epoch_due(rule, rates, &planned, 0.5), epoch_reason::surge);
  planned.stage_carried.clear();
  EXPECT_EQ(epoch_due(rule, rates, &planned, 0.5), epoch_reason::none) << "stages not known: the pipeline's rule";
}

// An idle cluster keeps its plan: nothing to plan for is no reason to plan.
TEST(epoch_due, nothing_at_all_to_plan_for_keeps_the_plan) {
  epoch_rule rule{30, 10, 0.8, 1.1, 2};
  pipeline_rates rates{{{0, {}}, {0, {}}}, 9};
  planned_load planned{{100, 50}, {440, 220}, {}};
  EXPECT_EQ(epoch_due(rule, rates, &planned, 1000), epoch_reason::none);
  EXPECT_EQ(epoch_due(rule, rates, nullptr, 1000), epoch_reason::none);
  rates.pipelines[1].rate = 0.01;
  EXPECT_EQ(epoch_due(rule, rates, &planned, 1000), epoch_reason::period);
}

// The peak decays by its half-life; planning rates are the larger of rate and peak (and of the
// last window, for a surge).
TEST(pipeline_load, the_peak_holds_through_a_lull_and_halves_every_half_life) {
  pipeline_load load({1}, 1, 10);
  for (int i = 0; i < 5; ++i) {
    load.count(0, 100, {100});
    load.close_window(1);
  }
  EXPECT_DOUBLE_EQ(load.rates().pipelines[0].peak, 100);
  for (int i = 0; i < 10; ++i) load.close_window(1);
  auto& r = load.rates().pipelines[0];
  EXPECT_LT(r.rate, 0.1) << "the rate forgets the load in seconds";
  EXPECT_NEAR(r.peak, 50, 1e-9) << "its peak halves in ten";
  EXPECT_NEAR(planning_rate(r), 50, 1e-9);
  load.count(0, 300, {300});
  load.close_window(1);
  EXPECT_DOUBLE_EQ(load.rates().pipelines[0].window, 300);
  EXPECT_NEAR(planning_rate(load.rates().pipelines[0]), 150, 0.1) << "the smoothed rate is above the peak";
  EXPECT_DOUBLE_EQ(planning_rate(load.rates().pipelines[0], true), 300) << "a surge plans for its window";
  // Without a half-life the peak is the rate.
  pipeline_load plain({1}, 1);
  plain.count(0, 100, {100});
  plain.close_window(1);
  plain.close_window(1);
  EXPECT_DOUBLE_EQ(plain.rates().pipelines[0].peak, plain.rates().pipelines[0].rate);
}

}  // namespace
}  // namespace sloserve::sched
