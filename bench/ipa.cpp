// IPA's comparison (thesis 004 part II, the video pipeline): IPA against the lowest-accuracy and
// the highest-accuracy variants each scaled by FA2 (FA2-low, FA2-high), on a bursty trace and a
// steady one, in simulated time (`sloserve sim`'s engine: the cluster's own scaler, routing and
// devices). Reports side by side the accuracy served (the mean over answered queries of the
// product of their stages' accuracies), the core-seconds the instances held and the SLO
// violations (not OK within the SLO).
//
// The pipeline: an object detector (YOLOv5 n, s, m, l, x: mAP 45.7, 56.8, 64.1, 67.3, 68.9 and
// base allocations 1, 1, 2, 4, 8 cores) feeding a classifier (ResNet 18, 34, 50, 101, 152: top-1
// 69.75, 73.31, 76.13, 77.37, 78.31 and base allocations 1, 1, 1, 1, 2), SLO 6.89 s (thesis
// tables P3.3, P3.6-P3.8). Latencies at the base allocation: YOLOv5n and m, ResNet-18 and 50 at
// batch 1 and 8 from table P3.3; the others are interpolated by their parameter counts (the thesis
// gives none). Every model's latency scales with cores as l(b, c) = (alpha·b + beta)·R/c, so a
// one-core FA2 instance of a variant with base allocation R is R times slower.
//
// Also times IPA's exact solver on 20 pipelines of 4 stages of 4 variants against brute force.
//
//   build/bench/bench_ipa [seconds-per-trace=600]

#include "scheduling/ipa.hpp"

#include <spdlog/spdlog.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "config/cluster_config.hpp"
#include "loadgen/arrivals.hpp"
#include "sim/simulator.hpp"

using namespace sloserve;

namespace {

struct variant {
  const char* name;
  double accuracy, base_cores, l1_ms, l8_ms;  // l(1) and l(8) at the base allocation
};

const std::vector<variant> detectors = {
    {"yolov5n", 45.7, 1, 80, 481},   {"yolov5s", 56.8, 1, 190, 1010}, {"yolov5m", 64.1, 2, 347, 1654},
    {"yolov5l", 67.3, 4, 380, 1800}, {"yolov5x", 68.9, 8, 360, 1700},
};
const std::vector<variant> classifiers = {
    {"resnet18", 69.75, 1, 73, 383},    {"resnet34", 73.31, 1, 120, 650},  {"resnet50", 76.13, 1, 136, 833},
    {"resnet101", 77.37, 1, 230, 1420}, {"resnet152", 78.31, 2, 160, 980},
};

std::string model_yaml(const variant& v) {
  double alpha = (v.l8_ms - v.l1_ms) / 7, beta = v.l1_ms - alpha;
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "  - {name: %s, input: {dtype: float32, shape: [8]}, output: {dtype: float32, shape: [8]}, "
                "max_batch: 8, profile: {alpha_ms: %.3f, beta_ms: %.3f}, cores: {gamma_ms: %.3f, epsilon_ms: %.3f, "
                "delta_ms: 0, eta_ms: 0}, accuracy: %.2f, base_cores: %g, load_ms: 2000}\n",
                v.name, alpha * v.base_cores, beta * v.base_cores, alpha * v.base_cores, beta * v.base_cores,
                v.accuracy, v.base_cores);
  return buf;
}

