// The node's Prometheus metrics: the exposition format, cumulative histogram buckets, the
// sliding windows of SLO attainment and device busy time, under injected times.

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <sstream>
#include <vector>

#include "actors/metrics.hpp"

namespace sloserve {
namespace {

// The value of the sample line that starts with `series ` (name and labels as rendered); -1
// when there is none.
double value_of(const std::string& text, const std::string& series) {
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);)
    if (line.rfind(series + " ", 0) == 0) return std::stod(line.substr(series.size() + 1));
  return -1;
}

TEST(node_metrics, counts_requests_by_outcome_with_cumulative_duration_buckets) {
  node_metrics m;
  m.request_done("p", "ok", 0.004, true, 100.0);
  m.request_done("p", "ok", 0.03, false, 100.2);
  m.request_done("p", "dropped", 0.0, false, 100.5);
  auto text = m.render("fe", 100.9);
  EXPECT_EQ(value_of(text, R"(sloserve_requests_total{pipeline="p",outcome="ok"})"), 2);
  EXPECT_EQ(value_of(text, R"(sloserve_requests_total{pipeline="p",outcome="dropped"})"), 1);
  EXPECT_EQ(value_of(text, R"(sloserve_request_duration_seconds_bucket{pipeline="p",le="0.0025"})"), 1);
  EXPECT_EQ(value_of(text, R"(sloserve_request_duration_seconds_bucket{pipeline="p",le="0.005"})"), 2);
  EXPECT_EQ(value_of(text, R"(sloserve_request_duration_seconds_bucket{pipeline="p",le="0.025"})"), 2);
  EXPECT_EQ(value_of(text, R"(sloserve_request_duration_seconds_bucket{pipeline="p",le="0.05"})"), 3);
  EXPECT_EQ(value_of(text, R"(sloserve_request_duration_seconds_bucket{pipeline="p",le="+Inf"})"), 3);
  EXPECT_EQ(value_of(text, R"(sloserve_request_duration_seconds_count{pipeline="p"})"), 3);
  EXPECT_NEAR(value_of(text, R"(sloserve_request_duration_seconds_sum{pipeline="p"})"), 0.034, 1e-12);
  EXPECT_NEAR(value_of(text, R"(sloserve_slo_attainment_ratio{pipeline="p"})"), 1.0 / 3, 1e-12);
  EXPECT_EQ(value_of(text, R"(sloserve_node_info{node="fe"})"), 1);
  EXPECT_NE(text.find("# TYPE sloserve_requests_total counter\n"), std::string::npos);
  EXPECT_NE(text.find("# TYPE sloserve_request_duration_seconds histogram\n"), std::string::npos);
}

// Prometheus' histogram_quantile over a rendered histogram: the bucket where the rank falls, then
// linear interpolation within it.
double histogram_quantile(const std::string& text, const std::string& series, double q) {
  std::istringstream lines(text);
  std::vector<std::pair<double, double>> buckets;  // (le, cumulative)
  auto prefix = series + "_bucket{pipeline=\"p\",le=\"";
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(prefix, 0) != 0) continue;
    auto le = line.substr(prefix.size(), line.find('"', prefix.size()) - prefix.size());
    buckets.push_back({le == "+Inf" ? INFINITY : std::stod(le), std::stod(line.substr(line.rfind(' ') + 1))});
  }
  double rank = q * buckets.back().second, below = 0, lower = 0;
  for (auto [le, cumulative] : buckets) {
    if (cumulative >= rank) return lower + (le - lower) * (rank - below) / (cumulative - below);
    lower = le, below = cumulative;
  }
  return lower;
}

