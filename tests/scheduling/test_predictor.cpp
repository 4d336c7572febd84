// Rate predictors for the horizontal scaler.

#include <gtest/gtest.h>

#include "scheduling/predictor.hpp"

namespace sloserve::sched {
namespace {

TEST(predictor, recent_max_holds_a_burst_for_its_history_then_lets_go) {
  recent_max_predictor p(5);
  EXPECT_EQ(p.predict(), 0);
  for (double r : {100, 100, 500, 100}) p.observe(r);
  EXPECT_EQ(p.predict(), 500);
  for (int i = 0; i < 4; ++i) p.observe(100);
  EXPECT_EQ(p.predict(), 100);  // the burst is more than 5 s old
}

TEST(predictor, trend_anticipates_a_ramp_and_never_predicts_below_the_last_rate) {
  trend_predictor p(10);
  for (int s = 0; s < 10; ++s) p.observe(100 + 10 * s);  // +10/s, last 190
  EXPECT_GT(p.predict(), 250);                           // about 190 + 10 s x 10/s
  EXPECT_LT(p.predict(), 320);
  trend_predictor q(10);
  for (int s = 0; s < 10; ++s) q.observe(300 - 20 * s);  // falling to 120
  EXPECT_EQ(q.predict(), 120);                           // a falling trend does not plan below what is arriving now
  trend_predictor flat(10);
  for (int s = 0; s < 10; ++s) flat.observe(200);
  EXPECT_NEAR(flat.predict(), 200, 1e-9);
}

TEST(predictor, every_name_of_the_knob_makes_the_predictor_of_that_name) {
  // lstm's lives with LibTorch (tests/gpu/test_lstm_predictor.cpp).
  for (auto& [kind, name] : knob<predictor_kind>::names)
    if (kind == predictor_kind::lstm)
      EXPECT_EQ(make_rate_predictor(kind), nullptr);
    else
      EXPECT_EQ(make_rate_predictor(kind)->name(), name);
  EXPECT_EQ(parse_knob<predictor_kind>("oracle"), std::nullopt);
}

}  // namespace
}  // namespace sloserve::sched
