// Jellyfish's re-scheduling cost (seed 000, §4): client-to-DNN mapping (Algorithm 1) inside DNN
// selection by simulated annealing (Algorithm 2), for 16 clients, a zoo of 16 DNN variants and
// 4 workers (the setup whose exact MILP took CPLEX 20 s to 15 min), timed over random instances.
//
//   build/bench/bench_jellyfish [instances=100]

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "scheduling/policies/jellyfish/mapping.hpp"

using namespace sloserve::sched;

int main(int argc, char** argv) {
  int instances = argc > 1 ? std::atoi(argv[1]) : 100;
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
  return ms.back() < 50 ? 0 : 1;
}
