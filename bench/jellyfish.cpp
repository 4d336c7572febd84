// Jellyfish's re-scheduling cost (seed 000, §4): client-to-DNN mapping (Algorithm 1) inside DNN
// selection by simulated annealing (Algorithm 2), for 16 clients, a zoo of 16 DNN variants and
// 4 workers (the setup whose exact MILP took CPLEX 20 s to 15 min), timed over random instances.
// Then the prefetch hit ratio (§4.4): the controller's rounds re-schedule 8 clients whose uplinks
// move as log-normal traces, second by second, on 4 devices; of the devices' variant switches,
// the share that found the new variant loaded already (prefetched as a neighbour of the one it
// ran, or kept from before), with `resident` 3 (the running variant and its neighbours) against 1
// (no prefetch).
//
//   build/bench/bench_jellyfish [instances=100] [rounds=300]

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "config/cluster_config.hpp"
#include "scheduling/policies/jellyfish/mapping.hpp"
#include "scheduling/policies/jellyfish/rounds.hpp"

using namespace sloserve::sched;

namespace {

// The rounds of `resident` variants a device over `steps` seconds of 8 clients on log-normal
// uplinks (median 20 Mbps, the log's spread 0.6, correlation 0.8 second to second): switches and
// those that found their variant loaded.
std::pair<uint64_t, uint64_t> prefetch_hits(int resident, int steps) {
  std::string yaml =
      "nodes:\n"
      "  - {name: fe, address: tcp://127.0.0.1:0, roles: [controller, frontend]}\n"
      "  - {name: w, address: tcp://127.0.0.1:0, roles: [worker], devices: [{kind: emulated, count: 4}]}\n"
      "models:\n";
  const int sides[] = {128, 256, 352, 480, 608};
  const double acc[] = {38, 52, 59, 63, 65};
  for (int i = 0; i < 5; ++i) {
    double f = sides[i] / 608.0;
    yaml += "  - {name: v" + std::to_string(sides[i]) + ", input: {dtype: float32, shape: [3, " +
            std::to_string(sides[i]) + ", " + std::to_string(sides[i]) +
            "]}, output: {dtype: float32, shape: [10]}, preprocess: {from: image}, max_batch: 8, accuracy: " +
            std::to_string(acc[i]) + ", profile: {alpha_ms: " + std::to_string(5 + 17 * f * f) +
            ", beta_ms: " + std::to_string(18 + 20 * f * f) + "}}\n";
  }
  yaml +=
      "pipelines:\n  - {name: video, slo_ms: 150, stages: [{name: d, variants: [v128, v256, v352, v480, v608]}]}\n"
      "scheduler: {policy: jellyfish, jellyfish: {resident: " +
      std::to_string(resident) + "}}\n";
  auto parsed = sloserve::parse_cluster_config(yaml, "prefetch.yaml");
  if (!parsed) {
    std::fprintf(stderr, "%s\n", parsed.error_text().c_str());
    std::exit(2);
  }
  auto& cfg = *parsed.config;
  jellyfish::rounds core(cfg);
  auto slots = sloserve::device_slots(cfg);
  std::mt19937_64 rng(21);
  std::normal_distribution<double> z(0, 1);
  std::vector<double> x(8, 0);
  for (int t = 0; t < steps; ++t) {
    std::vector<sloserve::msg::client_load> clients;
    for (size_t i = 0; i < x.size(); ++i) {
      x[i] = 0.8 * x[i] + 0.6 * std::sqrt(1 - 0.64) * z(rng);
      clients.push_back({"c" + std::to_string(i), "video", 150, 15, 20 * std::exp(x[i]), 10, 0.25});
    }
    core.decide(clients, slots, cfg.models, static_cast<uint64_t>(t + 1));
  }
  return {core.counters().switches, core.counters().resident_hits};
}

}  // namespace

int main(int argc, char** argv) {
  int instances = argc > 1 ? std::atoi(argv[1]) : 100;
  int steps = argc > 2 ? std::atoi(argv[2]) : 300;
  std::mt19937_64 rng(9);
  std::uniform_real_distribution<double> u(0, 1);
  std::vector<double> ms;
  double mapped = 0, accuracy = 0;
  for (int k = 0; k < instances; ++k) {
    // 16 variants: input sizes and depths; larger is slower (per batch) and more accurate.
    std::vector<jellyfish::dnn> zoo;
    for (int m = 0; m < 16; ++m) {
      double alpha = 0.5 + 0.6 * m + 0.3 * u(rng), beta = 2 + 0.5 * m;
      zoo.push_back({40 + 2.5 * m + u(rng), 12, [alpha, beta](int b) { return alpha * b + beta; }});
    }
    std::vector<jellyfish::client> clients;
    for (int i = 0; i < 16; ++i) {
      jellyfish::client c{static_cast<int>(5 * (1 + rng() % 6)), {}};
      double slo = 75 + 75 * u(rng), uplink_ms_per_step = 0.5 + 2 * u(rng);
      for (int m = 0; m < 16; ++m) c.budget_ms.push_back(std::max(0.0, slo - 10 - uplink_ms_per_step * m));
      clients.push_back(std::move(c));
    }
    auto t0 = std::chrono::steady_clock::now();
    auto s = select_dnns(zoo, clients, std::vector<size_t>(4, 0), {0.0125, 0.0005, 0.99, 1 + uint64_t(k)});
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    mapped += s.quality.mapped;
    accuracy += s.quality.accuracy;
  }
  std::sort(ms.begin(), ms.end());
  double mean = 0;
  for (auto x : ms) mean += x;
  mean /= static_cast<double>(ms.size());
  std::printf(
      "16 clients x 16 variants x 4 workers, %d re-schedules: mean %.2f ms, p50 %.2f ms, max %.2f ms "
      "(target < 50 ms); clients mapped %.1f%%, rate-weighted accuracy %.2f%%\n",
      instances, mean, ms[ms.size() / 2], ms.back(), 100 * mapped / instances, 100 * accuracy / instances);
  for (int resident : {3, 1}) {
    auto [switches, hits] = prefetch_hits(resident, steps);
    std::printf(
        "prefetch, %d variants resident a device: %llu re-schedules, %llu switches, %llu found the variant "
        "loaded (hit ratio %.1f%%)\n",
        resident, static_cast<unsigned long long>(steps), static_cast<unsigned long long>(switches),
        static_cast<unsigned long long>(hits), switches ? 100.0 * hits / switches : 0.0);
  }
  return ms.back() < 50 ? 0 : 1;
}
