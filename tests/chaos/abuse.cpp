// Hostile clients against a real cluster (`sloserve up`, loopback, ephemeral ports) while an
// honest client loads it: random frames, truncated and oversized Cap'n Proto, frames just over
// the limits, a flood of fresh connections, a client that never reads its replies, requests
// that declare huge shapes with few bytes behind them; and over HTTP, random bytes, bodies
// declared near or over the limit with little behind them, and bodies that are not JSON. The honest load loses nothing
// and keeps its attainment; the nodes stay up, their memory stays bounded and their logs stay short.
//
// The attack lasts SLOSERVE_ABUSE_S seconds (default 30).

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <zmq.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <regex>
#include <sstream>
#include <thread>

#include "apps/child_process.hpp"
#include "config/cluster_config.hpp"
#include "messages/codec.hpp"
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

// A DEALER connected to `endpoint` that never reads: sends are dropped once its queue is full.
void* dealer(void* ctx, const std::string& endpoint) {
  void* s = zmq_socket(ctx, ZMQ_DEALER);
  int zero = 0, hwm = 100000;
  zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof zero);
  zmq_setsockopt(s, ZMQ_SNDHWM, &hwm, sizeof hwm);
  zmq_connect(s, endpoint.c_str());
  return s;
}

void send(void* s, const std::string& frame) {
  zmq_send(s, frame.data(), frame.size(), ZMQ_DONTWAIT);
}

// A TCP connection to HOST:PORT that has sent `text` (and is then closed by the caller); -1 when
// it could not connect.
int tcp_sent(const std::string& host_port, const std::string& text) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  auto colon = host_port.rfind(':');
  inet_pton(AF_INET, host_port.substr(0, colon).c_str(), &to.sin_addr);
  to.sin_port = htons(static_cast<uint16_t>(std::stoi(host_port.substr(colon + 1))));
  if (connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to) != 0) {
    close(fd);
    return -1;
  }
  (void)::send(fd, text.data(), text.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  return fd;
}

std::string request_frame(uint64_t id, sloserve::tensor t) {
  sloserve::msg::client_request r{"traffic", id, {std::move(t)}};
  return sloserve::msg::encode({"", r});
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

  std::atomic<bool> attacking{true};
  std::atomic<uint64_t> frames{0};
  void* ctx = zmq_ctx_new();
  auto until_stopped = [&](auto body, std::chrono::microseconds every) {
    return std::thread([&, body, every] {
      std::mt19937_64 rng(frames.fetch_add(1) + 7);
      while (attacking) {
        body(rng);
        ++frames;
        std::this_thread::sleep_for(every);
      }
    });
  };
  sloserve::tensor image{"input", sloserve::dtype::float32, {3, 32, 32}, std::string(3 * 32 * 32 * 4, '\1')};
  auto valid = request_frame(1, image);
  std::vector<std::thread> attackers;
  void* garbage = dealer(ctx, endpoint);
  // Random bytes, and valid requests cut short, 2,000 a second each.
  attackers.push_back(until_stopped(
      [&](std::mt19937_64& rng) {
        std::string f(1 + rng() % 4096, '\0');
        for (auto& c : f) c = static_cast<char>(rng());
        send(garbage, f);
        send(garbage, valid.substr(0, rng() % valid.size()));
      },
      500us));
  // Requests declaring [100000, 100000] float32 with 16 bytes behind them; frames just over the
  // payload limit (answered ERROR) and just over the frame limit (the sender is cut off).
  sloserve::tensor huge{"input", sloserve::dtype::float32, {100000, 100000}, std::string(16, '\0')};
  auto lying = request_frame(2, huge);
  auto over_payload = request_frame(3, {"input", sloserve::dtype::uint8, {1048576 + 8}, std::string(1048576 + 8, 'x')});
  auto over_frame = std::string(1048576 + 65536 + 1024, '\0');
  void* liar = dealer(ctx, endpoint);  // a ZeroMQ socket is used by one thread only
  attackers.push_back(until_stopped(
      [&](std::mt19937_64&) {
        send(liar, lying);
        void* s = dealer(ctx, endpoint);
        send(s, over_payload);
        send(s, over_frame);
        zmq_close(s);
      },
      20ms));
  // A flood of fresh connections, 300 a second, each with a random frame.
  attackers.push_back(until_stopped(
      [&](std::mt19937_64& rng) {
        void* s = dealer(ctx, endpoint);
        send(s, std::string(8 + rng() % 64, static_cast<char>(rng())));
        zmq_close(s);
      },
      3300us));
  // A client that asks whether the cluster is ready, 5,000 times a second, and never reads.
  // Its kernel receive buffer and ZeroMQ queue are small, so that the node's queue for it fills
  // within the run (a real one fills only after megabytes of kernel buffers).
  void* deaf = zmq_socket(ctx, ZMQ_DEALER);
  int tiny = 4096, one = 1, none = 0;
  zmq_setsockopt(deaf, ZMQ_RCVBUF, &tiny, sizeof tiny);
  zmq_setsockopt(deaf, ZMQ_RCVHWM, &one, sizeof one);
  zmq_setsockopt(deaf, ZMQ_LINGER, &none, sizeof none);
  zmq_connect(deaf, endpoint.c_str());
  auto ask = sloserve::msg::encode({"", sloserve::msg::status_request{9}});
  attackers.push_back(until_stopped([&](std::mt19937_64&) { send(deaf, ask); }, 200us));

  // Over HTTP, on fresh connections: random bytes; bodies that declare almost the payload limit
  // and send 100 bytes of it; bodies declared over the limit; bodies that are not JSON.
  auto post = [](size_t length, const std::string& body) {
    return "POST /v2/models/traffic/infer HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: " +
           std::to_string(length) + "\r\n\r\n" + body;
  };
  attackers.push_back(until_stopped(
      [&](std::mt19937_64& rng) {
        std::string noise(1 + rng() % 2048, '\0');
        for (auto& c : noise) c = static_cast<char>(rng());
        if (int fd = tcp_sent(http, noise); fd >= 0) close(fd);
        for (auto& text : {post(1000000, std::string(100, '{')), post(64 << 20, "{}"), post(9, "not json!")}) {
          int fd = tcp_sent(http, text);
          if (fd < 0) continue;
          char answer[512];
          pollfd p{fd, POLLIN, 0};
          if (poll(&p, 1, 5) > 0) (void)recv(fd, answer, sizeof answer, MSG_DONTWAIT);
          close(fd);
        }
      },
      10ms));

  std::map<std::string, long> rss_peak;
  for (int t = 0; t < attack_s * 10; ++t) {
    std::this_thread::sleep_for(100ms);
    for (auto* n : {"ctl", "w1"}) rss_peak[n] = std::max(rss_peak[n], rss_kb(pid_of(n)));
  }
  attacking = false;
  for (auto& t : attackers) t.join();
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
  std::cout << "attack " << attack_s << " s, " << frames << " hostile frames and connections; honest: sent "
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

  zmq_close(garbage);
  zmq_close(liar);
  zmq_close(deaf);
  zmq_ctx_term(ctx);
  up.stop();
  fs::remove_all(dir);
}

}  // namespace
