// IPA's configuration solver against a worked example and against brute force.

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>

#include "control/scaler_core.hpp"
#include "scheduling/autoscaler.hpp"
#include "scheduling/ipa.hpp"

namespace sloserve::sched {
namespace {

model_spec linear(double alpha_ms, double beta_ms, int max_batch) {
  model_spec m;
  m.max_batch = max_batch;
  m.profile.alpha_ms = alpha_ms;
  m.profile.beta_ms = beta_ms;
  return m;
}

// A table profile is planned as its table says: l = [10, 11, 80] ms at batch [1, 2, 8] is cheap
// at batch 2 and dear at 8, which a line through l(1) and l(2) (9 + b ms) would hide.
TEST(ipa, a_table_profile_is_planned_as_its_table_says) {
  model_spec m;
  m.name = "m";
  m.max_batch = 8;
  m.accuracy = 70;
  m.profile.batch = {1, 2, 8};
  m.profile.latency_ms = {10, 11, 80};
  pipeline p;
  p.name = "p";
  p.slo_ms = 100;
  stage st;
  st.name = "s";
  st.model = "m";
  st.variant_indices = {0};
  p.stages.push_back(st);
  p.topo = {0};
  std::vector<model_spec> models{m};
  auto in = ipa_problem(models, p, {400});
  ASSERT_EQ(in[0].variants.size(), 1u);
  EXPECT_DOUBLE_EQ(in[0].variants[0].at(8), 80) << "the table, not 9 + 8 ms";
  EXPECT_DOUBLE_EQ(in[0].variants[0].at(2), 11);
  auto solved = solve_ipa(in, p.slo_ms, {});
  ASSERT_TRUE(solved) << solved.error();
  auto& c = solved->stages[0];
  // Each replica carries b / l(b): 182/s at batch 2, 100/s at 8; the cheapest that carries 400/s
  // within 100 ms is batch 2 on 3 replicas.
  EXPECT_EQ(c.batch, 2);
  EXPECT_EQ(c.replicas, 3);
  EXPECT_GE(c.replicas * c.batch / m.profile.latency_ms_at(c.batch) * 1e3, 400);
  // The scaler times the instances of that plan alike (its surge check compares the rate with
  // their capacity): the table at any core count, not a line through l(1) and l(2).
  auto l = latency_of(m);
  EXPECT_DOUBLE_EQ(l.at(8, 1), 80);
  EXPECT_DOUBLE_EQ(l.at(8, 4), 80);
  stage_shape plan;
  plan.instances = c.replicas;
  plan.batch = plan.horizontal_batch = c.batch;
  EXPECT_NEAR(shape_capacity(l, plan), 3 * 2 / 11e-3, 1e-6);
  plan.batch = plan.horizontal_batch = 8;
  EXPECT_NEAR(shape_capacity(l, plan), 3 * 8 / 80e-3, 1e-6) << "300/s at batch 8, not 3 x 470/s";
  // With `cores:`, l(b, c) at the replica's cores stands instead.
  models[0].cores = core_latency{0, 0, 1, 9};
  EXPECT_DOUBLE_EQ(ipa_problem(models, p, {400})[0].variants[0].at(8), 17);
}

TEST(ipa, a_worked_chain_takes_the_accurate_variant_where_the_slo_allows_it) {
  // Two stages at 100 requests/s, SLO 60 ms. Stage 0: a small (70%, l(b) = 2b + 3 ms) or a large
  // variant (80%, l(b) = 10b + 10 ms); stage 1: one variant (90%, l(b) = b + 1 ms).
  auto small = linear(2, 3, 8), large = linear(10, 10, 8), only = linear(1, 1, 8);
  std::vector<ipa_stage> stages(2);
  stages[0].variants = {{&small, 70, 1}, {&large, 80, 1}};
  stages[0].rate = 100;
  stages[1].variants = {{&only, 90, 1}};
  stages[1].after = {0};
  stages[1].rate = 100;
  ipa_weights w{1, 0.01, 0.0001};
  auto r = solve_ipa(stages, 60, w);
  ASSERT_TRUE(r) << r.error();
  // The large variant fits: at batch 1 it takes 20 ms (two replicas carry 100/s), stage 1 at
  // batch 1 takes 2 ms; 0.8 x 0.9 outweighs the replicas' cost.
  EXPECT_EQ(r->stages[0].variant, 1u);
  EXPECT_EQ(r->stages[0].batch, 1);
  EXPECT_EQ(r->stages[0].replicas, 2);
  EXPECT_NEAR(r->accuracy, 0.8 * 0.9, 1e-12);
  EXPECT_LE(r->latency_ms, 60 + 1e-9);
  // The same against every choice by hand.
  double best = -1e18;
  for (size_t v = 0; v < 2; ++v)
    for (int b0 = 1; b0 <= 8; ++b0)
      for (int b1 = 1; b1 <= 8; ++b1) {
        auto e = evaluate_ipa(stages, {{v, b0}, {0, b1}}, w);
        if (e.latency_ms <= 60) best = std::max(best, e.objective);
      }
  EXPECT_NEAR(r->objective, best, 1e-9);
  // A tight SLO leaves only the small variant.
  auto tight = solve_ipa(stages, 8, w);
  ASSERT_TRUE(tight) << tight.error();
  EXPECT_EQ(tight->stages[0].variant, 0u);
  EXPECT_FALSE(solve_ipa(stages, 3, w)) << "nothing fits 3 ms";
}

TEST(ipa, bad_input_is_refused_with_a_reason) {
  auto m = linear(1, 1, 4);
  std::vector<ipa_stage> stages(1);
  EXPECT_NE(solve_ipa(stages, 10, {}).error().find("no variants"), std::string::npos);
  stages[0].variants = {{&m, 70, 1}};
  EXPECT_NE(solve_ipa(stages, 10, {}).error().find("rate"), std::string::npos);
  stages[0].rate = 10;
  stages[0].after = {0};
  EXPECT_NE(solve_ipa(stages, 10, {}).error().find("not before it"), std::string::npos);
  stages[0].after.clear();
  stages[0].variants[0].accuracy = 101;
  EXPECT_NE(solve_ipa(stages, 10, {}).error().find("accuracy"), std::string::npos);
  EXPECT_FALSE(solve_ipa({}, 10, {}));
}

// A variant as the test draws it, so that the brute force below times it from these numbers
// alone: l(b) = alpha·b + beta, or a table of l(1), l(2), l(4), linear between them (with `step`,
// a partial batch costs the next listed size, and only listed sizes are chosen).
struct drawn {
  bool table = false, step = false;
  double alpha = 0, beta = 0;
  double l1 = 0, l2 = 0, l4 = 0;
  int max_batch = 1;
  double accuracy = 0, cores = 1;

