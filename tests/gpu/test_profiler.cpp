// The profiler on an emulated device (exact l(b)), and its profile read back as config.

#include <gtest/gtest.h>

#include "config/cluster_config.hpp"
#include "gpu/profiler.hpp"

namespace sloserve {
namespace {

TEST(profiler, measures_an_emulated_profile_and_reads_back) {
  model_spec m;
  m.name = "m";
  m.input = {dtype::float32, {8}};
  m.output = {dtype::float32, {2}};
  m.max_batch = 16;
  m.profile.alpha_ms = 0.5;
  m.profile.beta_ms = 3;
  auto ex = make_emulated_executor(1);
  profile_options o;
  o.min_runs = 5;
  o.max_runs = 5;
  std::vector<profile_point> points;
  std::string err;
  ASSERT_TRUE(profile_model(*ex, m, o, points, err)) << err;
  ASSERT_EQ(points.size(), 5u);  // 1, 2, 4, 8, 16
  for (auto& p : points) EXPECT_NEAR(p.p99_ms, 0.5 * p.batch + 3, 0.5) << "batch " << p.batch;
  auto yaml = std::string(R"(nodes:
  - {name: n, address: "tcp://127.0.0.1:0", roles: [controller, frontend, worker], devices: [{kind: emulated}]}
models:
  - name: m
    input: {dtype: float32, shape: [8]}
    output: {dtype: float32, shape: [2]}
    max_batch: 16
    )") + to_profile_yaml(points) + "\n";
  auto r = parse_cluster_config(yaml, "profiled.yaml");
  ASSERT_TRUE(r) << r.error_text() << yaml;
  auto& back = r.config->models[0].profile;
  ASSERT_EQ(back.batch.size(), 5u);
  for (size_t i = 0; i < points.size(); ++i) EXPECT_NEAR(back.latency_ms_at(points[i].batch), points[i].p99_ms, 1e-3);
}

TEST(profiler, written_profiles_never_decrease) {
  std::vector<profile_point> pts{{1, 10, 0, 0, 0.5}, {2, 10, 0, 0, 0.9}, {4, 10, 0, 0, 0.8}, {8, 10, 0, 0, 1.2}};
  EXPECT_EQ(to_profile_yaml(pts), "profile: {batch: [1, 2, 4, 8], latency_ms: [0.5, 0.9, 0.9, 1.2]}");
}

TEST(profiler, rejects_batches_beyond_max_batch) {
  model_spec m;
  m.name = "m";
  m.input = {dtype::float32, {1}};
  m.output = {dtype::float32, {1}};
  m.max_batch = 4;
  auto ex = make_emulated_executor(1);
  profile_options o;
  o.batches = {2, 8};
  std::vector<profile_point> points;
  std::string err;
  EXPECT_FALSE(profile_model(*ex, m, o, points, err));
  EXPECT_NE(err.find("batch 8 is outside 1..4"), std::string::npos) << err;
}

}  // namespace
}  // namespace sloserve