// With buckets from the SLO, the p99 Prometheus computes from the histogram is within 5% of the
// true p99 of latencies spread up to the SLO (with the default buckets alone, 0.25-0.5 s around a
// 400 ms SLO, it is off by 10% or more).
TEST(node_metrics, buckets_from_the_slo_put_histogram_quantile_near_the_true_p99) {
  for (bool from_slo : {false, true}) {
    node_metrics m;
    if (from_slo) m.slo_buckets({0.4, 0.1});
    std::vector<double> seen;
    uint64_t x = 7;
    for (int i = 0; i < 20000; ++i) {
      x = x * 6364136223846793005ULL + 1442695040888963407ULL;
      double u = static_cast<double>(x >> 11) / static_cast<double>(1ULL << 53);
      double v = 0.2 + 0.2 * u * u;  // 200-400 ms, most near 200
      seen.push_back(v);
      m.request_done("p", "ok", v, true, 1);
    }
    std::sort(seen.begin(), seen.end());
    double truth = seen[static_cast<size_t>(0.99 * seen.size())];
    double estimate = histogram_quantile(m.render("fe", 1), "sloserve_request_duration_seconds", 0.99);
    if (from_slo)
      EXPECT_NEAR(estimate / truth, 1, 0.05) << estimate << " vs " << truth;
    else
      EXPECT_GT(std::abs(estimate / truth - 1), 0.05) << "the default buckets alone: " << estimate << " vs " << truth;
  }
  node_metrics m;
  EXPECT_NE(m.render("fe", 1).find("sloserve_build_info{version=\""), std::string::npos);
}

// A node shows the families it has series of: a worker, which answers no requests, shows no
// request counters or durations, only what its devices did.
TEST(node_metrics, a_family_without_series_is_left_out) {
  node_metrics worker;
  worker.batch("m", 4);
  auto text = worker.render("w1", 1);
  EXPECT_EQ(text.find("sloserve_requests_total"), std::string::npos) << text;
  EXPECT_EQ(text.find("sloserve_request_duration_seconds"), std::string::npos) << text;
  EXPECT_EQ(text.find("sloserve_drops_total"), std::string::npos) << text;
  EXPECT_NE(text.find("sloserve_batch_size_bucket{model=\"m\",le=\"4\"} 1"), std::string::npos) << text;
}

TEST(node_metrics, attainment_forgets_requests_older_than_its_window) {
  node_metrics m;
  for (int i = 0; i < 10; ++i) m.request_done("p", "dropped", 0, false, 10.0 + i * 0.1);
  m.request_done("p", "ok", 0.01, true, 65.0);
  EXPECT_NEAR(value_of(m.render("fe", 65.5), R"(sloserve_slo_attainment_ratio{pipeline="p"})"), 1.0 / 11, 1e-12);
  // 60 s after the misses, only the hit is left in the window.
  EXPECT_EQ(value_of(m.render("fe", 70.5), R"(sloserve_slo_attainment_ratio{pipeline="p"})"), 1);
  // Nothing answered in the window: no sample rather than a made-up ratio.
  EXPECT_EQ(value_of(m.render("fe", 200), R"(sloserve_slo_attainment_ratio{pipeline="p"})"), -1);
}

TEST(node_metrics, busy_ratio_is_the_share_of_the_recent_window_spent_in_batches) {
  node_metrics m;
  // Up since t = 100 s; half of each second busy, batches that straddle second boundaries.
  for (int s = 100; s < 120; ++s) m.busy("w/0", s + 0.75, s + 1.25);
  // Window: the seconds 111..120, [111, 120.5): 0.5 busy in each of 111..119, 0.25 in 120.
  double expected = (9 * 0.5 + 0.25) / 9.5;
  EXPECT_NEAR(value_of(m.render("w", 120.5), R"(sloserve_device_busy_ratio{device="w/0"})"), expected, 1e-9);
  // A device up for less than a window is judged over its own time.
  node_metrics young;
  young.busy("w/1", 50.0, 50.5);
  EXPECT_NEAR(value_of(young.render("w", 51.0), R"(sloserve_device_busy_ratio{device="w/1"})"), 0.5, 1e-9);
  // Idle for a whole window: 0.
  EXPECT_EQ(value_of(m.render("w", 140.5), R"(sloserve_device_busy_ratio{device="w/0"})"), 0);
}

