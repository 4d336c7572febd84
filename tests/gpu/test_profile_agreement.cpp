// Start-up profiles on a real device are stable: two in a row, with the settings a worker
// profiles with at start-up, agree within 10% at every batch. Wall-clock by nature, so ctest runs
// it alone (RUN_SERIAL): a neighbour test on the same 2 cores would be measured instead.

#include <gtest/gtest.h>

#include <algorithm>

#include "gpu/executor.hpp"
#include "gpu/profiler.hpp"

namespace sloserve {
namespace {

TEST(profile_agreement, two_start_up_profiles_in_a_row_agree_within_ten_percent_on_cpu) {
  model_spec m;
  m.name = "tiny_cnn";
  m.path = std::string(SLOSERVE_MODELS_DIR) + "/tiny_cnn.pt";
  m.input = {dtype::float32, {3, 8, 8}};
  m.output = {dtype::float32, {5}};
  m.max_batch = 8;
  std::string err;
  auto ex = make_executor("cpu", 0, 1, err);
  ASSERT_TRUE(ex) << err;
  profile_options o;  // what node_runtime uses at start-up
  o.min_runs = 10;
  o.max_seconds = 1;
  std::vector<profile_point> a, b;
  ASSERT_TRUE(profile_model(*ex, m, o, a, err)) << err;
  ASSERT_TRUE(profile_model(*ex, m, o, b, err)) << err;
  ASSERT_EQ(a.size(), 4u);  // 1, 2, 4, 8
  for (size_t i = 0; i < a.size(); ++i)
    EXPECT_NEAR(a[i].ms, b[i].ms, 0.10 * std::min(a[i].ms, b[i].ms)) << "batch " << a[i].batch;
}

}  // namespace
}  // namespace sloserve
