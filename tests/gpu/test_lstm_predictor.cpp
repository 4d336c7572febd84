// The LSTM rate predictor (scaler.predictor: lstm): seeded, and it learns a recurring shape.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "gpu/lstm_predictor.hpp"

namespace sloserve {
namespace {

// A diurnal load compressed to `period` seconds: 100 + 80·sin, with ±10% seeded noise.
std::vector<double> diurnal(size_t seconds, double period, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> noise(-0.1, 0.1);
  std::vector<double> out;
  for (size_t t = 0; t < seconds; ++t)
    out.push_back((100 + 80 * std::sin(2 * M_PI * static_cast<double>(t) / period)) * (1 + noise(rng)));
  return out;
}

// The largest rate of seconds (t, t + window] of `xs`.
double next_max(const std::vector<double>& xs, size_t t, size_t window) {
  return *std::max_element(xs.begin() + static_cast<std::ptrdiff_t>(t + 1),
                           xs.begin() + static_cast<std::ptrdiff_t>(std::min(xs.size(), t + 1 + window)));
}

TEST(lstm_predictor, the_same_rates_give_the_same_predictions) {
  auto xs = diurnal(200, 60, 3);
  auto a = make_lstm_predictor(), b = make_lstm_predictor();
  ASSERT_TRUE(a && b);
  EXPECT_EQ(a->name(), "lstm");
  EXPECT_EQ(a->predict(), 0);
  for (double x : xs) {
    a->observe(x);
    b->observe(x);
    ASSERT_EQ(a->predict(), b->predict());
  }
  lstm_options other;
  other.seed = 18;
  auto c = make_lstm_predictor(other);
  for (double x : xs) c->observe(x);
  EXPECT_NE(c->predict(), a->predict()) << "another seed, other weights";
}

// Trained online on a recurring load, it forecasts the next 10 s's peak closer than the recent
// maximum does (which is late on every rise and holds every peak 30 s into the fall), and it
// under-forecasts no more often.
TEST(lstm_predictor, learns_a_recurring_load_and_forecasts_its_peaks_closer_than_the_recent_maximum) {
  const size_t window = 10, train = 720, test = 360;
  auto xs = diurnal(train + test + window, 120, 7);
  auto lstm = make_lstm_predictor();
  sched::recent_max_predictor recent(30);
  double lstm_error = 0, recent_error = 0;
  int lstm_short = 0, recent_short = 0;
  for (size_t t = 0; t < train + test; ++t) {
    lstm->observe(xs[t]);
    recent.observe(xs[t]);
    if (t < train) continue;
    double truth = next_max(xs, t, window);
    lstm_error += std::abs(lstm->predict() - truth);
    recent_error += std::abs(recent.predict() - truth);
    lstm_short += lstm->predict() < 0.95 * truth;
    recent_short += recent.predict() < 0.95 * truth;
  }
  EXPECT_LT(lstm_error, 0.25 * recent_error) << lstm_error / test << " vs " << recent_error / test << " req/s";
  EXPECT_LE(lstm_short, recent_short) << "seconds forecast 5% short or more, of " << test;
}

}  // namespace
}  // namespace sloserve
