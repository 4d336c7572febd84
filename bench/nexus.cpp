// bench/nexus: Nexus's control plane against a batch-oblivious baseline on emulated devices,
// the drop policies of thesis 002 §3.5.1, and planner speed. Every figure comes from this run.
//
// Usage: bench_nexus [all|traffic|game|drop|speed] [--quick] [--window SECONDS] [--sizes N,N,...]
//
// For a workload and a policy combination, the highest rate whose attainment is >= 99% is found
// by doubling and then bisection. Each trial starts a fresh in-process node with 8 emulated
// devices, sends Poisson load through the built-in client for a warmup (the scheduler plans
// on the measured rates in it) and then a measured window.

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "actors/parallel_for.hpp"
#include "bench/fleet.hpp"
#include "bench/harness.hpp"
#include "bench/workloads.hpp"
#include "scheduling/epoch.hpp"
#include "scheduling/placement.hpp"
#include "scheduling/planner.hpp"

using namespace sloserve;

namespace {

bool quick = false;
double window_s = 0;  // measured window of each trial; 0: 6 s (4 s with --quick)

std::string traffic_yaml() {
  return bench::nodes_yaml(8, true) + bench::traffic_workload();
}

constexpr int games = 20;

std::string game_yaml() {
  return bench::nodes_yaml(8, true) + bench::game_workload(games);
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

// `plan_epoch` exactly as `sloserve plan` calls it (DP split, neighbours on) on synthetic fleets
// of mixed single- and 3-stage pipelines; the controller's `plan_scaled_epoch` and an
// incremental re-plan beside it; the growth exponent fitted over the sizes; and the wall time of
// a `sloserve plan` process on the 1,000-session fleet.
void planner_speed(const std::vector<int>& sizes) {
  auto ms = [](auto d) { return std::chrono::duration<double, std::milli>(d).count(); };
  std::vector<double> xs, ys;
  for (int n : sizes) {
    bench::fleet_spec spec;
    spec.sessions = n;
    auto f = bench::make_fleet(spec);
    auto parsed = parse_cluster_config(f.yaml, "fleet.yaml");
    if (!parsed) {
      fprintf(stderr, "%s", parsed.error_text().c_str());
      std::exit(1);
    }
    auto& cfg = *parsed.config;
    auto in = planning_input(cfg, cfg.models);
    in.rates = f.rates;
    in.parallel = parallel_for;
    auto t0 = std::chrono::steady_clock::now();
    auto r = sched::plan_epoch(in);
    auto t1 = std::chrono::steady_clock::now();
    if (!r) {
      fprintf(stderr, "plan_epoch: %s\n", r.error().c_str());
      std::exit(1);
    }
    auto bad = sched::check_plan(r->placement, r->sessions, {});
    std::mt19937_64 rng(7);
    auto moved = in;
    for (auto& x : moved.rates) x *= std::uniform_real_distribution<double>(0.9, 1.1)(rng);
    auto t2 = std::chrono::steady_clock::now();
    auto again = sched::plan_epoch(moved, &*r);
    auto t3 = std::chrono::steady_clock::now();
    auto scaled_in = in;
    auto t4 = std::chrono::steady_clock::now();
    auto scaled = sched::plan_scaled_epoch(scaled_in, &*r);
    auto t5 = std::chrono::steady_clock::now();
    printf(
        "planner  %5zu sessions (%zu pipelines), %d devices: plan_epoch %.1f ms, %zu devices used, %zu missing, "
        "%zu infeasible, %zu broken promises; re-plan at +-10%% %.1f ms (%zu moved); plan_scaled_epoch %.1f ms "
        "(x%.2f)\n",
        r->sessions.size(), f.pipelines.size(), f.devices, ms(t1 - t0), r->placement.devices.size(), r->devices_missing,
        r->placement.infeasible.size(), bad.size(), ms(t3 - t2), again ? again->placement.moved : 0, ms(t5 - t4),
        scaled ? scaled->scale : 0.0);
    fflush(stdout);
    xs.push_back(std::log(static_cast<double>(n)));
    ys.push_back(std::log(ms(t1 - t0)));
  }
  if (xs.size() >= 2) {
    double mx = 0, my = 0;
    for (size_t i = 0; i < xs.size(); ++i) mx += xs[i] / xs.size(), my += ys[i] / xs.size();
    double sxy = 0, sxx = 0;
    for (size_t i = 0; i < xs.size(); ++i) sxy += (xs[i] - mx) * (ys[i] - my), sxx += (xs[i] - mx) * (xs[i] - mx);
    printf("planner  growth exponent of plan_epoch over %zu sizes: %.2f (target <= 1.3)\n", xs.size(), sxy / sxx);
  }
  // The process as a user runs it.
  bench::fleet_spec spec;
  spec.sessions = 1000;
  auto f = bench::make_fleet(spec);
  char dir[] = "/tmp/bench_plan_XXXXXX";
  if (!mkdtemp(dir)) return;
  std::string file = std::string(dir) + "/fleet.yaml";
  if (FILE* out = fopen(file.c_str(), "w")) {
    fputs(f.yaml.c_str(), out);
    fclose(out);
  }
  std::vector<std::string> args{SLOSERVE_BIN, "plan", "-c", file, "--json"};
  for (size_t i = 0; i < f.pipelines.size(); ++i)
    args.push_back("--rate=" + f.pipelines[i] + "=" + std::to_string(f.rates[i]));
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  fflush(stdout);
  auto t0 = std::chrono::steady_clock::now();
  pid_t pid = fork();
  if (pid == 0) {
    if (!freopen("/dev/null", "w", stdout)) _exit(127);
    execv(argv[0], argv.data());
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  auto t1 = std::chrono::steady_clock::now();
  printf("planner  `sloserve plan` process on %d sessions, %d devices: %.0f ms wall (exit %d; target <= 1500 ms)\n",
         spec.sessions, f.devices, ms(t1 - t0), WIFEXITED(status) ? WEXITSTATUS(status) : -1);
  unlink(file.c_str());
  rmdir(dir);
}

}  // namespace

int main(int argc, char** argv) {
  std::string what = "all";
  std::vector<int> sizes{1000, 3000, 10000};
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--quick"))
      quick = true;
    else if (!std::strcmp(argv[i], "--sizes") && i + 1 < argc) {
      sizes.clear();
      for (char* t = std::strtok(argv[++i], ","); t; t = std::strtok(nullptr, ",")) sizes.push_back(std::atoi(t));
    } else if (!std::strcmp(argv[i], "--window") && i + 1 < argc)
      window_s = std::atof(argv[++i]);
    else
      what = argv[i];
  }
  bench::log_to_stderr();
  if (what == "all" || what == "speed") planner_speed(sizes);
  if (what == "all" || what == "drop") drop_policies(1300);
  if (what == "all" || what == "drop") drop_policies(1420);
  if (what == "all" || what == "traffic") compare("traffic", traffic_yaml(), 20);
  if (what == "all" || what == "game") compare("game", game_yaml(), 100);
  return 0;
}
