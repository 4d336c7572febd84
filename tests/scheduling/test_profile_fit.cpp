#include <gtest/gtest.h>

#include "scheduling/profile_fit.hpp"

namespace sloserve::sched {
namespace {

TEST(profile_fit, linear_recovers_alpha_and_beta) {
  std::vector<int> b{1, 2, 4, 8, 16};
  std::vector<double> l;
  for (int x : b) l.push_back(1.5 * x + 4);
  auto f = fit_linear(b, l);
  ASSERT_TRUE(f.ok);
  EXPECT_NEAR(f.b1, 1.5, 1e-9);
  EXPECT_NEAR(f.c, 4, 1e-9);
  EXPECT_NEAR(f.rms_ms, 0, 1e-9);
}

TEST(profile_fit, quadratic_recovers_curvature_and_beats_linear_on_it) {
  std::vector<int> b{1, 2, 4, 8, 16, 32};
  std::vector<double> l;
  for (int x : b) l.push_back(0.02 * x * x + 0.7 * x + 3);
  auto q = fit_quadratic(b, l);
  ASSERT_TRUE(q.ok);
  EXPECT_NEAR(q.a, 0.02, 1e-9);
  EXPECT_NEAR(q.b1, 0.7, 1e-9);
  EXPECT_NEAR(q.c, 3, 1e-9);
  auto lin = fit_linear(b, l);
  EXPECT_GT(lin.rms_ms, 0.5);
  EXPECT_GT(lin.max_rel_err, q.max_rel_err);
}

TEST(profile_fit, too_few_points_is_not_a_fit) {
  EXPECT_FALSE(fit_quadratic({1, 2}, {3, 4}).ok);
  EXPECT_FALSE(fit_linear({4, 4, 4}, {3, 4, 5}).ok);
}

}  // namespace
}  // namespace sloserve::sched
