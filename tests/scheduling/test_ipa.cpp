// IPA's configuration solver against a worked example and against brute force.

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <optional>
#include <random>
#include <tuple>

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

// The base allocation (thesis P3.1): the fewest cores at which one replica serves the threshold
// at the largest batch within the SLA, as Table P3.5 lists them per threshold. l(b, c) =
// 40 b / c + 10 / c + 2 b + 3 ms (gamma, epsilon, delta, eta) at batch 8: 330/c + 19 ms.
TEST(ipa, the_base_allocation_is_the_fewest_cores_serving_the_threshold_within_the_sla) {
  core_latency l{40, 10, 2, 3};
  // c = 1: 349 ms (22.9/s); 2: 184 (43.5/s); 3: 129 (62.0/s); 4: 101.5 (78.8/s); 6: 74 (108/s).
  EXPECT_EQ(ipa_base_allocation(l, 20, 400, 8, 16), 1);
  EXPECT_EQ(ipa_base_allocation(l, 40, 400, 8, 16), 2);
  EXPECT_EQ(ipa_base_allocation(l, 60, 400, 8, 16), 3);
  EXPECT_EQ(ipa_base_allocation(l, 20, 110, 8, 16), 4) << "the SLA asks for more than the threshold";
  EXPECT_EQ(ipa_base_allocation(l, 100, 400, 8, 16), 6);
  EXPECT_EQ(ipa_base_allocation(l, 500, 400, 8, 16), 0) << "beyond what 16 cores serve";
  // Against every R on random profiles.
  std::mt19937 rng(9);
  std::uniform_real_distribution<double> u(0, 1);
  for (int t = 0; t < 200; ++t) {
    core_latency x{50 * u(rng), 20 * u(rng), 3 * u(rng), 5 * u(rng) + 0.1};
    double th = 200 * u(rng), sla = 20 + 500 * u(rng);
    int b = 1 + static_cast<int>(u(rng) * 32);
    int want = 0;
    for (int r = 16; r >= 1; --r)
      if (b / x.at(b, r) * 1e3 >= th && x.at(b, r) <= sla) want = r;
    EXPECT_EQ(ipa_base_allocation(x, th, sla, b, 16), want) << t;
  }
}

// Every variant with `cores:` gets its base allocation against its stage's share of the SLO (in
// proportion to its variants' mean l(1, 1)); a variant without keeps its base_cores.
TEST(ipa, base_allocations_split_the_slo_by_the_stages_weight_and_leave_profiles_alone) {
  std::vector<model_spec> models(3);
  models[0].name = "det_s", models[0].max_batch = 8, models[0].cores = core_latency{40, 10, 2, 3};  // l(1,1) 55
  models[1].name = "det_l", models[1].max_batch = 8, models[1].cores = core_latency{80, 20, 4, 6};  // l(1,1) 110
  models[2].name = "cls", models[2].max_batch = 8, models[2].profile.alpha_ms = 1, models[2].profile.beta_ms = 1;
  models[2].base_cores = 3;
  pipeline p;
  p.name = "p";
  p.slo_ms = 1000;
  p.stages.resize(2);
  p.stages[0].name = "d";
  p.stages[0].variant_indices = {0, 1};
  p.stages[1].name = "c";
  p.stages[1].variant_indices = {2};
  p.stages[1].parents = {0};
  p.stages[0].children = {1};
  p.topo = {0, 1};
  // Weights: d 82.5 (the mean of 55 and 110), c 2 (l(1) of the profile): d's SLA 1000 x 82.5 /
  // 84.5 = 976 ms. At 20/s and batch 8: det_s 1 core (349 ms, 22.9/s); det_l (660/c + 38 ms)
  // needs 43.5... c = 2: 368 ms, 21.7/s.
  auto changed = apply_base_allocation(models, {p}, 20, 16);
  EXPECT_EQ(models[0].base_cores, 1);
  EXPECT_EQ(models[1].base_cores, 2);
  EXPECT_EQ(models[2].base_cores, 3) << "no cores: its own";
  EXPECT_EQ(changed, (std::vector<std::string>{"det_l: 2"}));
  // A tight SLO: d's share is 97.6 ms; det_s needs 330/c + 19 <= 97.6: c = 5; det_l 660/c + 38:
  // c = 12.
  p.slo_ms = 100;
  apply_base_allocation(models, {p}, 20, 16);
  EXPECT_EQ(models[0].base_cores, 5);
  EXPECT_EQ(models[1].base_cores, 12);
  auto in = ipa_problem(models, p, {20, 20});
  EXPECT_DOUBLE_EQ(in[0].variants[1].base_cores, 12);
  EXPECT_NEAR(in[0].variants[1].at(8), 660.0 / 12 + 38, 1e-9) << "planned at its base allocation";
}

