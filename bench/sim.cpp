// Figures no single machine could produce with processes, from `sloserve sim`'s engine: the
// simulator's own speed at 10,000 devices, and Nexus against the batch-oblivious baseline on
// clusters of 1,000 devices. Every figure comes from this run.
//
// Usage: bench_sim [all|scale|traffic|game] [--quick] [--devices N]

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "bench/harness.hpp"
#include "bench/workloads.hpp"
#include "sim/simulator.hpp"

using namespace sloserve;

namespace {

bool quick = false;
int fleet_devices = 1000;

cluster_config parse(const std::string& yaml) {
  auto parsed = parse_cluster_config(yaml, "bench.yaml");
  if (!parsed) {
    fprintf(stderr, "%s", parsed.error_text().c_str());
    std::exit(1);
  }
  return std::move(*parsed.config);
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// 10,000 devices (1,250 workers of 8) on the traffic workload, 1,000,000 measured requests.
void scale() {
  auto cfg = parse(bench::nodes_yaml(10000, false) + bench::traffic_workload());
  sim::options o;
  o.rate = 100000;
  o.warmup_s = 2;
  o.duration_s = 10;
  auto t0 = std::chrono::steady_clock::now();
  auto r = sim::simulate(cfg, o);
  double wall = seconds_since(t0);
  if (!r) {
    fprintf(stderr, "sim: %s\n", r.error().c_str());
    std::exit(1);
  }
  printf(
      "scale    %zu devices, %lu measured requests (%.0f/s for %.0f s after %.0f s of warmup): %.1f s wall, %lu events "
      "(%.1f M/s), attainment %.4f, lost %lu; target <= 60 s\n",
      r->devices, static_cast<unsigned long>(r->summary.sent), o.rate, o.duration_s, o.warmup_s, wall,
      static_cast<unsigned long>(r->events), static_cast<double>(r->events) / wall / 1e6, r->summary.attainment,
      static_cast<unsigned long>(r->summary.lost));
  fflush(stdout);
}

struct combo {
  const char* label;
  scheduler_policy policy;
  split_policy split;
};

// Highest rate with attainment >= 99% and nothing lost, each trial a fresh simulated cluster:
// warmup (the scheduler plans on the rates measured in it), then the measured window.
double max_rate(const cluster_config& base, const combo& c, double start) {
  auto ok = [&](double rate) {
    auto cfg = base;
    cfg.scheduler.policy = c.policy;
    cfg.scheduler.split = c.split;
    sim::options o;
    o.rate = rate;
    o.warmup_s = 5;
    o.duration_s = quick ? 4 : 8;
    auto t0 = std::chrono::steady_clock::now();
    auto r = sim::simulate(cfg, o);
    if (!r) {
      fprintf(stderr, "sim: %s\n", r.error().c_str());
      std::exit(1);
    }
    fprintf(stderr, "    %-28s %9.0f req/s -> attainment %.4f (lost %lu, %.1f s)\n", c.label, rate,
            r->summary.attainment, static_cast<unsigned long>(r->summary.lost), seconds_since(t0));
    return r->summary.attainment >= 0.99 && r->summary.lost == 0;
  };
  return bench::max_rate(ok, start, quick ? 2 : 4);
}

void compare(const char* name, const std::string& workload, double start) {
  auto cfg = parse(bench::nodes_yaml(fleet_devices, false) + workload);
  combo nexus{"nexus + dp split", scheduler_policy::nexus, split_policy::dp};
  combo base{"batch-oblivious + even split", scheduler_policy::batch_oblivious, split_policy::even};
  fprintf(stderr, "%s workload on %d simulated devices:\n", name, fleet_devices);
  double a = max_rate(cfg, nexus, start);
  double b = max_rate(cfg, base, start);
  printf(
      "%-8s %d devices, max rate at >= 99%% attainment: nexus+dp %.0f req/s, batch-oblivious+even %.0f req/s, "
      "ratio %.2fx\n",
      name, fleet_devices, a, b, b > 0 ? a / b : INFINITY);
  fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  std::string what = "all";
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--quick"))
      quick = true;
    else if (!std::strcmp(argv[i], "--devices") && i + 1 < argc)
      fleet_devices = std::atoi(argv[++i]);
    else
      what = argv[i];
  }
  if (what == "all" || what == "scale") scale();
  // Starting points: an eighth of what 8 devices carry in bench_nexus, times the devices / 8.
  if (what == "all" || what == "traffic") compare("traffic", bench::traffic_workload(), 2.0 * fleet_devices);
  if (what == "all" || what == "game") compare("game", bench::game_workload(20), 20.0 * fleet_devices);
  return 0;
}
