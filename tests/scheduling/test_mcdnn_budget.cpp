// MCDNN's scheduler under a budget (thesis 002, Algorithm 4.1): per-request budgets by usage
// frequency, checked against the formula written out here and against what it promises (every
// future request at its budget spends what is left); the variant each stage runs, against every
// variant tried; and an epoch that gives the stage used most the more accurate variant.

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "scheduling/mcdnn_budget.hpp"
#include "scheduling/pipeline_load.hpp"
#include "scheduling/placement.hpp"
#include "tests/parse_config.hpp"

namespace sloserve {
namespace {

// Random instances: a handful of stages with frequencies, reload costs and load ages. Every
// stage's budget equals (r - dr T / dt) f / (T sum f^2), computed here term by term; without
// reload costs, sum_n r_n f_n T is the budget left.
TEST(mcdnn_budget, per_request_budgets_follow_the_usage_frequencies_and_spend_what_is_left) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<double> u(0, 1);
  for (int trial = 0; trial < 300; ++trial) {
    size_t n = 1 + rng() % 8;
    double left = 1 + 100 * u(rng), horizon = 60 + 36000 * u(rng);
    std::vector<sched::budget_use> uses(n);
    for (auto& x : uses) {
      x.frequency = u(rng) < 0.1 ? 0 : 500 * u(rng);
      x.load_cost = trial % 2 ? 0 : 0.01 * u(rng);
      x.since_load_s = u(rng) < 0.3 ? std::numeric_limits<double>::infinity() : 1 + 600 * u(rng);
    }
    auto got = sched::per_request_budgets(left, horizon, uses);
    ASSERT_EQ(got.size(), n);
    double sum_squares = 0;
    for (size_t i = 0; i < n; ++i) sum_squares += std::pow(uses[i].frequency, 2);
    double spent = 0;
    for (size_t i = 0; i < n; ++i) {
      double discount = std::isinf(uses[i].since_load_s) ? 0 : uses[i].load_cost * horizon / uses[i].since_load_s;
      double want =
          sum_squares > 0 ? std::max(0.0, (left - discount) * uses[i].frequency / (horizon * sum_squares)) : 0;
      EXPECT_NEAR(got[i], want, 1e-12 * std::max(1.0, want)) << "trial " << trial << " stage " << i;
      spent += got[i] * uses[i].frequency * horizon;
    }
    if (trial % 2 && sum_squares > 0) {
      EXPECT_NEAR(spent, left, 1e-9 * left) << "trial " << trial;
    }
  }
  // A stage used ten times as often gets ten times the budget per request.
  auto two = sched::per_request_budgets(10, 100, {{100, 0, 1}, {10, 0, 1}});
  EXPECT_NEAR(two[0] / two[1], 10, 1e-9);
  EXPECT_EQ(sched::per_request_budgets(10, 0, {{100, 0, 1}})[0], 0) << "the horizon has passed";
}

model_spec variant(const std::string& name, double accuracy, double alpha_ms, double beta_ms) {
  model_spec m;
  m.name = name;
  m.accuracy = accuracy;
  m.max_batch = 32;
  m.profile.alpha_ms = alpha_ms;
  m.profile.beta_ms = beta_ms;
  return m;
}

// The variant chosen is the most accurate whose cost is within the budget (the cheaper of two
// as accurate), else the cheapest: every option is tried here.
TEST(mcdnn_budget, each_stage_runs_the_most_accurate_variant_within_its_budget) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<double> u(0, 1);
  for (int trial = 0; trial < 300; ++trial) {
    std::vector<model_spec> models;
    std::vector<size_t> options;
    std::vector<double> costs;
    size_t n = 1 + rng() % 6;
    for (size_t k = 0; k < n; ++k) {
      models.push_back(variant("v" + std::to_string(k), std::round(60 + 30 * u(rng)), 0, 0));
      options.push_back(k);
      costs.push_back(u(rng));
    }
    double budget = 1.2 * u(rng);
    auto got = sched::variant_within(options, costs, models, budget);
    std::optional<size_t> best;
    size_t cheapest = 0;
    for (size_t k = 0; k < n; ++k) {
      if (costs[k] < costs[cheapest]) cheapest = k;
      if (costs[k] > budget) continue;
      if (!best || *models[k].accuracy > *models[*best].accuracy ||
          (*models[k].accuracy == *models[*best].accuracy && costs[k] < costs[*best]))
        best = k;
    }
    EXPECT_EQ(got, best.value_or(cheapest)) << "trial " << trial;
  }
}

// A request's cost: its device time at the largest batch within half the SLO, at the price.
TEST(mcdnn_budget, a_requests_cost_is_its_device_time_at_the_batch_a_plan_runs_times_the_price) {
  auto m = variant("m", 80, 2, 6);  // l(b) = 2b + 6 ms
  // SLO 100: l(b) <= 50 up to b = 22; 50 ms / 22 requests.
  EXPECT_NEAR(sched::cost_per_request(m, 100, 3), 50.0 / 22 / 3.6e6 * 3, 1e-15);
  EXPECT_NEAR(sched::cost_per_request(m, 10, 1), 8.0 / 3.6e6, 1e-15) << "batch 1 when nothing is within half";
  m.load_ms = 1800;
  EXPECT_NEAR(sched::load_cost(m, 2), 0.001, 1e-15);
}

