// The profiler on an emulated device (exact l(b)), and its profile read back as config.

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <random>
#include <tuple>

#include "config/cluster_config.hpp"
#include "gpu/profiler.hpp"

namespace sloserve {
namespace {

// A model "m" of `in` floats in and `out` out, l(b) = alpha·b + beta.
model_spec linear_model(int64_t in, int64_t out, int max_batch, double alpha_ms, double beta_ms) {
  model_spec m;
  m.name = "m";
  m.input = {dtype::float32, {in}};
  m.output = {dtype::float32, {out}};
  m.max_batch = max_batch;
  m.profile.alpha_ms = alpha_ms;
  m.profile.beta_ms = beta_ms;
  return m;
}

TEST(profiler, measures_an_emulated_profile_and_reads_back) {
  auto m = linear_model(8, 2, 16, 0.5, 3);
  auto ex = make_emulated_executor(1);
  profile_options o;
  o.min_runs = 5;
  o.max_runs = 5;
  auto measured = profile_model(*ex, m, o);
  ASSERT_TRUE(measured) << measured.error();
  auto& points = *measured;
  ASSERT_EQ(points.size(), 5u);  // 1, 2, 4, 8, 16
  for (auto& p : points) EXPECT_NEAR(p.ms, 0.5 * p.batch + 3, 0.5) << "batch " << p.batch;
  auto yaml = std::string(R"(nodes:
  - {name: n, address: "tcp://127.0.0.1:0", roles: [controller, frontend, worker], devices: [{kind: emulated}]}
models:
  - name: m
    input: {dtype: float32, shape: [8]}
    output: {dtype: float32, shape: [2]}
    max_batch: 16
    )") + to_profile_yaml(points) +
              "\n";
  auto r = parse_cluster_config(yaml, "profiled.yaml");
  ASSERT_TRUE(r) << r.error_text() << yaml;
  auto& back = r.config->models[0].profile;
  ASSERT_EQ(back.batch.size(), 5u);
  for (size_t i = 0; i < points.size(); ++i) EXPECT_NEAR(back.latency_ms_at(points[i].batch), points[i].ms, 1e-3);
}

// A device that records what each batch carried, and takes 1 ms per request of more than 1 KB
// (an image to decode) beside 0.1 ms per small one.
struct recording_executor final : device_executor {
  std::vector<size_t> sizes;  // bytes of every request's first tensor, every run
  device_kind kind() const override { return device_kind::emulated; }
  batch_outcome execute(const model_spec& m, const std::vector<const std::vector<tensor>*>& inputs) override {
    double ms = 0;
    for (auto* r : inputs) {
      sizes.push_back(r->front().data.size());
      ms += r->front().data.size() > 1024 ? 1.0 : 0.1;
    }
    batch_outcome out;
    out.outputs.resize(inputs.size());
    out.busy = std::chrono::microseconds(static_cast<int64_t>(ms * 1000));
    return out;
  }
};

// A model that takes images is profiled on the images its clients send when given them, so
// that their decoding counts in l(b); on its declared input tensor otherwise.
TEST(profiler, a_model_that_takes_images_is_profiled_on_the_images_given) {
  auto m = linear_model(8, 2, 4, 0, 0);
  m.preprocess = image_preprocess{};
  profile_options o;
  o.min_runs = o.max_runs = 3;
  o.passes = 1;
  o.batches = {1, 4};
  recording_executor tensors;
  auto plain = profile_model(tensors, m, o);
  ASSERT_TRUE(plain) << plain.error();
  EXPECT_TRUE(std::all_of(tensors.sizes.begin(), tensors.sizes.end(), [](size_t n) { return n == 32; }));
  o.inputs = {make_tensor({dtype::uint8, {40, 30, 3}}, 1, "image"), make_tensor({dtype::uint8, {2000}}, 2, "image")};
  recording_executor images;
  auto decoded = profile_model(images, m, o);
  ASSERT_TRUE(decoded) << decoded.error();
  EXPECT_TRUE(std::all_of(images.sizes.begin(), images.sizes.end(), [](size_t n) { return n == 3600 || n == 2000; }));
  EXPECT_NE(std::find(images.sizes.begin(), images.sizes.end(), 2000u), images.sizes.end()) << "both, in turn";
  // A run's time is its wall time (here near none) plus what the device reports busy.
  EXPECT_GE((*decoded)[1].ms, 4.0) << "4 images of 1 ms each";
  EXPECT_GE((*plain)[1].ms, 0.4);
}

TEST(profiler, written_profiles_never_decrease) {
  std::vector<profile_point> pts(4);
  for (auto [i, b, ms] : {std::tuple{0, 1, 0.5}, {1, 2, 0.9}, {2, 4, 0.8}, {3, 8, 1.2}}) {
    pts[static_cast<size_t>(i)].batch = b;
    pts[static_cast<size_t>(i)].ms = ms;
  }
  EXPECT_EQ(to_profile_yaml(pts), "profile: {batch: [1, 2, 4, 8], latency_ms: [0.5, 0.9, 0.9, 1.2]}");
}

// A device whose runs take l(b) within ±4%, and 5% of them 2-6x longer (preemption, page
// faults), as a shared machine does. Busy times come from `seed`, so the test is exact.
class noisy_executor final : public device_executor {
 public:
  explicit noisy_executor(uint64_t seed) : rng_(seed) {}
  device_kind kind() const override { return device_kind::cpu; }
  batch_outcome execute(const model_spec& m, const std::vector<const std::vector<tensor>*>& inputs) override {
    batch_outcome out;
    double ms =
        m.profile.latency_ms_at(static_cast<int>(inputs.size())) * std::uniform_real_distribution<>(0.96, 1.04)(rng_);
    if (std::uniform_real_distribution<>(0, 1)(rng_) < 0.05) ms *= std::uniform_real_distribution<>(2, 6)(rng_);
    out.busy = std::chrono::nanoseconds(static_cast<int64_t>(ms * 1e6));
    out.outputs.resize(inputs.size());
    return out;
  }