// policy: ipa (both stages choose among their variants), low or high (FA2 on one variant each).
std::string yaml(const std::string& policy) {
  std::string y =
      "cluster: {name: ipa-bench}\n"
      "nodes:\n"
      "  - {name: ctl, address: tcp://127.0.0.1:0, roles: [controller, frontend]}\n";
  for (int w = 1; w <= 4; ++w)
    y += "  - {name: w" + std::to_string(w) +
         ", address: tcp://127.0.0.1:0, roles: [worker], cores: 96, devices: [{kind: emulated, count: 96}]}\n";
  y += "models:\n";
  for (auto& v : detectors) y += model_yaml(v);
  for (auto& v : classifiers) y += model_yaml(v);
  auto stage = [&](const char* name, const std::vector<variant>& vs) {
    std::string s = std::string("{name: ") + name + ", ";
    if (policy == "ipa") {
      s += "variants: [";
      for (size_t k = 0; k < vs.size(); ++k) s += (k ? ", " : "") + std::string(vs[k].name);
      s += "]";
    } else {
      s += "model: " + std::string(policy == "low" ? vs.front().name : vs.back().name);
    }
    return s;
  };
  y += "pipelines:\n  - {name: video, slo_ms: 6890, stages: [" + stage("detect", detectors) + "}, " +
       stage("classify", classifiers) + ", after: [detect]}]}\n";
  y += "runtime: {beacon_ms: 1000}\n";
  if (policy == "ipa")
    y += "scheduler: {policy: ipa, ipa: {alpha: 1, beta: 0.005, delta: 0.0001, interval_s: 10}}\n"
         "scaler: {vertical_s: 1, predictor: recent_max}\n";
  else
    y += "scaler: {policy: fa2, vertical_s: 1, horizontal_s: 10, predictor: recent_max}\n";
  return y;
}

struct row {
  std::string trace, policy;
  sim::result r;
  double violation() const {
    auto& s = r.summary;
    return s.sent ? 1 - static_cast<double>(s.ok_within_slo) / static_cast<double>(s.sent) : 0;
  }
};

sim::result run(const std::string& policy, const std::vector<double>& trace) {
  auto parsed = parse_cluster_config(yaml(policy), "ipa-bench.yaml");
  if (!parsed) {
    std::fprintf(stderr, "%s\n", parsed.error_text().c_str());
    std::exit(1);
  }
  sim::options o;
  o.pipelines = {"video"};
  o.trace = trace;
  o.duration_s = static_cast<double>(trace.size());
  o.warmup_s = 20;  // the scalers' first plans, not counted
  auto r = sim::simulate(*parsed.config, o);
  if (!r) {
    std::fprintf(stderr, "sim: %s\n", r.error().c_str());
    std::exit(1);
  }
  return std::move(*r);
}

// Random pipelines of `stages` chained stages of `variants` variants, for the planning time.
std::vector<std::vector<sched::ipa_stage>> random_pipelines(int n, int stages, int variants,
                                                            std::vector<model_spec>& models) {
  std::mt19937_64 rng(42);
  std::uniform_real_distribution<double> u(0, 1);
  models.clear();
  models.reserve(static_cast<size_t>(n * stages * variants));
  std::vector<std::vector<sched::ipa_stage>> out;
  for (int p = 0; p < n; ++p) {
    std::vector<sched::ipa_stage> ps;
    for (int s = 0; s < stages; ++s) {
      sched::ipa_stage st;
      st.rate = 10 + 90 * u(rng);
      if (s) st.after = {static_cast<size_t>(s - 1)};
      for (int v = 0; v < variants; ++v) {
        model_spec m;
        m.name = "m";
        m.max_batch = 8;
        m.profile.alpha_ms = 2 + 20 * u(rng);
        m.profile.beta_ms = 5 + 20 * u(rng);
        models.push_back(m);
        st.variants.push_back({&models.back(), 50 + 30 * u(rng), std::floor(1 + 4 * u(rng))});
      }
      ps.push_back(std::move(st));
    }
    out.push_back(std::move(ps));
  }
  return out;
}

