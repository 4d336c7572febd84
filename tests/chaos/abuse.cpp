// Hostile clients against a real cluster (`sloserve up`, loopback, ephemeral ports) while an
// honest client loads it: random frames, truncated and oversized Cap'n Proto, frames just over
// the limits, a flood of fresh connections, a client that never reads its replies, requests
// that declare huge shapes with few bytes behind them; and over HTTP, random bytes, bodies
// declared near or over the limit with little behind them, and bodies that are not JSON. The honest load loses nothing
// and keeps its attainment; the nodes stay up, their memory stays bounded and their logs stay short.
//
// The attack lasts SLOSERVE_ABUSE_S seconds (default 30).

#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <thread>

#include "apps/child_process.hpp"
#include "config/cluster_config.hpp"
#include "loadgen/hostile.hpp"
#include "tests/text_file.hpp"

namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using sloserve::testing::read_text;

// One worker (about 250 queries/s, see two_stage.yaml) loaded at 100/s by the honest client.
// A 1 MiB payload limit keeps frames at the limit cheap to send; 1,000 replies queued per client.
const std::string cluster_yaml = R"(cluster: {name: abuse}
nodes:
  - {name: ctl, address: tcp://127.0.0.1:0, roles: [controller, frontend], http: "127.0.0.1:0"}
  - {name: w1, address: tcp://127.0.0.1:0, roles: [worker], devices: [{kind: emulated, count: 1}]}
)" + read_text(SLOSERVE_TWO_STAGE_YAML);

long rss_kb(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  return -1;
}

size_t lines_of(const fs::path& p) {
  std::ifstream in(p);
  return static_cast<size_t>(std::count(std::istreambuf_iterator<char>(in), {}, '\n'));
}

TEST(abuse, hostile_clients_leave_the_honest_load_and_the_nodes_whole) {
  int attack_s = std::getenv("SLOSERVE_ABUSE_S") ? std::atoi(std::getenv("SLOSERVE_ABUSE_S")) : 30;
  auto dir = fs::temp_directory_path() / ("sloserve-abuse-" + std::to_string(getpid()));
  fs::create_directories(dir);
  auto yaml = cluster_yaml;
  yaml.replace(yaml.find("runtime: {"), 10, "runtime: {max_payload_bytes: 1048576, max_client_queued_replies: 1000, ");
  std::ofstream(dir / "cluster.yaml") << yaml;
  auto up = sloserve::spawn_up(SLOSERVE_BIN, dir);
  ASSERT_NE(up.output().find("cluster up"), std::string::npos) << up.output();
  auto pid_of = [&](const std::string& node) {
    std::smatch m;
    auto text = up.output();
    return std::regex_search(text, m, std::regex("node " + node + " pid ([0-9]+)")) ? std::stoi(m[1]) : -1;
  };
  auto resolved = sloserve::load_cluster_config(dir / "resolved.yaml");
  ASSERT_TRUE(resolved) << resolved.error_text();
  auto endpoint = resolved.config->find_node("ctl")->address;
  auto http = resolved.config->find_node("ctl")->http;  // KServe v2 and /metrics

  // The honest client, from before the attack to after it.
  int warm_s = 4;
  auto honest = sloserve::spawn_child(SLOSERVE_BIN,
                                      {"sloserve", "load", "-c", (dir / "resolved.yaml").string(), "--pipeline",
                                       "traffic", "--rate", "100", "--arrival", "poisson", "--duration",
                                       std::to_string(warm_s + attack_s + 2), "--json", (dir / "load.json").string()},
                                      dir / "load.log");
  std::this_thread::sleep_for(std::chrono::seconds(warm_s));
  std::map<std::string, long> rss_before;
  for (auto* n : {"ctl", "w1"}) rss_before[n] = rss_kb(pid_of(n));
  auto log_before = lines_of(dir / "up.log");

  sloserve::hostile_clients attack({endpoint, http});
  std::map<std::string, long> rss_peak;
  for (int t = 0; t < attack_s * 10; ++t) {
    std::this_thread::sleep_for(100ms);
    for (auto* n : {"ctl", "w1"}) rss_peak[n] = std::max(rss_peak[n], rss_kb(pid_of(n)));
  }
  attack.stop();
  auto log_lines = lines_of(dir / "up.log") - log_before;
  {
    // What the nodes logged during the attack, a sample.
    std::ifstream in(dir / "up.log");
    std::string line;
    for (size_t i = 0; i < log_before && std::getline(in, line); ++i) {
    }
    for (int i = 0; i < 12 && std::getline(in, line); ++i) std::cout << "  log: " << line.substr(0, 160) << "\n";
  }
  std::map<std::string, long> rss_after;
  for (auto* n : {"ctl", "w1"}) rss_after[n] = rss_kb(pid_of(n));

  int status = 0;
  ASSERT_TRUE(honest.wait_for(std::chrono::seconds(attack_s + 60), status)) << honest.output();
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << honest.output();
  auto s = nlohmann::json::parse(std::ifstream(dir / "load.json"));
  std::cout << "attack " << attack_s << " s, " << attack.sent() << " hostile frames and connections; honest: sent "
            << s["sent"] << ", lost " << s["lost"] << ", attainment " << s["attainment"] << "; log lines " << log_lines
            << "\n";
  for (auto* n : {"ctl", "w1"})
    std::cout << n << " RSS " << rss_before[n] / 1024 << " MB before, " << rss_peak[n] / 1024 << " MB peak, "
              << rss_after[n] / 1024 << " MB after\n";

  EXPECT_EQ(s["lost"].get<int>(), 0);
  EXPECT_GE(s["attainment"].get<double>(), 0.99) << s.dump(2).substr(0, 2000);
  for (auto* n : {"ctl", "w1"}) {
    EXPECT_EQ(kill(pid_of(n), 0), 0) << n << " is down";
    EXPECT_LE(rss_after[n], rss_before[n] * 105 / 100) << n;
  }
  EXPECT_LE(static_cast<double>(log_lines), 100.0 * attack_s / 60 + 10) << read_text(dir / "up.log").substr(0, 5000);

  // What the node counted.
  httplib::Client scrape("http://" + http);
  auto got = scrape.Get("/metrics");
  ASSERT_TRUE(got && got->status == 200);
  for (auto* series :
       {"sloserve_rejected_frames_total{reason=\"malformed\"}", "sloserve_rejected_frames_total{reason=\"invalid\"}",
        "sloserve_rejected_frames_total{reason=\"payload_too_large\"}",
        "sloserve_replies_dropped_total{why=\"client_not_reading\"}", "sloserve_http_refused_total{why=\"too_large\"}",
        "sloserve_ingress_replies_total{protocol=\"http\",code=\"400\"}"})
    EXPECT_NE(got->body.find(series), std::string::npos) << series << " in\n" << got->body;

  up.stop();
  fs::remove_all(dir);
}

}  // namespace