 private:
  std::mt19937_64 rng_;
};

// Two profiles of the same noisy device agree within 10% at every batch, and each bound is
// tight: outliers are set aside and enough runs are taken for the quantile. A p99 of 20 runs
// (the maximum) does neither.
TEST(profiler, two_profiles_of_a_noisy_device_agree_within_ten_percent) {
  auto m = linear_model(4, 1, 32, 0.4, 2);
  profile_options o;
  o.max_seconds = 1e9;  // runs in no wall time: the run counts decide
  noisy_executor first(1), second(2);
  auto measured_a = profile_model(first, m, o), measured_b = profile_model(second, m, o);
  ASSERT_TRUE(measured_a) << measured_a.error();
  ASSERT_TRUE(measured_b) << measured_b.error();
  auto &a = *measured_a, &b = *measured_b;
  ASSERT_EQ(a.size(), 6u);
  int outliers = 0, spiked = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    double l = m.profile.latency_ms_at(a[i].batch);
    EXPECT_NEAR(a[i].ms, b[i].ms, 0.10 * std::min(a[i].ms, b[i].ms)) << "batch " << a[i].batch;
    EXPECT_GT(a[i].ms, l);         // a high quantile of l(b) ± 4%...
    EXPECT_LT(a[i].ms, 1.05 * l);  // ...not of the spikes
    EXPECT_LE(a[i].error_ms, 0.05 * a[i].ms) << "batch " << a[i].batch;
    outliers += a[i].outliers;
    spiked += a[i].p99_ms > 1.5 * l;  // the raw tail shows the spikes
  }
  EXPECT_GT(outliers, 5);
  EXPECT_GE(spiked, 3);
}

TEST(profiler, robust_quantile_sets_spikes_aside_and_bounds_its_error) {
  std::vector<double> runs;
  for (int i = 0; i < 100; ++i) runs.push_back(10 + 0.01 * i);  // 10.00 .. 10.99
  runs.push_back(80);
  runs.push_back(95);
  double err = 0;
  int outliers = 0;
  double q = robust_quantile(runs, 0.95, err, outliers);
  EXPECT_EQ(outliers, 2);
  EXPECT_NEAR(q, 10.94, 0.011);
  EXPECT_GT(err, 0);
  EXPECT_LT(err, 0.1);
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
  auto measured = profile_model(*ex, m, o);
  ASSERT_FALSE(measured);
  EXPECT_NE(measured.error().find("batch 8 is outside 1..4"), std::string::npos) << measured.error();
}

// An emulated device of a type runs the model's profile for that type, else the default one.
TEST(emulated_executor, runs_the_profile_of_its_device_type) {
  model_spec m;
  m.name = "m";
  m.max_batch = 8;
  m.profile.alpha_ms = 2;
  m.profile.beta_ms = 10;
  latency_profile fast;
  fast.alpha_ms = 0.5;
  fast.beta_ms = 1;
  m.profiles.emplace_back("fast", fast);
  EXPECT_DOUBLE_EQ(make_emulated_executor(1, 1, "fast")->latency_ms(m, 4), 3);
  EXPECT_DOUBLE_EQ(make_emulated_executor(1, 1, "slow")->latency_ms(m, 4), 18);
  EXPECT_DOUBLE_EQ(make_emulated_executor(1)->latency_ms(m, 4), 18);
}

// A fractional instance runs l(b) / share^share_exponent of its type's profile.
TEST(emulated_executor, a_fractional_instance_runs_slower_by_its_models_rule) {
  model_spec m;
  m.name = "m";
  m.max_batch = 8;
  m.profile.alpha_ms = 2;
  m.profile.beta_ms = 10;
  EXPECT_DOUBLE_EQ(make_emulated_executor(1, 1, "", 0.5)->latency_ms(m, 4), 36);
  m.share_exponent = 0.5;
  EXPECT_DOUBLE_EQ(make_emulated_executor(1, 1, "", 0.25)->latency_ms(m, 4), 36);
  EXPECT_DOUBLE_EQ(make_emulated_executor(1, 1, "", 1)->latency_ms(m, 4), 18);
}

// With p99_spread the profile is a batch's tail: batches run at most l(b), down to (1 - spread)
// l(b), spread evenly; with jitter, around l(b) both ways.
TEST(emulated_executor, a_p99_profile_is_what_batches_take_at_worst) {
  auto m = linear_model(2, 2, 4, 2, 10);  // l(2) = 14 ms
  std::vector<tensor> in{make_tensor(m.input, 1, "input")};
  std::vector<const std::vector<tensor>*> batch{&in, &in};
  auto took = [&](int runs) {
    auto ex = make_emulated_executor(7);
    std::vector<double> ms;
    for (int k = 0; k < runs; ++k)
      ms.push_back(std::chrono::duration<double, std::milli>(ex->execute(m, batch).busy).count());
    return ms;
  };
  m.p99_spread = 0.2;
  auto tail = took(400);
  double sum = 0;
  for (double t : tail) {
    EXPECT_LE(t, 14 + 1e-6);
    EXPECT_GE(t, 0.8 * 14 - 1e-6);
    sum += t;
  }
  EXPECT_NEAR(sum / 400, 0.9 * 14, 0.15) << "spread evenly under the profile";
  EXPECT_LT(*std::min_element(tail.begin(), tail.end()), 0.82 * 14);
  m.p99_spread = 0;
  m.jitter = 0.2;
  auto around = took(400);
  EXPECT_GT(*std::max_element(around.begin(), around.end()), 1.15 * 14) << "jitter runs over the profile too";
  m.jitter = 0;
  for (double t : took(3)) EXPECT_NEAR(t, 14, 1e-6);
}

}  // namespace
}  // namespace sloserve
