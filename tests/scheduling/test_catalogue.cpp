// MCDNN's catalogue under memory: stages with variants run the most accurate ones that the
// cluster's memory holds, with the highest rate-weighted accuracy a brute force over every
// combination finds; the epoch's plan then fits and its table names the variants chosen.

#include <gtest/gtest.h>

#include <random>

#include "config/cluster_config.hpp"
#include "scheduling/catalogue.hpp"
#include "scheduling/placement.hpp"
#include "tests/parse_config.hpp"

namespace sloserve {
namespace {

cluster_config parse(const std::string& yaml) {
  return testing::parse_config(yaml);
}

// One device of 1000 MB: the two large variants (600 MB each) do not fit beside each other.
const char* one_device = R"(
nodes:
  - {name: ctl, address: tcp://127.0.0.1:0, roles: [controller, frontend]}
  - {name: w1, address: tcp://127.0.0.1:0, roles: [worker], devices: [{kind: emulated, count: 1, memory_mb: 1000}]}
models:
  - {name: big, input: {dtype: float32, shape: [2]}, output: {dtype: float32, shape: [2]}, max_batch: 8,
     profile: {alpha_ms: 1, beta_ms: 2}, accuracy: 78.31, memory_mb: 600}
  - {name: small, input: {dtype: float32, shape: [2]}, output: {dtype: float32, shape: [2]}, max_batch: 8,
     profile: {alpha_ms: 0.5, beta_ms: 1}, accuracy: 69.76, memory_mb: 300}
  - {name: big2, input: {dtype: float32, shape: [2]}, output: {dtype: float32, shape: [2]}, max_batch: 8,
     profile: {alpha_ms: 1, beta_ms: 2}, accuracy: 76.13, memory_mb: 600}
  - {name: small2, input: {dtype: float32, shape: [2]}, output: {dtype: float32, shape: [2]}, max_batch: 8,
     profile: {alpha_ms: 0.5, beta_ms: 1}, accuracy: 71.88, memory_mb: 300}
pipelines:
  - {name: a, slo_ms: 200, stages: [{name: s, variants: [small, big]}]}
  - {name: b, slo_ms: 200, stages: [{name: s, variants: [small2, big2]}]}
)";

TEST(catalogue, a_cluster_too_small_for_every_large_variant_degrades_the_one_that_costs_least_accuracy) {
  auto cfg = parse(one_device);
  auto in = planning_input(cfg, cfg.models);
  // b carries three times a's rate: a gives up 8.55 points on 10 req/s, b would give up 4.25 on 30.
  in.rates = {10, 30};
  auto out = sched::plan_scaled_epoch(in, nullptr);
  ASSERT_TRUE(out) << out.error();
  EXPECT_TRUE(out->variants_fit);
  ASSERT_EQ(out->degraded.size(), 1u);
  EXPECT_EQ(out->degraded[0], "pipeline 'a' stage 's': big (78.31%, 600 MB) -> small (69.76%, 300 MB)");
  EXPECT_EQ(out->result.devices_missing, 0u);
  auto placement = epoch_placement(cfg, in, out->result, 1);
  for (auto& b : placement.table.budgets) EXPECT_EQ(b.model, b.pipeline == "a" ? "small" : "big2");
  // The device holds what the table names, and nothing beyond its memory.
  std::set<std::string> held;
  for (auto& d : placement.schedules["w1"].devices)
    for (auto& s : d.sessions) held.insert(s.model);
  EXPECT_EQ(held, (std::set<std::string>{"small", "big2"}));
  // With room for both, nothing degrades.
  auto roomy = parse(std::string(one_device).replace(std::string(one_device).find("count: 1,"), 9, "count: 2,"));
  auto in2 = planning_input(roomy, roomy.models);
  in2.rates = {10, 30};
  auto out2 = sched::plan_scaled_epoch(in2, nullptr);
  ASSERT_TRUE(out2);
  EXPECT_TRUE(out2->degraded.empty());
}

TEST(catalogue, mcdnn_s_greedy_steps_down_by_accuracy_lost_per_mb_saved) {
  auto cfg = parse(one_device);
  std::vector<std::vector<double>> rates{{10}, {30}};
  size_t calls = 0;
  auto fits = [&](const std::vector<pipeline>& ps) {
    ++calls;
    double mb = 0;
    for (auto& p : ps) mb += cfg.models[p.stages[0].model_index].memory_mb;
    return mb <= 1000;
  };
  auto greedy = sched::choose_variants(cfg.pipelines, cfg.models, rates, fits, 1);
  EXPECT_FALSE(greedy.exact);
  EXPECT_TRUE(greedy.fits);
  EXPECT_EQ(greedy.pipelines[0].stages[0].model, "small");
  EXPECT_EQ(greedy.pipelines[1].stages[0].model, "big2");
  EXPECT_NEAR(greedy.accuracy, 10 * 0.6976 + 30 * 0.7613, 1e-9);
  EXPECT_NEAR(greedy.best_accuracy, 10 * 0.7831 + 30 * 0.7613, 1e-9);
  EXPECT_EQ(calls, 2u) << "the most accurate, then one step down";
  // Nothing fits: the smallest of every stage, said so.
  auto none = sched::choose_variants(cfg.pipelines, cfg.models, rates, [](auto&) { return false; });
  EXPECT_FALSE(none.fits);
  EXPECT_EQ(none.pipelines[0].stages[0].model, "small");
  EXPECT_EQ(none.pipelines[1].stages[0].model, "small2");
}

// Random small clusters and pipelines: the choice equals the best rate-weighted accuracy among
// every combination whose epoch plan fits, found by brute force through the same planner.
TEST(catalogue, the_choice_is_the_best_that_fits_by_brute_force_on_random_clusters) {
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> u(0, 1);
  int compared = 0, degraded = 0;
  for (int trial = 0; trial < 300; ++trial) {
    int stages = 2 + static_cast<int>(rng() % 2), variants = 2 + static_cast<int>(rng() % 2);
    std::string y =
        "nodes:\n  - {name: ctl, address: tcp://127.0.0.1:0, roles: [controller, frontend]}\n"
        "  - {name: w1, address: tcp://127.0.0.1:0, roles: [worker], devices: [{kind: emulated, count: " +
        std::to_string(1 + rng() % 3) + ", memory_mb: " + std::to_string(400 + rng() % 600) + "}]}\nmodels:\n";
    for (int s = 0; s < stages; ++s)
      for (int v = 0; v < variants; ++v) {
        char buf[400];
        std::snprintf(buf, sizeof buf,
                      "  - {name: m%d_%d, input: {dtype: float32, shape: [2]}, output: {dtype: float32, shape: [2]}, "
                      "max_batch: 8, profile: {alpha_ms: %.2f, beta_ms: %.2f}, accuracy: %.2f, memory_mb: %d}\n",
                      s, v, 0.5 + 3 * u(rng), 1 + 4 * u(rng), 50 + 30 * u(rng), 100 + static_cast<int>(rng() % 500));
        y += buf;
      }
    y += "pipelines:\n";
    for (int s = 0; s < stages; ++s) {
      y += "  - {name: p" + std::to_string(s) + ", slo_ms: 100, stages: [{name: s, variants: [";
      for (int v = 0; v < variants; ++v) y += (v ? ", m" : "m") + std::to_string(s) + "_" + std::to_string(v);
      y += "]}]}\n";
    }
    auto cfg = parse(y);
    auto in = planning_input(cfg, cfg.models);
    for (int s = 0; s < stages; ++s) in.rates.push_back(5 + 200 * u(rng));
    auto fits = [&](const std::vector<pipeline>& ps) {
      auto t = in;
      t.pipelines = &ps;
      auto r = sched::plan_epoch(t, nullptr);
      return r && r->devices_missing == 0 && r->placement.infeasible.empty();
    };
    // Brute force: every combination through the planner.
    double best = -1;
    std::vector<size_t> idx(static_cast<size_t>(stages), 0);
    while (true) {
      auto ps = cfg.pipelines;
      double value = 0;
      for (int s = 0; s < stages; ++s) {
        auto& st = ps[static_cast<size_t>(s)].stages[0];
        st.model_index = st.variant_indices[idx[static_cast<size_t>(s)]];
        value += in.rates[static_cast<size_t>(s)] * *cfg.models[st.model_index].accuracy / 100;
      }
      if (value > best && fits(ps)) best = value;
      size_t k = 0;
      while (k < idx.size() && ++idx[k] == static_cast<size_t>(variants)) idx[k++] = 0;
      if (k == idx.size()) break;
    }
    auto chosen = sched::choose_epoch_variants(in, nullptr);
    if (best < 0) {
      EXPECT_FALSE(chosen.fits) << y;
      continue;
    }
    ++compared;
    degraded += !chosen.degraded.empty();
    ASSERT_TRUE(chosen.fits) << y;
    EXPECT_NEAR(chosen.accuracy, best, 1e-6) << y;
    EXPECT_TRUE(fits(*in.chosen)) << y;
  }
  std::printf("%d instances compared, %d of them degraded\n", compared, degraded);
  EXPECT_GE(compared, 200);
  EXPECT_GE(degraded, 30) << "the instances must make memory bind often enough to test the choice";
}

}  // namespace
}  // namespace sloserve
