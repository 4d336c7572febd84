// Figures no single machine could produce with processes, from `sloserve sim`'s engine: the
// simulator's own speed at 10,000 devices, and Nexus against the batch-oblivious baseline on
// clusters of 1,000 devices. Every figure comes from this run.
//
// Usage: bench_sim [all|scale|traffic|game|autoscale|sponge|predictors|priorities] [--quick] [--devices N]
//        [--times K]

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "bench/harness.hpp"
#include "bench/sim_priorities.hpp"
#include "bench/workloads.hpp"
#include "loadgen/arrivals.hpp"
#include "sim/simulator.hpp"

using namespace sloserve;

namespace {

bool quick = false;
int fleet_devices = 1000;
int times = 100;  // autoscale: the rate and the cluster of bench_autoscale, times this

cluster_config parse(const std::string& yaml) {
  return bench::parse_or_exit(yaml, "bench.yaml");
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// 10,000 devices (1,250 workers of 8), 1,000,000 measured requests: on the traffic workload (one
// three-stage pipeline), and on the game workload with 300 pipelines (300 games, each its own
// ResNet beside two shared models; the rate split evenly over them).
void scale(const char* label, const std::string& workload) {
  auto cfg = parse(bench::nodes_yaml(10000, false) + workload);
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
      "scale %-9s %zu devices, %zu pipelines, %lu measured requests (%.0f/s for %.0f s after %.0f s of warmup): "
      "%.1f s wall, %lu events (%.1f M/s), attainment %.4f, lost %lu; target <= 20 s\n",
      label, r->devices, cfg.pipelines.size(), static_cast<unsigned long>(r->summary.sent), o.rate, o.duration_s,
      o.warmup_s, wall, static_cast<unsigned long>(r->events), static_cast<double>(r->events) / wall / 1e6,
      r->summary.attainment, static_cast<unsigned long>(r->summary.lost));
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

// Violations (not OK within the SLO) from second 10 on: every policy starts from one instance per
// stage, as in bench_autoscale.
double after_warmup(const sim::result& r) {
  double sent = 0, ok = 0;
  auto& series = r.summary.series;
  for (size_t t = 10; t < series.size(); ++t)
    sent += series[t]["sent"].get<double>(), ok += series[t]["ok_within_slo"].get<double>();
  return sent > 0 ? 1 - ok / sent : 0;
}

// bench_autoscale's workload (det -> cls with l(b, c), 2 s cold starts, SLO 200 ms) and its
// bursty trace (100 req/s, x5 for 5 s at 30 s and at 90 s), at `times` the rate on `times` nodes
// of 24 device slots and 48 cores: fa2 against biscale, both with the recent_max predictor.
void autoscale() {
  std::string nodes = "nodes:\n  - {name: ctl, address: tcp://127.0.0.1:0, roles: [controller, frontend]}\n";
  for (int n = 0; n < times; ++n)
    nodes += "  - {name: w" + std::to_string(n) +
             ", address: tcp://127.0.0.1:0, roles: [worker], cores: 48, devices: [{kind: emulated, count: 24}]}\n";
  auto workload = [](const char* policy) {
    return std::string(R"(models:
  - {name: det, input: {dtype: float32, shape: [16]}, output: {dtype: float32, shape: [4]}, max_batch: 8, profile: {batch: [1, 2, 4, 8], latency_ms: [27, 36, 54, 90]}, cores: {gamma_ms: 8, epsilon_ms: 16, delta_ms: 1, eta_ms: 2}, load_ms: 2000}
  - {name: cls, input: {dtype: float32, shape: [4]}, output: {dtype: float32, shape: [2]}, max_batch: 8, profile: {batch: [1, 2, 4, 8], latency_ms: [13.5, 18, 27, 45]}, cores: {gamma_ms: 4, epsilon_ms: 8, delta_ms: 0.5, eta_ms: 1}, load_ms: 2000}
pipelines:
  - {name: p, slo_ms: 200, stages: [{name: det, model: det}, {name: cls, model: cls, after: [det]}]}
runtime: {beacon_ms: 100}
scaler: {policy: )") +
           policy + ", max_cores: 16, predictor: recent_max}\n";
  };
  int seconds = quick ? 60 : 120;
  auto trace = bursty_trace(100.0 * times, 5, 5, 60, seconds, 7);
  std::rotate(trace.rbegin(), trace.rbegin() + 30, trace.rend());  // bursts 30 s into each minute
  sim::options o;
  o.trace = trace;
  o.duration_s = seconds;
  o.warmup_s = 0;
  std::map<std::string, sim::result> runs;
  for (auto policy : {"fa2", "biscale"}) {
    auto cfg = parse(nodes + workload(policy));
    auto t0 = std::chrono::steady_clock::now();
    auto r = sim::simulate(cfg, o);
    if (!r) {
      fprintf(stderr, "sim: %s\n", r.error().c_str());
      std::exit(1);
    }
    printf(
        "autoscale x%d %-8s sent %lu, violations %.2f%% after 10 s (%.2f%% in all), lost %lu; %.0f instance-s, "
        "%.0f core-s, %lu resizes, %lu starts/stops (%.1f s wall)\n",
        times, policy, static_cast<unsigned long>(r->summary.sent), 100 * after_warmup(*r),
        100 * (1 - r->summary.attainment), static_cast<unsigned long>(r->summary.lost), r->scaling.instance_seconds,
        r->scaling.core_seconds, static_cast<unsigned long>(r->scaling.vertical_changes),
        static_cast<unsigned long>(r->scaling.horizontal_changes), seconds_since(t0));
    fflush(stdout);
    runs.emplace(policy, std::move(*r));
  }
  auto& f = runs.at("fa2");
  auto& b = runs.at("biscale");
  printf("autoscale x%d biscale/fa2: violations after 10 s %.2f, core-s %.2f, instance-s %.2f\n", times,
         after_warmup(b) / std::max(1e-9, after_warmup(f)),
         b.scaling.core_seconds / std::max(1e-9, f.scaling.core_seconds),
         b.scaling.instance_seconds / std::max(1e-9, f.scaling.instance_seconds));
}

// bench_autoscale's models (det -> cls, l(b, c), SLO 200 ms, cold starts of `load_ms`) on one
// node of 24 device slots and 48 cores; `tail` adds the scaler's (and scheduler's) lines.
std::string one_node_autoscale(const std::string& load_ms, const std::string& tail) {
  return R"(nodes:
  - {name: n, address: tcp://127.0.0.1:0, roles: [controller, frontend, worker], cores: 48, devices: [{kind: emulated, count: 24}]}
models:
  - {name: det, input: {dtype: float32, shape: [16]}, output: {dtype: float32, shape: [4]}, max_batch: 8, profile: {batch: [1, 2, 4, 8], latency_ms: [27, 36, 54, 90]}, cores: {gamma_ms: 8, epsilon_ms: 16, delta_ms: 1, eta_ms: 2}, load_ms: )" +
         load_ms + R"(}
  - {name: cls, input: {dtype: float32, shape: [4]}, output: {dtype: float32, shape: [2]}, max_batch: 8, profile: {batch: [1, 2, 4, 8], latency_ms: [13.5, 18, 27, 45]}, cores: {gamma_ms: 4, epsilon_ms: 8, delta_ms: 0.5, eta_ms: 1}, load_ms: )" +
         load_ms + R"(}
pipelines:
  - {name: p, slo_ms: 200, stages: [{name: det, model: det}, {name: cls, model: cls, after: [det]}]}
runtime: {beacon_ms: 100}
)" + tail;
}

// Sponge's per-request budgets against the stage's mean budget, on one node of 24 device slots
// and 48 cores with bench_autoscale's models, clients whose uploads differ: a tenth of them on a
// slow uplink (160 ms of the 200 ms SLO, the rest 10 ms), or uploads spread from 5 to 150 ms. The
// same arrivals for both (one seed); violations from second 10 on, and core-seconds.
void sponge() {
  auto yaml = [](bool per_request) {
    return one_node_autoscale("2000", std::string("scaler: {policy: sponge, max_cores: 16, per_request_budgets: ") +
                                          (per_request ? "true" : "false") + "}\n");
  };
  struct uplinks {
    const char* name;
    std::vector<double> ms;
  };
  std::vector<uplinks> networks{{"a tenth at 160 ms", {10, 10, 10, 10, 10, 10, 10, 10, 10, 160}},
                                {"spread 5-150 ms", {5, 10, 20, 40, 80, 120, 150}}};
  for (auto& net : networks)
    for (double rate : {30.0, 80.0}) {
      sim::options o;
      o.rate = rate;
      o.duration_s = quick ? 30 : 60;
      o.warmup_s = 0;
      o.uplink_ms = net.ms;
      double v[2], cost[2];
      for (int k = 0; k < 2; ++k) {
        auto r = sim::simulate(parse(yaml(k == 0)), o);
        if (!r) {
          fprintf(stderr, "sim: %s\n", r.error().c_str());
          std::exit(1);
        }
        v[k] = after_warmup(*r);
        cost[k] = r->scaling.core_seconds;
        if (r->summary.lost) fprintf(stderr, "sponge: %lu lost\n", static_cast<unsigned long>(r->summary.lost));
      }
      printf(
          "sponge %-18s %3.0f req/s: per-request budgets %.2f%% violations, %.0f core-s; mean budget %.2f%%, %.0f "
          "core-s (violations %.2fx, core-s %.2fx)\n",
          net.name, rate, 100 * v[0], cost[0], 100 * v[1], cost[1], v[0] / std::max(1e-9, v[1]),
          cost[0] / std::max(1e-9, cost[1]));
      fflush(stdout);
    }
}

// The rate predictors side by side (recent_max, trend, lstm) under fa2 and biscale, on one node
// of 24 device slots and 48 cores with bench_autoscale's models: its bursty trace, and a diurnal
// one compressed to 300 s a day (100 + 80·sin, ±10% noise) over three days. Violations from
// second 10 on (the LSTM learns from the trace as it goes: its first day counts too), and cost.
void predictors() {
  auto yaml = [](const std::string& policy, const std::string& predictor) {
    return one_node_autoscale("10000", "scheduler: {peak_half_life_s: 0}\nscaler: {policy: " + policy +
                                           ", max_cores: 16, predictor: " + predictor + "}\n");
  };
  int bursty_s = quick ? 60 : 120, day_s = 120, days = quick ? 3 : 5;
  auto bursty = bursty_trace(100, 5, 5, 60, bursty_s, 7);
  std::rotate(bursty.rbegin(), bursty.rbegin() + 30, bursty.rend());
  std::vector<double> diurnal;
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<double> noise(-0.1, 0.1);
  for (int t = 0; t < day_s * days; ++t)
    diurnal.push_back((100 + 80 * std::sin(2 * M_PI * t / day_s)) * (1 + noise(rng)));
  for (auto& [trace_name, trace] :
       std::vector<std::pair<std::string, std::vector<double>>>{{"bursty", bursty}, {"diurnal", diurnal}}) {
    for (auto policy : {"fa2", "biscale"}) {
      std::map<std::string, std::pair<double, double>> got;  // predictor: violations, core-s
      for (auto predictor : {"recent_max", "trend", "lstm"}) {
        sim::options o;
        o.trace = trace;
        o.duration_s = static_cast<double>(trace.size());
        o.warmup_s = 0;
        auto t0 = std::chrono::steady_clock::now();
        auto r = sim::simulate(parse(yaml(policy, predictor)), o);
        if (!r) {
          fprintf(stderr, "sim: %s\n", r.error().c_str());
          std::exit(1);
        }
        got[predictor] = {after_warmup(*r), r->scaling.core_seconds};
        printf(
            "predictors %-7s %-7s %-10s violations %.2f%% after 10 s, lost %lu; %.0f instance-s, %.0f core-s (%.1f s "
            "wall)\n",
            trace_name.c_str(), policy, predictor, 100 * after_warmup(*r), static_cast<unsigned long>(r->summary.lost),
            r->scaling.instance_seconds, r->scaling.core_seconds, seconds_since(t0));
        fflush(stdout);
      }
      auto& l = got.at("lstm");
      auto& m = got.at("recent_max");
      printf("predictors %-7s %-7s lstm vs recent_max: violations %.2f%% vs %.2f%%, core-s %.2fx%s\n",
             trace_name.c_str(), policy, 100 * l.first, 100 * m.first, l.second / std::max(1e-9, m.second),
             trace_name == "diurnal" ? " (target: fewer violations at no more cost)" : "");
      fflush(stdout);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string what = "all";
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--quick"))
      quick = true;
    else if (!std::strcmp(argv[i], "--devices") && i + 1 < argc)
      fleet_devices = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--times") && i + 1 < argc)
      times = std::atoi(argv[++i]);
    else
      what = argv[i];
  }
  bench::log_to_stderr();
  if (what == "all" || what == "scale") {
    scale("traffic", bench::traffic_workload());
    scale("game x300", bench::game_workload(300));
  }
  // Starting points: an eighth of what 8 devices carry in bench_nexus, times the devices / 8.
  if (what == "all" || what == "traffic") compare("traffic", bench::traffic_workload(), 2.0 * fleet_devices);
  if (what == "all" || what == "game") compare("game", bench::game_workload(20), 20.0 * fleet_devices);
  if (what == "all" || what == "autoscale") autoscale();
  if (what == "all" || what == "sponge") sponge();
  if (what == "all" || what == "predictors") predictors();
  if (what == "all" || what == "priorities") bench::priorities(quick);
  return 0;
}
