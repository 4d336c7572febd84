// bench/nexus: Nexus's control plane against a batch-oblivious baseline on emulated devices,
// the drop policies of thesis 002 §3.5.1, and planner speed. Every figure comes from this run.
//
// Usage: bench_nexus [all|traffic|game|drop|speed] [--quick] [--window SECONDS]
//
// For a workload and a policy combination, the highest rate whose attainment is >= 99% is found
// by doubling and then bisection. Each trial starts a fresh in-process node with 8 emulated
// devices, sends Poisson load through the built-in client for a warmup (the scheduler plans
// on the measured rates in it) and then a measured window.

#include <spdlog/spdlog.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>

#include "bench/harness.hpp"
#include "scheduling/planner.hpp"

using namespace sloserve;

namespace {

bool quick = false;
double window_s = 0;  // measured window of each trial; 0: 6 s (4 s with --quick)

std::string traffic_yaml() {
  // Profiles as config/examples/cluster.yaml: SSD from thesis 002 Table 3.6, car and face
  // recognisers from Table 3.2 (models A and B).
  return R"(nodes:
  - {name: local, address: tcp://127.0.0.1:0, roles: [controller, frontend, worker], devices: [{kind: emulated, count: 8}]}
models:
  - {name: ssd, input: {dtype: float32, shape: [3, 32, 32]}, output: {dtype: float32, shape: [100, 6]}, max_batch: 11, profile: {batch: [1, 3, 7, 11], latency_ms: [73, 98, 147, 216]}}
  - {name: car_classifier, input: {dtype: float32, shape: [3, 16, 16]}, output: {dtype: float32, shape: [8]}, max_batch: 16, profile: {batch: [4, 8, 16], latency_ms: [50, 75, 100]}}
  - {name: face_recognizer, input: {dtype: float32, shape: [3, 16, 16]}, output: {dtype: float32, shape: [8]}, max_batch: 16, profile: {batch: [4, 8, 16], latency_ms: [50, 90, 125]}}
pipelines:
  - name: traffic
    slo_ms: 400
    stages:
      - {name: detect, model: ssd}
      - {name: car, model: car_classifier, after: [detect], fanout: 1.5}
      - {name: face, model: face_recognizer, after: [detect], fanout: 0.5}
)";
}

constexpr int games = 20;

std::string game_yaml() {
  // Thesis 002 §3.6 game analysis: per frame, LeNet over 6 digit regions and the game's own
  // ResNet-50 variant; SLO 50 ms. Batch-1 latencies from Table 3.1; slopes assumed (see
  // config/examples/game.yaml). Frames are 3x60x80 here to keep the client cheap.
  std::string y = R"(nodes:
  - {name: local, address: tcp://127.0.0.1:0, roles: [controller, frontend, worker], devices: [{kind: emulated, count: 8}]}
models:
  - {name: frame_crops, input: {dtype: uint8, shape: [3, 60, 80]}, output: {dtype: float32, shape: [6, 28, 28]}, max_batch: 64, profile: {alpha_ms: 0.02, beta_ms: 0.3}}
  - {name: lenet, input: {dtype: float32, shape: [28, 28]}, output: {dtype: float32, shape: [10]}, max_batch: 128, profile: {alpha_ms: 0.005, beta_ms: 0.09}}
)";
  for (int g = 0; g < games; ++g)
    y += "  - {name: resnet50_g" + std::to_string(g) +
         ", input: {dtype: uint8, shape: [3, 60, 80]}, output: {dtype: float32, shape: [50]}, max_batch: 32, profile: "
         "{alpha_ms: 1.1, beta_ms: 5.1}}\n";
  y += "pipelines:\n";
  for (int g = 0; g < games; ++g)
    y += "  - {name: game" + std::to_string(g) +
         ", slo_ms: 50, stages: [{name: crops, model: frame_crops}, "
         "{name: digits, model: lenet, after: [crops], fanout: 6}, {name: game, model: resnet50_g" +
         std::to_string(g) + "}]}\n";
  return y;
}

std::string inception_yaml() {
  // One Inception-like model on one device, SLO 100 ms (the §3.5.1 experiment). l(1) = 7 ms
  // as Table 3.1's Inception4; one device carries about 1450 req/s at its best batch.
  return R"(nodes:
  - {name: local, address: tcp://127.0.0.1:0, roles: [controller, frontend, worker], devices: [{kind: emulated, count: 1}]}
models:
  - {name: inception, input: {dtype: float32, shape: [16]}, output: {dtype: float32, shape: [4]}, max_batch: 72, profile: {alpha_ms: 0.6, beta_ms: 6.4}}
pipelines:
  - {name: classify, slo_ms: 100, stages: [{name: s, model: inception}]}
scheduler: {policy: static}
)";
}

struct combo {
  const char* label;
  scheduler_policy policy;
  split_policy split;
  drop_policy_kind drop;
};

load_summary trial(const std::string& yaml, const combo& c, double rate, double warmup_s, double measure_s,
                   arrival_kind arrival = arrival_kind::poisson) {
  auto parsed = parse_cluster_config(yaml, "bench.yaml");
  if (!parsed) {
    fprintf(stderr, "%s", parsed.error_text().c_str());
    std::exit(1);
  }
  auto cfg = std::make_shared<cluster_config>(std::move(*parsed.config));
  if (cfg->scheduler.policy != scheduler_policy::static_plan) cfg->scheduler.policy = c.policy;
  cfg->scheduler.split = c.split;
  cfg->runtime.drop_policy = c.drop;
  return bench::trial(cfg, rate, warmup_s, measure_s, arrival);
}

// Highest rate with attainment >= 99% and nothing lost.
double max_rate(const std::string& yaml, const combo& c, double start) {
  double warm = quick ? 4 : 5, measure = window_s > 0 ? window_s : quick ? 4 : 6;
  auto ok = [&](double r) {
    auto s = trial(yaml, c, r, warm, measure);
    fprintf(stderr, "    %-28s %8.1f req/s -> attainment %.4f (lost %lu)\n", c.label, r, s.attainment,
            (unsigned long)s.lost);
    return s.attainment >= 0.99 && s.lost == 0;
  };
  return bench::max_rate(ok, start, quick ? 3 : 5);
}

void compare(const char* name, const std::string& yaml, double start) {
  combo nexus{"nexus + dp split", scheduler_policy::nexus, split_policy::dp, drop_policy_kind::sliding_window};
  combo base{"batch-oblivious + even split", scheduler_policy::batch_oblivious, split_policy::even,
             drop_policy_kind::sliding_window};
  fprintf(stderr, "%s workload:\n", name);
  double a = max_rate(yaml, nexus, start);
  double b = max_rate(yaml, base, start);
  printf(
      "%-8s max rate at >= 99%% attainment: nexus+dp %.1f req/s, batch-oblivious+even %.1f req/s, ratio %.2fx (target "
      ">= 1.25x)\n",
      name, a, b, b > 0 ? a / b : INFINITY);
  fflush(stdout);
}

void drop_policies(double rate) {
  auto y = inception_yaml();
  fprintf(stderr, "drop policies (one device, SLO 100 ms, %.0f req/s):\n", rate);
  for (auto arrival : {arrival_kind::constant, arrival_kind::poisson}) {
    for (auto& [drop, drop_name] : knob<drop_policy_kind>::names) {
      combo c{drop_name.data(), scheduler_policy::static_plan, split_policy::even, drop};
      auto s = trial(y, c, rate, 2, quick ? 5 : 8, arrival);
      printf("drop     %4.0f/s %-8s %-15s missed %.2f%% of %lu (dropped %lu, late %lu, lost %lu)\n", rate,
             knob_name(arrival).data(), drop_name.data(), 100 * (1 - s.attainment), (unsigned long)s.sent,
             (unsigned long)s.dropped, (unsigned long)(s.ok - s.ok_within_slo), (unsigned long)s.lost);
      fflush(stdout);
    }
  }
}

void planner_speed() {
  std::mt19937_64 rng(5);
  std::vector<model_spec> models(1000);
  std::vector<sched::session> ss;
  for (int i = 0; i < 1000; ++i) {
    auto& m = models[i];
    m.name = "m" + std::to_string(i);
    m.max_batch = 64;
    m.profile.alpha_ms = std::uniform_real_distribution<double>(0.3, 3)(rng);
    m.profile.beta_ms = std::uniform_real_distribution<double>(2, 15)(rng);
    ss.push_back({&m, std::uniform_real_distribution<double>(3, 10)(rng) * m.profile.latency_ms_at(1),
                  std::exp(std::uniform_real_distribution<double>(1, 3.4)(rng))});
  }
  sched::nexus_planner planner;
  auto t0 = std::chrono::steady_clock::now();
  auto p = planner.make(ss, {});
  auto t1 = std::chrono::steady_clock::now();
  auto moved = ss;
  for (auto& s : moved) s.rate *= std::uniform_real_distribution<double>(0.9, 1.1)(rng);
  auto q = planner.make(moved, {}, &p, &ss);
  auto t2 = std::chrono::steady_clock::now();
  auto ms = [](auto d) { return std::chrono::duration<double, std::milli>(d).count(); };
  printf(
      "planner  1000 sessions on %zu devices: %.1f ms from scratch, %.1f ms incremental (%zu moved); target < 100 ms\n",
      p.devices.size(), ms(t1 - t0), ms(t2 - t1), q.moved);
}

}  // namespace

int main(int argc, char** argv) {
  std::string what = "all";
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--quick"))
      quick = true;
    else if (!std::strcmp(argv[i], "--window") && i + 1 < argc)
      window_s = std::atof(argv[++i]);
    else
      what = argv[i];
  }
  spdlog::set_level(spdlog::level::warn);
  if (what == "all" || what == "speed") planner_speed();
  if (what == "all" || what == "drop") drop_policies(1300);
  if (what == "all" || what == "drop") drop_policies(1420);
  if (what == "all" || what == "traffic") compare("traffic", traffic_yaml(), 20);
  if (what == "all" || what == "game") compare("game", game_yaml(), 100);
  return 0;
}