  std::vector<int> batches() const {
    if (!table) {
      std::vector<int> out;
      for (int b = 1; b <= max_batch; ++b) out.push_back(b);
      return out;
    }
    return step ? std::vector<int>{1, 2, 4} : std::vector<int>{1, 2, 3, 4};
  }
  double l(int b) const {
    if (!table) return alpha * b + beta;
    if (b <= 1) return l1;
    if (b == 2) return l2;
    if (b == 4 || step) return l4;
    return l2 + (l4 - l2) * (b - 2) / 2.0;  // b = 3
  }
};

// 200 random pipelines of 2-4 stages (chains and DAGs) with 2-4 variants each: the solver's
// objective equals the best over every choice of variant and batch, found by a brute force
// written here from IPA's problem alone (no helper of the solver's): replicas the fewest that
// carry the rate, a stage's latency l(b) + (b - 1)/rate, the longest path within the SLO, the
// objective alpha·prod(accuracy) - beta·sum(replicas·R) - delta·sum(b).
TEST(ipa, equals_brute_force_on_random_small_pipelines) {
  std::mt19937_64 rng(2024);
  std::uniform_real_distribution<double> u(0, 1);
  int solved = 0, infeasible = 0;
  for (int trial = 0; trial < 200; ++trial) {
    size_t n = 2 + rng() % 3;
    std::vector<model_spec> models;
    models.reserve(16);
    std::vector<ipa_stage> stages(n);
    std::vector<std::vector<drawn>> own(n);
    std::vector<std::vector<size_t>> after(n);
    std::vector<double> rate(n);
    for (size_t s = 0; s < n; ++s) {
      size_t k = 2 + rng() % 3;
      for (size_t v = 0; v < k; ++v) {
        drawn d;
        d.alpha = 0.5 + 8 * u(rng), d.beta = 1 + 15 * u(rng), d.max_batch = 1 + static_cast<int>(rng() % 8);
        auto m = linear(d.alpha, d.beta, d.max_batch);
        if (u(rng) < 0.3) {  // some variants with measured, tabular profiles
          d.table = true;
          d.l1 = 2 + 5 * u(rng), d.l2 = d.l1 * (1.2 + u(rng)), d.l4 = d.l2 * (1.2 + u(rng));
          d.step = u(rng) < 0.5;
          d.max_batch = 4;
          m.profile.batch = {1, 2, 4};
          m.profile.latency_ms = {d.l1, d.l2, d.l4};
          m.profile.step = d.step;
          m.max_batch = 4;
        }
        d.accuracy = 50 + 40 * u(rng), d.cores = 1 + std::floor(4 * u(rng));
        models.push_back(m);
        own[s].push_back(d);
        stages[s].variants.push_back({nullptr, d.accuracy, d.cores});
      }
      rate[s] = stages[s].rate = 20 + 300 * u(rng);
      for (size_t p = 0; p < s; ++p)
        if (p + 1 == s ? u(rng) < 0.8 : u(rng) < 0.3) after[s].push_back(p);
      stages[s].after = after[s];
    }
    size_t next = 0;
    for (auto& s : stages)
      for (auto& v : s.variants) v.model = &models[next++];
    ipa_weights w{1 + 9 * u(rng), 0.001 + 0.05 * u(rng), 0.001 * u(rng)};
    double slo = 20 + 150 * u(rng);

    double best = -std::numeric_limits<double>::infinity();
    std::vector<std::pair<size_t, int>> pick(n);
    std::function<void(size_t)> all = [&](size_t s) {
      if (s == n) {
        double accuracy = 1, cores = 0, batches = 0, longest = 0;
        std::vector<double> done(n, 0);
        for (size_t x = 0; x < n; ++x) {
          auto& d = own[x][pick[x].first];
          int b = pick[x].second;
          double per_s = 1000.0 * b / d.l(b);
          double replicas = std::max(1.0, std::ceil(rate[x] / per_s - 1e-9));
          double start = 0;
          for (auto p : after[x]) start = std::max(start, done[p]);
          done[x] = start + d.l(b) + 1000.0 * (b - 1) / rate[x];
          longest = std::max(longest, done[x]);
          accuracy *= d.accuracy / 100;
          cores += replicas * d.cores;
          batches += b;
        }
        if (longest <= slo + 1e-9) best = std::max(best, w.alpha * accuracy - w.beta * cores - w.delta * batches);
        return;
      }
      for (size_t v = 0; v < own[s].size(); ++v)
        for (int b : own[s][v].batches())
          if (b <= own[s][v].max_batch) {
            pick[s] = {v, b};
            all(s + 1);
          }
    };
    all(0);
    auto r = solve_ipa(stages, slo, w);
    if (std::isinf(best)) {
      EXPECT_FALSE(r) << "trial " << trial << ": brute force finds nothing within " << slo << " ms";
      ++infeasible;
      continue;
    }
    ASSERT_TRUE(r) << "trial " << trial << ": " << r.error();
    EXPECT_NEAR(r->objective, best, 1e-6) << "trial " << trial;
    EXPECT_LE(r->latency_ms, slo + 1e-9) << "trial " << trial;
    for (size_t s = 0; s < n; ++s) {
      auto& d = own[s][r->stages[s].variant];
      EXPECT_GE(r->stages[s].replicas * 1000.0 * r->stages[s].batch / d.l(r->stages[s].batch), rate[s] - 1e-6)
          << "trial " << trial << ": replicas carry the rate";
    }
    ++solved;
  }
  EXPECT_GT(solved, 150) << "most random pipelines have a solution (" << infeasible << " had none)";
}

}  // namespace
}  // namespace sloserve::sched