// Every (variant, batch) of every stage: the best objective by exhaustion.
double brute_force(const std::vector<sched::ipa_stage>& stages, double slo_ms, const sched::ipa_weights& w) {
  std::vector<sched::ipa_choice> pick(stages.size());
  double best = -1e300;
  std::vector<size_t> idx(stages.size(), 0);
  auto options = [&](size_t s) { return stages[s].variants.size() * 8; };
  while (true) {
    for (size_t s = 0; s < stages.size(); ++s) pick[s] = {idx[s] / 8, static_cast<int>(idx[s] % 8) + 1, 1, 0};
    auto e = sched::evaluate_ipa(stages, pick, w);
    if (e.latency_ms <= slo_ms) best = std::max(best, e.objective);
    size_t s = 0;
    while (s < stages.size() && ++idx[s] == options(s)) idx[s++] = 0;
    if (s == stages.size()) break;
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  int seconds = argc > 1 ? std::atoi(argv[1]) : 600;
  spdlog::set_level(std::getenv("SLOSERVE_LOG") ? spdlog::level::info : spdlog::level::warn);  // each decision
  // Bursty: 10 req/s with 5 s bursts of 3x every minute; steady: 10 req/s.
  auto bursty = bursty_trace(10, 3, 5, 60, seconds, 7);
  auto steady = bursty_trace(10, 1, 0, 60, seconds, 8);
  std::vector<row> rows;
  for (auto& [name, trace] :
       std::vector<std::pair<std::string, std::vector<double>>>{{"bursty", bursty}, {"steady", steady}})
    for (std::string policy : {"ipa", "low", "high"}) {
      std::fprintf(stderr, "%s / %s ...\n", name.c_str(), policy.c_str());
      rows.push_back({name, policy, run(policy, trace)});
    }
  std::printf("%d s per trace, video pipeline (YOLOv5 -> ResNet), SLO 6.89 s\n", seconds);
  std::printf("%-7s %-9s %8s %6s %10s %10s %12s\n", "trace", "policy", "sent", "lost", "accuracy", "violation",
              "core-s");
  for (auto& x : rows) {
    auto name = x.policy == "ipa" ? "ipa" : x.policy == "low" ? "fa2-low" : "fa2-high";
    std::printf("%-7s %-9s %8llu %6llu %9.2f%% %9.2f%% %12.0f\n", x.trace.c_str(), name,
                static_cast<unsigned long long>(x.r.summary.sent), static_cast<unsigned long long>(x.r.summary.lost),
                100 * x.r.accuracy, 100 * x.violation(), x.r.scaling.core_seconds);
  }
  int failed = 0;
  for (std::string trace : {"bursty", "steady"}) {
    const row *ipa = nullptr, *low = nullptr, *high = nullptr;
    for (auto& x : rows)
      if (x.trace == trace) (x.policy == "ipa" ? ipa : x.policy == "low" ? low : high) = &x;
    double gap = high->r.accuracy - low->r.accuracy;
    double share = gap > 0 ? (ipa->r.accuracy - low->r.accuracy) / gap : 1;
    double cost = ipa->r.scaling.core_seconds / high->r.scaling.core_seconds;
    std::printf(
        "%s: IPA violations %.2f%% (fa2-high %.2f%%), core-s %.2fx fa2-high's, accuracy %.0f%% of the way from "
        "fa2-low to fa2-high\n",
        trace.c_str(), 100 * ipa->violation(), 100 * high->violation(), cost, 100 * share);
    if (trace == "bursty") {
      bool ok = ipa->violation() <= high->violation() + 1e-9 && cost <= 0.8 && share >= 0.5;
      std::printf("  targets (violations <= fa2-high's, core-s <= 0.8x, accuracy >= 50%% of the gap): %s\n",
                  ok ? "met" : "MISSED");
      failed += !ok;
    }
    for (auto* x : {ipa, low, high}) failed += x->r.summary.lost != 0;
  }
  // Planning time: 20 pipelines x 4 stages x 4 variants, IPA's exact search against brute force.
  std::vector<model_spec> models;
  auto pipelines = random_pipelines(20, 4, 4, models);
  sched::ipa_weights w{1, 0.01, 0.0001};
  auto t0 = std::chrono::steady_clock::now();
  std::vector<double> solved;
  for (auto& p : pipelines) {
    auto s = sched::solve_ipa(p, 400, w);
    solved.push_back(s ? s->objective : -1e300);
  }
  double ipa_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  t0 = std::chrono::steady_clock::now();
  int agree = 0;
  for (size_t k = 0; k < pipelines.size(); ++k) agree += std::abs(brute_force(pipelines[k], 400, w) - solved[k]) < 1e-6;
  double brute_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  std::printf(
      "planning 20 pipelines x 4 stages x 4 variants: IPA %.2f ms, brute force %.0f ms (%.0fx), same objective "
      "on %d of 20; target < 100 ms: %s\n",
      ipa_ms, brute_ms, brute_ms / ipa_ms, agree, ipa_ms < 100 ? "met" : "MISSED");
  failed += ipa_ms >= 100 || agree != 20;
  return failed ? 1 : 0;
}
