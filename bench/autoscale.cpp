// Autoscaling policies side by side: none (a fixed cluster planned by Nexus), fa2,
// sponge and biscale, each on a fresh in-process emulated cluster, on two traces:
//   bursty   100 req/s, x5 for 5 s every 60 s (bursts at 30 s and 90 s of 120 s);
//   stepped  100 req/s, uplink 20 -> 5 -> 2.5 -> 10 Mbps every 30 s, 25 KB per request
//            (network time 10, 40, 80, 20 ms taken from a 200 ms SLO).
// Pipeline det -> cls with l(b, c) = γ·b/c + ε/c + δ·b + η per model. Reports the violation
// rate (not OK within the SLO, upload included) and the cost in instance-seconds and
// core-seconds (`none`: its fixed devices the whole time). Workers report load every 100 ms,
// the same for every policy: a surge is seen within 100 ms of its start. A new instance takes
// 2 s to load its model (SLOSERVE_LOAD_MS); resizing cores in place takes effect at once.
//
//   build/bench/bench_autoscale [seconds-per-trace=120] [policies=none,fa2,sponge,biscale]
//                               [predictors=recent_max,trend] [traces=bursty,stepped]
// fa2 and biscale plan with a rate predictor: they run once per predictor, side by side, and
// the targets are checked per predictor (the same one for both). none and sponge use none.
// SLOSERVE_SERIES=1 also prints each run's violations and drops per second, and the drop
// reasons, on stderr.

#include <algorithm>
#include <caf/all.hpp>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <sstream>

#include "actors/node_runtime.hpp"
#include "bench/harness.hpp"
#include "loadgen/load.hpp"
#include "scheduling/autoscaler.hpp"

using namespace sloserve;

