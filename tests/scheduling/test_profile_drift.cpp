// The online profile refresh: when a model's measured batches make the planner adopt a new
// scale, and what scaling a model's latency changes.

#include <gtest/gtest.h>

#include "pipelines/model.hpp"
#include "scheduling/profile_drift.hpp"

namespace sloserve::sched {
namespace {

// One window's worth for the default options: 20 batches the profile says take 10 ms each.
void window(profile_drift& d, const std::string& model, double ratio) {
  d.add(model, 200 * ratio, 200, 20);
}

TEST(profile_drift, a_lasting_slowdown_is_adopted_after_its_windows_and_a_hiccup_is_not) {
  profile_drift d;
  window(d, "m", 1.1);  // within 25%
  window(d, "m", 2.0);  // a hiccup: one window
  window(d, "m", 1.0);
  EXPECT_TRUE(d.take_changes().empty());
  EXPECT_EQ(d.scale("m"), 1);
  window(d, "m", 2.0);
  window(d, "m", 1.9);
  EXPECT_TRUE(d.take_changes().empty()) << "two windows are not yet three";
  window(d, "m", 2.1);
  auto changes = d.take_changes();
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(changes[0].first, "m");
  EXPECT_NEAR(changes[0].second, 2.0, 1e-9);
  EXPECT_NEAR(d.scale("m"), 2.0, 1e-9);
  // Now judged against 2x: running at 2x again changes nothing, and recovering is adopted too.
  for (int i = 0; i < 5; ++i) window(d, "m", 2.05);
  EXPECT_TRUE(d.take_changes().empty());
  for (int i = 0; i < 3; ++i) window(d, "m", 1.0);
  changes = d.take_changes();
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_NEAR(changes[0].second, 1.0, 1e-9);
  EXPECT_EQ(d.scale("other"), 1);
}

TEST(profile_drift, a_window_gathers_enough_profile_time_and_tiny_models_are_not_judged_by_their_overheads) {
  profile_drift d;
  // 190 ms of profile time is not yet a window: nothing is judged until it reaches 200.
  for (int i = 0; i < 19; ++i) d.add("m", 30, 10, 1);
  for (int i = 0; i < 3; ++i) window(d, "other", 1.0);
  EXPECT_TRUE(d.take_changes().empty());
  d.add("m", 30, 10, 1);  // the window closes at 3x: one of three
  window(d, "m", 3);
  window(d, "m", 3);
  EXPECT_EQ(d.take_changes().size(), 1u);
  // A model of 10 µs a batch measured at 0.1 ms: ten times off, by 0.09 ms a batch. Not judged.
  profile_drift tiny;
  for (int i = 0; i < 3 * 20000; ++i) tiny.add("t", 0.1, 0.01, 1);
  EXPECT_TRUE(tiny.take_changes().empty());
  EXPECT_EQ(tiny.scale("t"), 1);
  drift_options once;
  once.windows = 1;
  once.threshold = 0.5;
  profile_drift quick(once);
  window(quick, "m", 1.4);
  EXPECT_TRUE(quick.take_changes().empty()) << "within 50%";
  window(quick, "m", 0.5);
  EXPECT_EQ(quick.take_changes().size(), 1u) << "faster counts too";
}

TEST(profile_drift, scaling_a_model_scales_every_latency_it_has) {
  model_spec m;
  m.profile = {{1, 2, 8}, {10, 11, 80}, 0, 0, false};
  m.profiles = {{"t4", {{}, {}, 2, 3, false}}};
  m.prefix_profile = {{}, {}, 1, 1, false};
  m.cores = core_latency(8, 16, 1, 2);
  layer_spec layer;
  layer.profile = {{}, {}, 1, 0, false};
  m.layers = {layer};
  scale_latency(m, 2);
  EXPECT_DOUBLE_EQ(m.profile.latency_ms_at(2), 22);
  EXPECT_DOUBLE_EQ(m.profile.latency_ms_at(8), 160);
  EXPECT_DOUBLE_EQ(m.profile_for("t4").latency_ms_at(4), 22);
  EXPECT_DOUBLE_EQ(m.prefix_profile.latency_ms_at(3), 8);
  EXPECT_DOUBLE_EQ(m.layers[0].profile.latency_ms_at(5), 10);
  EXPECT_DOUBLE_EQ(m.cores->at(4, 2), 2 * core_latency(8, 16, 1, 2).at(4, 2));
}

}  // namespace
}  // namespace sloserve::sched
