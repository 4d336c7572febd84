// Biscale: the vertical instance takes what it can, one-core instances the rest.

#include <gtest/gtest.h>

#include "scheduling/biscale.hpp"

namespace sloserve::sched {
namespace {

const core_latency model{40, 20, 2, 5};  // l(b, c) = 40b/c + 20/c + 2b + 5 ms

TEST(biscale, a_load_that_fits_vertically_takes_the_fewest_cores) {
  auto p = biscale(model, 50, 500, 8, 16);
  ASSERT_TRUE(p.feasible);
  EXPECT_EQ(p.instances, 0);
  EXPECT_DOUBLE_EQ(p.vertical_rate, 50);
  EXPECT_GE(model.throughput(p.batch, p.cores), 50);
  EXPECT_EQ(vertical_fit(model, 50, 500, p.cores - 1, 16).first, 0);  // one core fewer cannot
}

TEST(biscale, beyond_vertical_the_rest_goes_to_one_core_instances) {
  // 8 cores carry at most about 16·1000 / (80 + 2.5 + 32 + 5) ≈ 134/s within 500 ms.
  auto p = biscale(model, 400, 500, 8, 16);
  ASSERT_TRUE(p.feasible);
  EXPECT_GT(p.vertical_rate, 100);
  EXPECT_LT(p.vertical_rate, 400);
  // The bisection found the edge: a little more no longer fits vertically.
  EXPECT_NE(vertical_fit(model, p.vertical_rate, 500, 8, 16).first, 0);
  EXPECT_EQ(vertical_fit(model, p.vertical_rate + 1, 500, 8, 16).first, 0);
  double rest = 400 - p.vertical_rate;
  EXPECT_GE(p.instances * model.throughput(p.instance_batch, 1), rest);
  EXPECT_LE(model.at(p.instance_batch, 1) + (p.instance_batch - 1) * 1000.0 / rest, 500);
  EXPECT_LT((p.instances - 1) * model.throughput(p.instance_batch, 1), rest);  // ceil, not more
}

TEST(biscale, a_budget_below_one_request_on_one_core_is_infeasible) {
  EXPECT_FALSE(biscale(model, 400, 60, 8, 16).feasible);  // l(1, 1) = 67 ms
  EXPECT_TRUE(biscale(model, 0, 60, 8, 16).feasible);     // nothing to serve
}

}  // namespace
}  // namespace sloserve::sched
