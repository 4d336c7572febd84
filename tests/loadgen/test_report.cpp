#include <gtest/gtest.h>

#include "loadgen/report.hpp"

namespace sloserve {
namespace {

// A run of 3 s whose replies came back in 10..40 ms, and one second with drops.
std::vector<lane_tally> lanes_of_a_run() {
  std::vector<lane_tally> lanes(1, lane_tally(3));
  for (size_t second = 0; second < 3; ++second)
    for (int i = 0; i < 100; ++i) {
      lanes[0].sent(second);
      msg::client_reply r;
      r.code = second == 1 && i < 10 ? msg::status::dropped : msg::status::ok;
      r.reason = "early drop by sliding_window";
      lanes[0].reply(r, second, 10 + 0.3 * i, 0, 35);
    }
  return lanes;
}

TEST(report, one_page_embeds_the_run_and_draws_it_without_anything_from_outside) {
  auto lanes = lanes_of_a_run();
  auto s = merge_lanes(lanes, 3);
  load_options o;
  o.pipeline = "traffic";
  o.slo_ms = 35;
  auto html = html_report({&s, &o, "sloserve load -c a.yaml --pipeline traffic </script>", "nodes: [a < b]\n"});
  // Four charts, the command and the file escaped, and nothing fetched from anywhere.
  size_t svgs = 0;
  for (size_t at = 0; (at = html.find("<svg", at)) != std::string::npos; ++at) ++svgs;
  EXPECT_EQ(svgs, 4u);
  EXPECT_NE(html.find("nodes: [a &lt; b]"), std::string::npos);
  EXPECT_EQ(html.find("http://"), std::string::npos);
  EXPECT_EQ(html.find("https://"), std::string::npos);
  EXPECT_EQ(html.find("src="), std::string::npos);
  // The embedded data is the run's.
  auto j = report_data(html);
  ASSERT_TRUE(j.is_object());
  EXPECT_EQ(j["command"], "sloserve load -c a.yaml --pipeline traffic </script>");
  EXPECT_EQ(j["summary"]["sent"], 300);
  EXPECT_EQ(j["summary"]["dropped"], 10);
  EXPECT_EQ(j["summary"]["series"].size(), 3u);
  EXPECT_EQ(j["summary"]["series"][1]["dropped"], 10);
  auto& cdf = j["latency_cdf"];
  ASSERT_EQ(cdf.size(), 201u);
  EXPECT_NEAR(cdf.front()[0].get<double>(), 10, 0.01);
  EXPECT_NEAR(cdf.back()[0].get<double>(), 39.7, 0.01);
  EXPECT_DOUBLE_EQ(cdf.back()[1].get<double>(), 1.0);
  for (size_t i = 1; i < cdf.size(); ++i) EXPECT_GE(cdf[i][0].get<double>(), cdf[i - 1][0].get<double>());
  // The p99 chart marks the SLO.
  EXPECT_NE(html.find(">SLO</text>"), std::string::npos);
}

}  // namespace
}  // namespace sloserve
