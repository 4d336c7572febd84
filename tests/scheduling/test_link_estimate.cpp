// The links between frontends and workers: estimates from probe rounds, the models too far for a
// link, and the slots the planner may then use.

#include <gtest/gtest.h>

#include "scheduling/epoch.hpp"
#include "scheduling/link_estimate.hpp"

namespace sloserve::sched {
namespace {

model_spec model(const std::string& name, std::vector<int64_t> shape) {
  model_spec m;
  m.name = name;
  m.input = {dtype::float32, std::move(shape)};
  return m;
}

TEST(link_estimate, the_time_per_byte_is_the_loaded_probe_less_the_empty_one) {
  link_estimate l;
  EXPECT_FALSE(l.known());
  EXPECT_EQ(l.ms_per_mb(), -1);
  l.add(0.2, 0.7, 100'000);  // 0.5 ms more for 0.1 MB
  EXPECT_NEAR(l.ms_per_mb(), 5.0, 1e-9);
  EXPECT_NEAR(l.base_ms(), 0.2, 1e-9);
  l.add(0.3, 0.2, 100'000);  // the loaded one faster: nothing per byte, not less
  EXPECT_NEAR(l.ms_per_mb(), 0.0, 1e-9) << "of two rounds, the smaller";
  EXPECT_NEAR(l.base_ms(), 0.2, 1e-9);
  l.add(0.2, 0.7, 0);  // no bytes: says nothing
  EXPECT_NEAR(l.ms_per_mb(), 0.0, 1e-9);
}

TEST(link_estimate, one_hiccup_is_not_a_slow_link_and_two_slow_rounds_are) {
  link_estimate l;
  for (int i = 0; i < 3; ++i) l.add(0.2, 0.25, 65536);
  double fast = l.ms_per_mb();
  EXPECT_LT(fast, 1.0);
  l.add(0.2, 40.0, 65536);  // the machine paused once
  EXPECT_NEAR(l.ms_per_mb(), fast, 1e-9);
  EXPECT_FALSE(l.busy_for(65536, 100));
  l.add(0.2, 500.0, 65536);  // 1 Mbit/s: about half a second for 64 KiB
  EXPECT_GT(l.ms_per_mb(), 500) << "two of the last three rounds slow";
  EXPECT_TRUE(l.busy_for(65536, 30)) << "the median is the hiccup round now: 40 ms for 64 KiB";
  for (int i = 0; i < 2; ++i) l.add(0.2, 0.25, 65536);  // healed: two fast rounds
  EXPECT_LT(l.ms_per_mb(), 1.0);
}

TEST(link_estimate, a_slow_link_keeps_off_the_models_with_large_inputs_only) {
  std::vector<model_spec> models{model("det", {3, 32, 32}), model("cls", {6})};  // 12,288 and 24 bytes
  // 1 Mbit/s: 8,000 ms per MB. det takes 98 ms to cross, cls 0.2 ms.
  auto far = models_too_far({{"w1", 0.05}, {"w2", 8000}, {"w3", -1}}, models, 20);
  ASSERT_EQ(far.size(), 1u);
  EXPECT_EQ(far["w2"], std::vector<std::string>{"det"});
  EXPECT_TRUE(models_too_far({{"w2", 8000}}, models, 200).empty()) << "within a looser limit";
}

TEST(link_estimate, slots_lose_the_far_models_unless_a_model_would_have_none) {
  std::vector<model_spec> models{model("det", {3, 32, 32}), model("cls", {6})};
  std::vector<device_slot> slots{{"w1", 0, {}, 0}, {"w2", 0, {}, 0}, {"w2", 1, {"det"}, 0}};
  keep_models_off(slots, {{"w2", {"det"}}}, models);
  ASSERT_EQ(slots.size(), 2u) << "w2's det-only device serves nothing now";
  EXPECT_TRUE(slots[0].models.empty());
  EXPECT_EQ(slots[1].node, "w2");
  EXPECT_EQ(slots[1].models, std::vector<std::string>{"cls"});

  // Every worker far for det: det keeps them all (a far worker serves better than none).
  std::vector<device_slot> all{{"w1", 0, {}, 0}, {"w2", 0, {}, 0}};
  keep_models_off(all, {{"w1", {"det"}}, {"w2", {"det"}}}, models);
  ASSERT_EQ(all.size(), 2u);
  EXPECT_TRUE(all[0].models.empty());
  EXPECT_TRUE(all[1].models.empty());

  std::vector<device_slot> none_far{{"w1", 0, {}, 0}};
  keep_models_off(none_far, {}, models);
  EXPECT_TRUE(none_far[0].models.empty());
}

}  // namespace
}  // namespace sloserve::sched
