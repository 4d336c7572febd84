// The load generator's pure parts: synthetic and file traces, arrival gaps, and the tally that
// accounts for every request.

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <numeric>

#include "loadgen/load.hpp"

namespace sloserve {
namespace {

TEST(traces, bursty_is_five_times_the_base_for_five_seconds_every_minute) {
  auto t = bursty_trace(100, 5, 5, 60, 180, 7);
  ASSERT_EQ(t.size(), 180u);
  auto mean = [&](int from, int to) { return std::accumulate(t.begin() + from, t.begin() + to, 0.0) / (to - from); };
  for (int p : {0, 60, 120}) {
    EXPECT_NEAR(mean(p, p + 5), 500, 40);      // Poisson around 500 over 5 s
    EXPECT_NEAR(mean(p + 5, p + 60), 100, 8);  // and around 100 between bursts
  }
  EXPECT_EQ(bursty_trace(100, 5, 5, 60, 180, 7), t);  // the seed fixes it
}

TEST(traces, stepped_holds_each_level_and_cycles) {
  auto t = stepped_trace({7, 3, 1}, 2, 8);
  EXPECT_EQ(t, (std::vector<double>{7, 7, 3, 3, 1, 1, 7, 7}));
  EXPECT_TRUE(stepped_trace({}, 2, 8).empty());
}

TEST(traces, a_rate_file_names_the_line_of_a_bad_rate) {
  auto path = std::filesystem::temp_directory_path() / ("trace-" + std::to_string(getpid()));
  std::ofstream(path) << "# rates\n10\n\n20 # peak\n";
  auto ok = read_rate_trace(path);
  ASSERT_TRUE(ok) << ok.error();
  EXPECT_EQ(*ok, (std::vector<double>{10, 20}));
  std::ofstream(path) << "10\n-3\n";
  auto bad = read_rate_trace(path);
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().find(":2: a rate cannot be negative"), std::string::npos) << bad.error();
  std::ofstream(path) << "10\nfast\n";
  bad = read_rate_trace(path, "Mbps");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().find(":2: expected a rate (Mbps)"), std::string::npos) << bad.error();
  std::filesystem::remove(path);
  EXPECT_FALSE(read_rate_trace(path));
}

TEST(arrivals, constant_gaps_are_exact_and_poisson_gaps_average_to_the_rate) {
  arrivals constant(arrival_kind::constant, 1, 1);
  EXPECT_DOUBLE_EQ(constant.gap_s(200), 0.005);
  arrivals poisson(arrival_kind::poisson, 1, 7), gamma(arrival_kind::gamma, 4, 7);
  double p = 0, g = 0;
  for (int i = 0; i < 20000; ++i) p += poisson.gap_s(100), g += gamma.gap_s(100);
  EXPECT_NEAR(p / 20000, 0.01, 0.0005);
  EXPECT_NEAR(g / 20000, 0.01, 0.001);
}

// A second at 0 is a second of silence, wherever it falls: at the start, in the middle, or
// through the warm-up; what follows it is sent at its own rate.
TEST(arrivals, a_trace_replays_whole_through_its_silent_seconds) {
  std::vector<double> trace{100, 0, 0, 50, 0};
  for (auto kind : {arrival_kind::constant, arrival_kind::poisson}) {
    arrivals gen(kind, 1, 7);
    std::vector<int> per_second(trace.size(), 0);
    double t = -2;  // a warm-up at the first second's rate
    int warm = 0;
    while (true) {
      t = next_arrival_s(gen, trace, 1, t);
      if (!(t < static_cast<double>(trace.size()))) break;
      if (t < 0)
        ++warm;
      else
        ++per_second[static_cast<size_t>(t)];
    }
    EXPECT_NEAR(warm, 200, 45);
    EXPECT_NEAR(per_second[0], 100, 35);
    EXPECT_EQ(per_second[1], 0);
    EXPECT_EQ(per_second[2], 0);
    EXPECT_NEAR(per_second[3], 50, 25) << "arrivals resume after the silence";
    EXPECT_EQ(per_second[4], 0);
  }
  // A trace that starts silent sends nothing until its first rate; one all silent, nothing.
  arrivals gen(arrival_kind::constant, 1, 1);
  EXPECT_NEAR(next_arrival_s(gen, {0, 0, 10}, 1, -1), 2.1, 1e-9);
  EXPECT_TRUE(std::isinf(next_arrival_s(gen, {0, 0}, 1, 0)));
  // `scale`: a lane's share of the rate.
  EXPECT_NEAR(next_arrival_s(gen, {10}, 0.5, 0), 0.2, 1e-9);
}

TEST(tally, every_reply_is_counted_once_and_lanes_merge) {
  std::vector<lane_tally> lanes(2, lane_tally(3));
  msg::client_reply ok{1, msg::status::ok, "", {}, {{"s", "w1", 0, 4, 2.0, 5.0, "small"}}, 9.0};
  lanes[0].sent(0);
  lanes[0].reply(ok, 0, 10, 0, 100);  // within the SLO
  lanes[0].sent(1);
  lanes[0].reply(ok, 1, 95, 10, 100);  // OK, but the upload made it miss the SLO
  lanes[1].sent(1);
  lanes[1].reply({2, msg::status::dropped, "early drop: 1.5 ms left", {}, {}, 0}, 1, 3, 0, 100);
  lanes[1].sent(2);
  lanes[1].reply({3, msg::status::dropped, "early drop: 2.25 ms left", {}, {}, 0}, 2, 3, 0, 100);
  msg::client_reply v2{4, msg::status::ok, "", {}, {{"s", "w1", 0, 4, 2.0, 5.0, "small:v2", 2}}, 9.0};
  lanes[1].sent(2);
  lanes[1].reply(v2, 2, 10, 0, 100);
  lanes[1].sent(2);
  lanes[1].lost();
  lanes[1].late();
  lanes[1].delayed();
  auto s = merge_lanes(lanes, 3);
  EXPECT_EQ(s.sent, 6u);
  EXPECT_EQ(s.ok, 3u);
  EXPECT_EQ(s.ok_within_slo, 2u);
  EXPECT_EQ(s.dropped, 2u);
  EXPECT_EQ(s.lost, 1u);
  EXPECT_EQ(s.late, 1u);
  EXPECT_EQ(s.lanes, 2u);
  EXPECT_DOUBLE_EQ(s.attainment, 2.0 / 6);
  EXPECT_DOUBLE_EQ(s.generator_late_fraction, 1.0 / 6);
  EXPECT_EQ(s.reasons.size(), 1u) << "reasons count by their words: " << s.reasons.dump();
  EXPECT_EQ(s.nodes["w1"], 3);
  EXPECT_EQ(s.models["small"], 2) << "which variant ran each stage";
  EXPECT_EQ(s.versions, nlohmann::json({{"small", {{"1", 2}, {"2", 1}}}})) << "and which version, lanes merged";
  EXPECT_DOUBLE_EQ(s.breakdown["exec"]["p50"].get<double>(), 5.0);
  ASSERT_EQ(s.series.size(), 3u);
  EXPECT_EQ(s.series[1]["sent"], 2);
  EXPECT_FALSE(s.warnings().empty()) << "17% sent late is a warning";
}

}  // namespace
}  // namespace sloserve
