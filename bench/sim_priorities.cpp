// bench_sim priorities: a pipeline of high priority beside a low one at twice what two devices
// carry, in the simulator, under each policy that plans and under the static placement with
// the devices' order (every model on every device, the high queue first), whose low goodput is
// the reference: what the devices get through in time beside the high one when nothing but their
// order stands in the way. Every figure comes from this run.

#include "bench/sim_priorities.hpp"

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench/harness.hpp"
#include "sim/simulator.hpp"

namespace sloserve::bench {

namespace {

// Two devices of about 105 queries/s each at batch 4 (l(b) = 9b + 2 ms), SLO 100 ms.
std::string priorities_yaml(const std::string& policy) {
  return R"(nodes:
  - {name: ctl, address: tcp://127.0.0.1:0, roles: [controller, frontend]}
  - {name: w1, address: tcp://127.0.0.1:0, roles: [worker], devices: [{kind: emulated, count: 1}]}
  - {name: w2, address: tcp://127.0.0.1:0, roles: [worker], devices: [{kind: emulated, count: 1}]}
models:
  - {name: hm, input: {dtype: float32, shape: [4]}, output: {dtype: float32, shape: [2]}, max_batch: 4, profile: {alpha_ms: 9, beta_ms: 2}}
  - {name: lm, input: {dtype: float32, shape: [4]}, output: {dtype: float32, shape: [2]}, max_batch: 4, profile: {alpha_ms: 9, beta_ms: 2}}
pipelines:
  - {name: high, slo_ms: 100, priority: 1, stages: [{name: s, model: hm}]}
  - {name: low, slo_ms: 100, stages: [{name: s, model: lm}]}
runtime: {heartbeat_ms: 100, peer_timeout_ms: 500}
scheduler: {epoch_s: 5, min_epoch_s: 2, policy: )" +
         policy + "}\n";
}

struct outcome {
  double high_worst = 1, high_mean = 0, low_goodput = 0;  // low: queries/s within the SLO, mean
};

// `runs` seeds of 400 queries/s, `high` of every 20 to the high pipeline, 20 s after 8 s.
outcome run(const std::string& policy, int high, int runs) {
  auto cfg = parse_or_exit(priorities_yaml(policy), "priorities.yaml");
  outcome out;
  for (int seed = 1; seed <= runs; ++seed) {
    sim::options o;
    o.rate = 400;
    o.warmup_s = 8;
    o.duration_s = 20;
    o.seed = static_cast<uint64_t>(seed);
    for (int k = 0; k < 20; ++k) o.pipelines.push_back(k < high ? "high" : "low");
    auto r = sim::simulate(cfg, o);
    if (!r) {
      fprintf(stderr, "sim: %s\n", r.error().c_str());
      std::exit(1);
    }
    auto& h = r->pipelines.at("high");
    auto& l = r->pipelines.at("low");
    double a = h.sent ? static_cast<double>(h.within_slo) / static_cast<double>(h.sent) : 0;
    out.high_worst = std::min(out.high_worst, a);
    out.high_mean += a / runs;
    out.low_goodput += static_cast<double>(l.within_slo) / o.duration_s / runs;
  }
  return out;
}

}  // namespace

void priorities(bool quick) {
  int runs = quick ? 2 : 5;
  for (int high : {3, 4}) {  // 60 and 80 queries/s of the 400
    auto reference = run("static", high, runs);
    printf(
        "priorities at 2x, high %d + low %d q/s, %d seeds: static with the devices' order: high %.2f%% (worst "
        "%.2f%%), low %.1f/s (the reference)\n",
        high * 20, 400 - high * 20, runs, 100 * reference.high_mean, 100 * reference.high_worst, reference.low_goodput);
    for (const char* policy : {"nexus", "batch-oblivious"}) {
      auto x = run(policy, high, runs);
      printf(
          "  %-16s high %.2f%% (worst %.2f%%; target >= 99.5%%), low %.1f/s = %.2fx the reference (target >= 0.90)\n",
          policy, 100 * x.high_mean, 100 * x.high_worst, x.low_goodput,
          reference.low_goodput > 0 ? x.low_goodput / reference.low_goodput : 0);
    }
    fflush(stdout);
  }
}

}  // namespace sloserve::bench