TEST(node_metrics, device_memory_is_each_served_models_and_the_devices_limit) {
  node_metrics m;
  m.device_memory("w/0", {{"det", 200.0 * 1024 * 1024}, {"cls", 50.0 * 1024 * 1024}}, 1024.0 * 1024 * 1024);
  m.device_memory("w/1", {{"det", 200.0 * 1024 * 1024}}, 0);
  auto text = m.render("w", 1);
  EXPECT_EQ(value_of(text, R"(sloserve_device_memory_used_bytes{device="w/0",model="cls"})"), 50.0 * 1024 * 1024);
  EXPECT_EQ(value_of(text, R"(sloserve_device_memory_total_bytes{device="w/0"})"), 1024.0 * 1024 * 1024);
  EXPECT_EQ(text.find(R"(sloserve_device_memory_total_bytes{device="w/1"})"), std::string::npos) << "not limited";
  // A new schedule's report replaces the device's models.
  m.device_memory("w/0", {{"det", 200.0 * 1024 * 1024}}, 1024.0 * 1024 * 1024);
  EXPECT_EQ(m.render("w", 2).find(R"(model="cls")"), std::string::npos);
}

TEST(node_metrics, batches_queues_drops_and_the_placement) {
  node_metrics m;
  for (int b : {1, 3, 8, 8, 300}) m.batch("det", b);
  m.queue_length("det", "w/0", 7);
  m.queue_length("det", "w/0", 2);
  m.dropped("early_drop");
  m.dropped("early_drop");
  m.dropped("queue_full");
  auto text = m.render("w", 1);
  EXPECT_EQ(value_of(text, R"(sloserve_batch_size_bucket{model="det",le="1"})"), 1);
  EXPECT_EQ(value_of(text, R"(sloserve_batch_size_bucket{model="det",le="4"})"), 2);
  EXPECT_EQ(value_of(text, R"(sloserve_batch_size_bucket{model="det",le="8"})"), 4);
  EXPECT_EQ(value_of(text, R"(sloserve_batch_size_bucket{model="det",le="256"})"), 4);
  EXPECT_EQ(value_of(text, R"(sloserve_batch_size_bucket{model="det",le="+Inf"})"), 5);
  EXPECT_EQ(value_of(text, R"(sloserve_queue_length{model="det",device="w/0"})"), 2);
  EXPECT_EQ(value_of(text, R"(sloserve_drops_total{reason="early_drop"})"), 2);
  EXPECT_EQ(value_of(text, R"(sloserve_drops_total{reason="queue_full"})"), 1);
  EXPECT_EQ(text.find("sloserve_plan_devices"), std::string::npos) << "no placement yet";
  m.placement(3, {{"det", 2}, {"cls", 0}});
  text = m.render("ctl", 1);
  EXPECT_EQ(value_of(text, "sloserve_plan_devices"), 3);
  EXPECT_EQ(value_of(text, R"(sloserve_instances{model="cls"})"), 0);
  EXPECT_EQ(value_of(text, R"(sloserve_instances{model="det"})"), 2);
  EXPECT_EQ(text.find("sloserve_link_"), std::string::npos) << "no probe yet";
  m.link("w2", 8000, 0.5);
  m.link("w2", 4000, 0.25);
  text = m.render("fe", 1);
  EXPECT_EQ(value_of(text, R"(sloserve_link_seconds_per_megabyte{worker="w2"})"), 4);
  EXPECT_EQ(value_of(text, R"(sloserve_link_round_trip_seconds{worker="w2"})"), 0.00025);
}