const char* two_pipelines = R"(
nodes:
  - {name: ctl, address: tcp://127.0.0.1:0, roles: [controller, frontend]}
  - {name: w1, address: tcp://127.0.0.1:0, roles: [worker], devices: [{kind: emulated, count: 4}]}
models:
  - {name: big, input: {dtype: float32, shape: [2]}, output: {dtype: float32, shape: [2]}, max_batch: 32,
     profile: {alpha_ms: 2, beta_ms: 4}, accuracy: 78}
  - {name: small, input: {dtype: float32, shape: [2]}, output: {dtype: float32, shape: [2]}, max_batch: 32,
     profile: {alpha_ms: 0.5, beta_ms: 1}, accuracy: 70}
pipelines:
  - {name: busy, slo_ms: 100, stages: [{name: s, variants: [small, big]}]}
  - {name: quiet, slo_ms: 100, stages: [{name: s, variants: [small, big]}]}
)";

// Two stages of the same variants, one used ten times as often: with a budget that pays the
// large variant only at the larger per-request share, the busy stage runs it and the quiet one
// steps down; a budget that is gone runs both small; without a budget both run big.
TEST(mcdnn_budget, the_epoch_gives_the_stage_used_most_the_more_accurate_variant) {
  auto cfg = testing::parse_config(two_pipelines);
  auto big = sched::cost_per_request(*cfg.find_model("big"), 100, 1);
  auto small = sched::cost_per_request(*cfg.find_model("small"), 100, 1);
  ASSERT_LT(small, big);
  auto plan = [&](std::optional<sched::cost_budget> budget) {
    auto in = planning_input(cfg, cfg.models);
    in.rates = {100, 10};
    in.budget = budget;
    auto out = sched::plan_scaled_epoch(in, nullptr);
    EXPECT_TRUE(out) << out.error();
    std::vector<std::string> runs;
    for (auto& p : *in.pipelines) runs.push_back(p.stages[0].model);
    EXPECT_EQ((*in.pipelines)[0].stages[0].variant_indices.size(), 2u) << "the stage keeps every variant it may run";
    return std::make_pair(runs, out ? out->degraded : std::vector<std::string>{});
  };
  // r_busy = r * 100 / (T * 10100): the budget that pays `big` there exactly, and a bit more.
  double horizon = 3600, enough = big * horizon * 10100 / 100 * 1.01;
  auto [runs, degraded] = plan(sched::cost_budget{enough, horizon, {}});
  EXPECT_EQ(runs, (std::vector<std::string>{"big", "small"}));
  ASSERT_EQ(degraded.size(), 1u);
  EXPECT_NE(degraded[0].find("small within its budget"), std::string::npos) << degraded[0];
  EXPECT_EQ(plan(sched::cost_budget{0, horizon, {}}).first, (std::vector<std::string>{"small", "small"}));
  EXPECT_EQ(plan(std::nullopt).first, (std::vector<std::string>{"big", "big"}));
  EXPECT_EQ(plan(sched::cost_budget{enough * 20, horizon, {}}).first, (std::vector<std::string>{"big", "big"}));
}

// The account: spending by the rates and the variants that ran, what is left of the horizon,
// and a stage's variant counted as loaded when it changes.
TEST(mcdnn_budget, the_account_charges_what_ran_at_its_rate_and_ages_the_loaded_variants) {
  auto cfg = testing::parse_config(two_pipelines);
  sched::budget_account account(10, 1000);
  auto running = cfg.pipelines;
  sched::pipeline_rates rates;
  rates.pipelines = {{100, {100}}, {10, {10}}};
  account.adopt(100, running);
  account.charge(100, running, cfg.models, rates, 2);
  EXPECT_EQ(account.spent(), 0) << "nothing before the first charge";
  account.charge(110, running, cfg.models, rates, 2);
  double big = sched::cost_per_request(*cfg.find_model("big"), 100, 2);
  EXPECT_NEAR(account.spent(), 110 * 10 * big, 1e-12);
  auto v = account.view(150);
  EXPECT_NEAR(v.remaining, 10 - account.spent(), 1e-12);
  EXPECT_NEAR(v.remaining_s, 950, 1e-9);
  EXPECT_NEAR(v.since_load_s.at({0, 0}), 50, 1e-9);
  running[1].stages[0].model_index = static_cast<size_t>(cfg.find_model("small") - cfg.models.data());
  account.adopt(150, running);
  v = account.view(160);
  EXPECT_NEAR(v.since_load_s.at({0, 0}), 60, 1e-9) << "unchanged: loaded at first";
  EXPECT_NEAR(v.since_load_s.at({1, 0}), 10, 1e-9) << "changed at 150";
}

}  // namespace
}  // namespace sloserve