TEST(ipa, a_worked_chain_takes_the_accurate_variant_where_the_slo_allows_it) {
  // Two stages at 100 requests/s, SLO 60 ms. Stage 0: a small (70%, l(b) = 2b + 3 ms) or a large
  // variant (80%, l(b) = 10b + 10 ms); stage 1: one variant (90%, l(b) = b + 1 ms).
  auto small = linear(2, 3, 8), large = linear(10, 10, 8), only = linear(1, 1, 8);
  std::vector<ipa_stage> stages(2);
  stages[0].variants = {{{&small, 70, 1}}, {{&large, 80, 1}}};
  stages[0].rate = 100;
  stages[1].variants = {{{&only, 90, 1}}};
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
  stages[0].variants = {{{&m, 70, 1}}};
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

// 400 random pipelines of 2-4 stages (chains and DAGs) with 2-4 variants each, half of them with
// SLOs of their own on some sinks (40-100% of the pipeline's), and a third of the stages with a
// cascade as one variant (a second model on a fraction f of the requests, f from 0 to 1): the
// solver's objective equals the best over every choice of variant and batch (and a cascade's
// second batch), found by a brute force written here from IPA's problem alone (no helper of the
// solver's): replicas the fewest that carry the rate, a stage's latency l(b) + (b - 1)/rate (a
// cascade's plus l2(b2) + (b2 - 1)/(rate·f)), every path within its sink's SLO, the objective
// alpha·prod(accuracy) - beta·sum(replicas·R) - delta·sum(b), a cascade's accuracy
// (1 - f)·a + f·a2, its cores and batches both models'.
TEST(ipa, equals_brute_force_on_random_small_pipelines) {
  std::mt19937_64 rng(2024);
  std::uniform_real_distribution<double> u(0, 1);
  int solved = 0, infeasible = 0, own_slos = 0, held_back = 0, cascades = 0, cascaded = 0;
  for (int trial = 0; trial < 400; ++trial) {
    size_t n = 2 + rng() % 3;
    std::vector<model_spec> models, seconds(n);
    models.reserve(16);
    std::vector<std::optional<drawn>> second(n);  // a stage's cascade (its variant 0)
    std::vector<double> fall(n, 0);
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
        stages[s].variants.push_back({{nullptr, d.accuracy, d.cores}});
      }
      if (u(rng) < 0.35) {  // variant 0 is a cascade: a slower, more accurate second after it
        drawn d;
        d.alpha = 2 + 10 * u(rng), d.beta = 5 + 20 * u(rng), d.max_batch = 1 + static_cast<int>(rng() % 6);
        d.accuracy = 70 + 29 * u(rng), d.cores = 1 + std::floor(3 * u(rng));
        seconds[s] = linear(d.alpha, d.beta, d.max_batch);
        second[s] = d;
        fall[s] = u(rng) < 0.15 ? 0 : u(rng);
        ++cascades;
      }
      rate[s] = stages[s].rate = 20 + 300 * u(rng);
      for (size_t p = 0; p < s; ++p)
        if (p + 1 == s ? u(rng) < 0.8 : u(rng) < 0.3) after[s].push_back(p);
      stages[s].after = after[s];
    }
    size_t next = 0;
    for (auto& s : stages)
      for (auto& v : s.variants) v.model = &models[next++];
    for (size_t s = 0; s < n; ++s)
      if (second[s])
        stages[s].variants[0].then = ipa_cascade{{&seconds[s], second[s]->accuracy, second[s]->cores}, fall[s]};
    ipa_weights w{1 + 9 * u(rng), 0.001 + 0.05 * u(rng), 0.001 * u(rng)};
    double slo = 20 + 150 * u(rng);
    // Each stage's SLO: the pipeline's, but a sink's own on odd trials (some of them).
    std::vector<double> bound(n, slo);
    std::vector<bool> followed(n, false);
    for (size_t s = 0; s < n; ++s)
      for (auto p : after[s]) followed[p] = true;
    bool any_own = false;
    for (size_t s = 0; s < n; ++s)
      if (trial % 2 && !followed[s] && u(rng) < 0.7) {
        bound[s] = stages[s].slo_ms = slo * (0.4 + 0.6 * u(rng));
        any_own = true;
      }
    own_slos += any_own;

    double best = -std::numeric_limits<double>::infinity();
    std::vector<std::tuple<size_t, int, int>> pick(n);
    std::function<void(size_t)> all = [&](size_t s) {
      if (s == n) {
        double accuracy = 1, cores = 0, batches = 0, longest = 0;
        std::vector<double> done(n, 0);
        for (size_t x = 0; x < n; ++x) {
          auto [v, b, b2] = pick[x];
          auto& d = own[x][v];
          double per_s = 1000.0 * b / d.l(b);
          double replicas = std::max(1.0, std::ceil(rate[x] / per_s - 1e-9));
          double start = 0;
          for (auto p : after[x]) start = std::max(start, done[p]);
          done[x] = start + d.l(b) + 1000.0 * (b - 1) / rate[x];
          double a = d.accuracy / 100;
          if (v == 0 && second[x]) {
            auto& d2 = *second[x];
            double rate2 = rate[x] * fall[x];
            done[x] += d2.l(b2) + (rate2 > 0 ? 1000.0 * (b2 - 1) / rate2 : 0);
            cores += std::max(1.0, std::ceil(rate2 / (1000.0 * b2 / d2.l(b2)) - 1e-9)) * d2.cores;
            a = (1 - fall[x]) * a + fall[x] * d2.accuracy / 100;
            batches += b2;
          }
          longest = std::max(longest, done[x] - bound[x] + slo);  // over its own SLO: over the SLO
          accuracy *= a;
          cores += replicas * d.cores;
          batches += b;
        }
        if (longest <= slo + 1e-9) best = std::max(best, w.alpha * accuracy - w.beta * cores - w.delta * batches);
        return;
      }
      for (size_t v = 0; v < own[s].size(); ++v)
        for (int b : own[s][v].batches()) {
          int last = v == 0 && second[s] && fall[s] > 0 ? second[s]->max_batch : 1;
          for (int b2 = 1; b2 <= last; ++b2) {
            pick[s] = {v, b, b2};
            all(s + 1);
          }
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
    // Every sink's paths within its own SLO, and the choice differs from the one-SLO optimum
    // where that one breaks a sink's.
    std::vector<double> done(n, 0);
    for (size_t s = 0; s < n; ++s) {
      double start = 0;
      for (auto p : after[s]) start = std::max(start, done[p]);
      done[s] = start + r->stages[s].latency_ms;
      EXPECT_LE(done[s], bound[s] + 1e-9) << "trial " << trial << ": stage " << s;
    }
    if (any_own) {
      auto one = stages;
      for (auto& s : one) s.slo_ms = 0;
      if (auto free = solve_ipa(one, slo, w); free && free->objective > r->objective + 1e-9) ++held_back;
    }
    for (size_t s = 0; s < n; ++s) {
      auto& c = r->stages[s];
      auto& d = own[s][c.variant];
      EXPECT_GE(c.replicas * 1000.0 * c.batch / d.l(c.batch), rate[s] - 1e-6)
          << "trial " << trial << ": replicas carry the rate";
      if (c.variant == 0 && second[s]) {
        ++cascaded;
        EXPECT_GE(c.replicas2, 1) << "trial " << trial << ": the second stays loaded";
        EXPECT_GE(c.replicas2 * 1000.0 * c.batch2 / second[s]->l(c.batch2), rate[s] * fall[s] - 1e-6)
            << "trial " << trial << ": the second's replicas carry what falls through";
        EXPECT_GT(c.latency_ms, c.first_ms) << "trial " << trial;
      } else {
        EXPECT_EQ(c.replicas2, 0) << "trial " << trial;
      }
    }
    ++solved;
  }
  EXPECT_GT(solved, 300) << "most random pipelines have a solution (" << infeasible << " had none)";
  std::printf(
      "ipa on %d random pipelines: %d solved, %d with sinks' own SLOs, %d of them held below the one-SLO optimum; "
      "%d cascade stages, %d of them chosen\n",
      400, solved, own_slos, held_back, cascades, cascaded);
  EXPECT_GT(held_back, 20) << "sinks' own SLOs change the choice";
  EXPECT_GT(cascaded, 30) << "cascades are chosen";
  EXPECT_LT(cascaded, cascades - 30) << "and passed over";
}

}  // namespace
}  // namespace sloserve::sched