namespace {

// A new instance loads its model for this long before it serves (cold start; the thesis's
// instances take "a few seconds"). SLOSERVE_LOAD_MS overrides it.
std::string load_ms() {
  auto* v = std::getenv("SLOSERVE_LOAD_MS");
  return v && *v ? v : "2000";
}

std::string yaml(const std::string& policy, const std::string& predictor) {
  bool fixed = policy == "none";
  // `none` gets a fixed cluster sized for the base load with Nexus planning; the scalers get a
  // pool of device slots and cores to draw from.
  std::string devices = fixed ? "[{kind: emulated, count: 6}]" : "[{kind: emulated, count: 24}]";
  return "cluster: {name: autoscale}\n"
         "nodes:\n"
         "  - {name: n, address: tcp://127.0.0.1:0, roles: [controller, frontend, worker], cores: 48, devices: " +
         devices +
         "}\n"
         "models:\n"
         "  - name: det\n"
         "    input: {dtype: float32, shape: [16]}\n"
         "    output: {dtype: float32, shape: [4]}\n"
         "    max_batch: 8\n"
         "    profile: {batch: [1, 2, 4, 8], latency_ms: [27, 36, 54, 90]}\n"
         "    cores: {gamma_ms: 8, epsilon_ms: 16, delta_ms: 1, eta_ms: 2}\n"
         "    load_ms: " +
         load_ms() +
         "\n"
         "  - name: cls\n"
         "    input: {dtype: float32, shape: [4]}\n"
         "    output: {dtype: float32, shape: [2]}\n"
         "    max_batch: 8\n"
         "    profile: {batch: [1, 2, 4, 8], latency_ms: [13.5, 18, 27, 45]}\n"
         "    cores: {gamma_ms: 4, epsilon_ms: 8, delta_ms: 0.5, eta_ms: 1}\n"
         "    load_ms: " +
         load_ms() +
         "\n"
         "pipelines:\n"
         "  - {name: p, slo_ms: 200, stages: [{name: det, model: det}, {name: cls, model: cls, after: [det]}]}\n"
         "runtime: {threads: 2, beacon_ms: 100}\n"
         "scheduler: {epoch_s: 10, min_epoch_s: 5}\n" +
         (fixed ? std::string() : "scaler: {policy: " + policy + ", max_cores: 16, predictor: " + predictor + "}\n");
}

// Every policy starts from one one-core instance per stage, and fa2 plans first at its first
// horizontal period: violations count from then on, so the ratios compare the policies, not
// their start. `violation (all)` includes the first seconds.
constexpr size_t warm_s = 10;

struct result {
  load_summary load;
  scaler_stats cost;
  // Violation rate after the warm-up.
  double violation() const {
    uint64_t sent = 0, ok = 0;
    for (size_t t = warm_s; t < load.series.size(); ++t) {
      sent += load.series[t]["sent"].get<uint64_t>();
      ok += load.series[t]["ok_within_slo"].get<uint64_t>();
    }
    return sent ? 1 - static_cast<double>(ok) / static_cast<double>(sent) : 0;
  }
};

result run(const std::string& policy, const std::string& predictor, const std::vector<double>& rates,
           const std::vector<double>& mbps, double kb) {
  auto [cfg, node] = bench::start_node(yaml(policy, predictor), "autoscale.yaml");
  load_options o;
  o.address = node->endpoint();
  o.pipeline = "p";
  o.slo_ms = 200;
  o.input = cfg->models[0].input;
  o.trace = rates;
  o.duration_s = static_cast<double>(rates.size());
  o.bandwidth_mbps = mbps;
  o.payload_kb = kb;
  o.grace_ms = 1000;
  result r;
  if (auto ran = run_load(o))
    r.load = std::move(*ran);
  else
    fprintf(stderr, "load: %s\n", ran.error().c_str());
  if (auto scaler = node->actors().scaler) {
    caf::scoped_actor self{node->system()};
    self->request(scaler, std::chrono::seconds(5), stats_atom::value)
        .receive([&](const scaler_stats& s) { r.cost = s; }, [](caf::error&) {});
  } else {
    double s = static_cast<double>(rates.size());
    r.cost.seconds = s;
    r.cost.instance_seconds = r.cost.core_seconds = 6 * s;
  }
  node->stop();
  if (std::getenv("SLOSERVE_SERIES")) {
    // Violations per second, for reading where a policy loses requests.
    fprintf(stderr, "%s violations/s:", policy.c_str());
    for (auto& b : r.load.series)
      fprintf(stderr, " %llu",
              static_cast<unsigned long long>(b["sent"].get<uint64_t>() - b["ok_within_slo"].get<uint64_t>()));
    fprintf(stderr, "\n%s dropped/s:", policy.c_str());
    for (auto& b : r.load.series)
      fprintf(stderr, " %llu", static_cast<unsigned long long>(b["dropped"].get<uint64_t>()));
    fprintf(stderr, "\n%s reasons: %s\n", policy.c_str(), r.load.reasons.dump().c_str());
  }
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  int seconds = argc > 1 ? std::atoi(argv[1]) : 120;
  std::vector<std::string> policies{"none", "fa2", "sponge", "biscale"};
  if (argc > 2) {
    policies.clear();
    std::stringstream ss(argv[2]);
    for (std::string p; std::getline(ss, p, ',');) policies.push_back(p);
  }
  std::vector<std::string> predictors{"recent_max", "trend"};
  if (argc > 3) {
    predictors.clear();
    std::stringstream ss(argv[3]);
    for (std::string p; std::getline(ss, p, ',');) predictors.push_back(p);
  }
  std::string traces = argc > 4 ? argv[4] : "bursty,stepped";
  printf("%d s per trace\n", seconds);
  // Bursts 30 s into each minute (the first after the scalers have settled).
  auto bursty = bursty_trace(100, 5, 5, 60, seconds, 7);
  std::rotate(bursty.rbegin(), bursty.rbegin() + std::min(30, seconds), bursty.rend());
  auto flat = bursty_trace(100, 1, 0, 60, seconds, 8);
  auto steps = stepped_trace({20, 5, 2.5, 10}, 30, seconds);
  struct row {
    std::string trace, policy, predictor;  // predictor: empty for a policy that uses none
    result r;
  };
  std::vector<row> rows;
  for (auto& [name, rates, mbps, kb] :
       std::vector<std::tuple<std::string, std::vector<double>, std::vector<double>, double>>{
           {"bursty", bursty, {}, 0}, {"stepped", flat, steps, 25}}) {
    if (("," + traces + ",").find("," + name + ",") == std::string::npos) continue;
    for (auto& p : policies) {
      bool predicts = p == "fa2" || p == "biscale";
      for (auto& pr : predicts ? predictors : std::vector<std::string>{predictors.front()}) {
        fprintf(stderr, "%s / %s %s ...\n", name.c_str(), p.c_str(), predicts ? pr.c_str() : "");
        rows.push_back({name, p, predicts ? pr : "", run(p, pr, rates, mbps, kb)});
      }
    }
  }
  printf("%-8s %-8s %-11s %8s %8s %10s %10s %12s %11s %10s %8s\n", "trace", "policy", "predictor", "sent", "lost",
         "violation", "(all)", "instance-s", "core-s", "vertical", "horiz.");
  for (auto& x : rows) {
    auto& l = x.r.load;
    double all = l.sent ? 1 - static_cast<double>(l.ok_within_slo) / static_cast<double>(l.sent) : 0;
    printf("%-8s %-8s %-11s %8llu %8llu %9.2f%% %9.2f%% %12.0f %11.0f %10llu %8llu\n", x.trace.c_str(),
           x.policy.c_str(), x.predictor.empty() ? "-" : x.predictor.c_str(), static_cast<unsigned long long>(l.sent),
           static_cast<unsigned long long>(l.lost), 100 * x.r.violation(), 100 * all, x.r.cost.instance_seconds,
           x.r.cost.core_seconds, static_cast<unsigned long long>(x.r.cost.vertical_changes),
           static_cast<unsigned long long>(x.r.cost.horizontal_changes));
  }
  // What serving a whole trace costs at least: every second's rate on one-core instances at
  // their best batch (the latency limit ignored), in whole instances. On `bursty` this is above
  // 1.1x of a policy that never provisions for the bursts.
  auto parsed = parse_cluster_config(yaml("fa2", "trend"), "autoscale.yaml");
  for (auto& [name, rates] :
       std::vector<std::pair<std::string, std::vector<double>>>{{"bursty", bursty}, {"stepped", flat}}) {
    double least = 0;
    for (auto r : rates)
      for (auto& m : parsed.config->models) {
        double best = sched::one_core_throughput(*m.cores, std::numeric_limits<double>::infinity(), m.batch_limit());
        least += std::ceil(r / best - 1e-9);
      }
    printf("%s: least core-s that serves every request (one-core instances, best batch, latency ignored): %.0f\n",
           name.c_str(), least);
  }
  // The targets: biscale against fa2 on each trace, both with the same predictor.
  for (auto& pr : predictors)
    for (auto& t : {"bursty", "stepped"}) {
      const row *f = nullptr, *b = nullptr;
      for (auto& x : rows)
        if (x.trace == t && x.predictor == pr) {
          if (x.policy == "fa2") f = &x;
          if (x.policy == "biscale") b = &x;
        }
      if (!f || !b) continue;
      auto v = [](const row* x) { return x->r.violation(); };
      printf(
          "%s, %s: biscale/fa2 violations %.2f (target <= 0.20), core-s %.2f, instance-s %.2f (target cost <= 1.10)\n",
          t, pr.c_str(), v(f) > 0 ? v(b) / v(f) : 0.0, b->r.cost.core_seconds / std::max(1.0, f->r.cost.core_seconds),
          b->r.cost.instance_seconds / std::max(1.0, f->r.cost.instance_seconds));
    }
}
