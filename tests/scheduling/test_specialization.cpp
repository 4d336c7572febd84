// Sequential specialization's Windowed ε-Greedy (thesis 002 Algorithm 5.1) on synthetic class
// streams as the thesis evaluates it: segments of a few dominant classes at a skew, and random
// ones. The cascade runs while a skew makes it accurate enough and the oracle alone otherwise.

#include <gtest/gtest.h>

#include <random>

#include "scheduling/specialization.hpp"

namespace sloserve::sched {
namespace {

TEST(specialization, equation_5_1_and_the_dominant_classes) {
  // p a_in + p e a* + (1 - p) a_out a*
  EXPECT_NEAR(cascade_accuracy(0.9, 0.95, 0.04, 0.85, 0.7), 0.9 * 0.95 + 0.9 * 0.04 * 0.7 + 0.1 * 0.85 * 0.7, 1e-12);
  EXPECT_EQ(dominant_classes({3, 1, 3, 2, 1, 7, 3}, 2), (std::vector<int>{1, 3}));
  EXPECT_EQ(dominant_classes({3, 1, 3, 2, 1, 7, 3}, 3), (std::vector<int>{3}));
  EXPECT_NEAR(interpolate({5, 10, 20}, {0.95, 0.9, 0.8}, 15), 0.85, 1e-12);
  EXPECT_NEAR(interpolate({5, 10, 20}, {0.95, 0.9, 0.8}, 2), 0.95, 1e-12);
  EXPECT_NEAR(interpolate({5, 10, 20}, {0.95, 0.9, 0.8}, 40), 0.8, 1e-12);
}

// A stream of `n` frames: with probability `skew` one of `dominant` classes (0..dominant-1),
// else one of 1000 others.
std::vector<int> segment(std::mt19937_64& rng, int n, int dominant, double skew) {
  std::uniform_real_distribution<double> u(0, 1);
  std::vector<int> out;
  for (int i = 0; i < n; ++i)
    out.push_back(u(rng) < skew && dominant > 0 ? static_cast<int>(u(rng) * dominant)
                                                : 100 + static_cast<int>(u(rng) * 1000));
  return out;
}

weg_options options() {
  weg_options o;
  o.classes = {5, 10, 20};
  o.a_in = {0.95, 0.9, 0.8};
  o.e_in_out = {0.03, 0.05, 0.08};
  o.a_out = {0.9, 0.85, 0.8};
  o.oracle_accuracy = 0.7;
  return o;
}

// Runs `frames` through WEG: the oracle knows the class; the compact model is right on the
// dominant classes and says "other" (cascades) on the rest, as the thesis' specialized
// classifier. Returns the share of frames the cascade answered.
// `wrong`: the compact model's own answers are wrong except on every fourth frame.
double run(weg& w, const std::vector<int>& frames, std::mt19937_64& rng, bool wrong = false) {
  size_t cascaded = 0, n = 0;
  for (int y : frames) {
    ++n;
    if (!w.cascades()) {
      w.oracle_answered(y);
      continue;
    }
    ++cascaded;
    auto& d = w.dominant();
    bool known = std::binary_search(d.begin(), d.end(), y);
    if (!known) {
      w.cascade_answered(y, false, std::nullopt);  // "other": the oracle answers
      continue;
    }
    int answer = wrong && n % 4 != 0 ? y + 1 : y;
    w.cascade_answered(answer, true, w.check(rng) ? std::optional<int>(y) : std::nullopt);
  }
  return static_cast<double>(cascaded) / static_cast<double>(frames.size());
}

TEST(specialization, a_skewed_segment_runs_the_cascade_and_a_random_one_returns_to_the_oracle) {
  std::mt19937_64 rng(3);
  weg w(options());
  // Five dominant classes at 90% skew for 5 minutes at 6 frames/s.
  auto skewed = segment(rng, 1800, 5, 0.9);
  double share = run(w, skewed, rng);
  EXPECT_TRUE(w.cascades());
  EXPECT_GT(share, 0.9) << "the cascade answers once the first window showed the skew";
  EXPECT_EQ(w.dominant(), (std::vector<int>{0, 1, 2, 3, 4}));
  EXPECT_NEAR(w.skew(), 0.9, 0.1);
  // Then random frames: the skew the cascade sees falls and the oracle takes over again.
  auto random = segment(rng, 1800, 0, 0);
  share = run(w, random, rng);
  EXPECT_FALSE(w.cascades());
  EXPECT_LT(share, 0.05);
  EXPECT_GE(w.epochs(), 2);
  // A random stream from the start never cascades.
  weg fresh(options());
  EXPECT_EQ(run(fresh, segment(rng, 1800, 0, 0), rng), 0);
  // Little skew: 20 classes at 50%. A window's classes seen twice are few and cover little of
  // it; the cascade runs only on chance clusters and leaves again.
  weg weak(options());
  EXPECT_LT(run(weak, segment(rng, 1800, 20, 0.5), rng), 0.2);
}

// The ε checks: a compact model that disagrees with the oracle on three in four of its own
// answers is found out (more than tau_fp = half of the checked ones), and the stream returns to
// the oracle although its estimate says the skew holds.
TEST(specialization, answers_the_oracle_checks_and_finds_wrong_send_the_stream_back_to_the_oracle) {
  std::mt19937_64 rng(8);
  auto o = options();
  o.epsilon = 0.1;
  weg honest(o), wrong(o);
  auto frames = segment(rng, 3000, 5, 0.9);
  std::mt19937_64 a(1), b(1);
  run(honest, frames, a);
  run(wrong, frames, b, true);
  EXPECT_EQ(honest.epochs(), 1) << "agreeing answers keep the epoch";
  EXPECT_GT(wrong.epochs(), 3) << "each epoch ends once the checks disagree too often";
}

// The template phase explores with the oracle until the last w samples are skewed enough; and
// a new window whose dominant classes are the last epoch's folds into it, so that the template
// phase judges both windows' samples.
TEST(specialization, the_template_phase_explores_and_a_window_like_the_last_epochs_folds_into_it) {
  auto o = options();
  o.window = 10;
  o.a_in = {0.8, 0.8, 0.8};  // at |D| = 2: a = 0.821 p + 0.63 (1 - p), 0.75 from p = 0.63
  weg w(o);
  for (int y : {1, 1, 2, 2, 1, 2, 500, 501, 502, 503}) w.oracle_answered(y);
  EXPECT_EQ(w.now(), weg::phase::template_select) << "60% skew is not enough";
  EXPECT_EQ(w.dominant(), (std::vector<int>{1, 2}));
  EXPECT_NEAR(w.skew(), 0.6, 1e-12);
  EXPECT_EQ(w.judged(), 10u);
  w.oracle_answered(1);  // the last 10: 1 2 2 1 2 500 501 502 503 1
  EXPECT_EQ(w.now(), weg::phase::template_select);
  w.oracle_answered(2);  // 2 2 1 2 500 501 502 503 1 2: 60% again
  w.oracle_answered(1);  // 2 1 2 500 501 502 503 1 2 1: 60%
  w.oracle_answered(1);  // 1 2 500 501 502 503 1 2 1 1
  EXPECT_FALSE(w.cascades());
  w.oracle_answered(2);  // 2 500 501 502 503 1 2 1 1 2: 60%
  w.oracle_answered(1);  // 500 501 502 503 1 2 1 1 2 1
  w.oracle_answered(1);  // 501 502 503 1 2 1 1 2 1 1: 70%
  EXPECT_TRUE(w.cascades());
  EXPECT_NEAR(w.skew(), 0.7, 1e-12);
  // Unskewed answers end the epoch; a window with the same dominant classes folds into it.
  for (int y = 600; w.cascades(); ++y) w.cascade_answered(y, false, std::nullopt);
  EXPECT_EQ(w.epochs(), 2);
  for (int y : {1, 2, 1, 2, 1, 2, 1, 2, 1, 2}) w.oracle_answered(y);
  EXPECT_EQ(w.judged(), 27u) << "the 17 samples of the epoch before, and this window's 10";
  EXPECT_TRUE(w.cascades());
}

}  // namespace
}  // namespace sloserve::sched