// Triton's statistics: per pipeline, successes and failures with their time, and for the ok ones
// the time queued and running; executions count each member of a batch of b as 1/b.
TEST(node_metrics, pipeline_statistics_sum_requests_and_their_time_by_outcome) {
  node_metrics m;
  EXPECT_TRUE(m.statistics().empty());
  m.request_statistics("p", true, 30'000'000, 5'000'000, 20'000'000, 0.5, 1000);
  m.request_statistics("p", true, 10'000'000, 1'000'000, 8'000'000, 0.5, 2000);
  m.request_statistics("p", false, 7'000'000, 0, 0, 0, 3000);
  m.request_statistics("q", true, 1'000'000, 0, 1'000'000, 1, 500);
  auto all = m.statistics();
  ASSERT_EQ(all.size(), 2u);
  auto& p = all[0];
  EXPECT_EQ(p.name, "p");
  EXPECT_EQ(p.inference_count, 2u);
  EXPECT_EQ(p.execution_count, 1u) << "two halves of one batch";
  EXPECT_EQ(p.success.count, 2u);
  EXPECT_EQ(p.success.ns, 40'000'000u);
  EXPECT_EQ(p.fail.count, 1u);
  EXPECT_EQ(p.fail.ns, 7'000'000u);
  EXPECT_EQ(p.queue.ns, 6'000'000u);
  EXPECT_EQ(p.compute.ns, 28'000'000u);
  EXPECT_EQ(p.last_inference_ms, 3000u);
  EXPECT_EQ(all[1].name, "q");
  EXPECT_EQ(all[1].execution_count, 1u);
}

TEST(node_metrics, each_model_has_its_outcomes_and_queue_and_compute_durations) {
  node_metrics m;
  m.model_done("det", 1, "ok", 0.002, 0.020);
  m.model_done("det", 1, "ok", 0.004, 0.030);
  m.model_done("det", 1, "dropped", 0, 0);
  m.model_done("det", 2, "ok", 0.001, 0.010);
  auto out = m.render("n", 1);
  EXPECT_NE(out.find("sloserve_model_requests_total{model=\"det\",version=\"1\",outcome=\"ok\"} 2"), std::string::npos)
      << out;
  EXPECT_NE(out.find("sloserve_model_requests_total{model=\"det\",version=\"1\",outcome=\"dropped\"} 1"),
            std::string::npos);
  EXPECT_NE(out.find("sloserve_model_requests_total{model=\"det\",version=\"2\",outcome=\"ok\"} 1"), std::string::npos);
  EXPECT_NE(out.find("sloserve_model_queue_duration_seconds_count{model=\"det\",version=\"1\"} 2"), std::string::npos);
  EXPECT_NE(out.find("sloserve_model_queue_duration_seconds_sum{model=\"det\",version=\"1\"} 0.006"), std::string::npos)
      << out;
  EXPECT_NE(out.find("sloserve_model_compute_duration_seconds_sum{model=\"det\",version=\"1\"} 0.05"),
            std::string::npos);
}

// The process collector's families, read from /proc/self: this test's own process.
TEST(node_metrics, the_process_reports_its_cpu_memory_start_and_descriptors) {
  auto p = read_process();
  EXPECT_GT(p.resident_bytes, 1 << 20);
  EXPECT_GE(p.virtual_bytes, p.resident_bytes);
  EXPECT_GE(p.cpu_seconds, 0);
  auto now = static_cast<double>(
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count());
  EXPECT_GT(p.start_time_seconds, now - 3600) << "started within the hour";
  EXPECT_LE(p.start_time_seconds, now + 1);
  EXPECT_GE(p.open_fds, 3);
  EXPECT_GE(p.max_fds, p.open_fds);
  auto out = node_metrics().render("n", 0);
  for (auto* family : {"process_cpu_seconds_total", "process_resident_memory_bytes", "process_virtual_memory_bytes",
                       "process_start_time_seconds", "process_open_fds", "process_max_fds"})
    EXPECT_NE(out.find(std::string("# TYPE ") + family + " "), std::string::npos) << family;
}

TEST(node_metrics, label_values_are_escaped) {
  EXPECT_EQ(escape_label("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
  node_metrics m;
  m.request_done("we\"ird", "ok", 0.001, true, 1);
  EXPECT_EQ(value_of(m.render("fe", 1), R"(sloserve_requests_total{pipeline="we\"ird",outcome="ok"})"), 1);
}

}  // namespace
}  // namespace sloserve
