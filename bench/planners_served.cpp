// bench/planners' served section: nexus and piccolo plans of a mixed fleet and of a padded set,
// and Graft's plan of partitioned clients against each fragment alone, each served by an
// in-process emulated node under Poisson load at the rate planned for.

#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "bench/harness.hpp"
#include "bench/planners.hpp"
#include "scheduling/placement.hpp"
#include "scheduling/policies/graft/fragments.hpp"

namespace sloserve::planners_bench {

// Each policy's plan served: one node with every role and the workload's devices, the policy's
// epochs on the measured rates (every 2 s), Poisson load at `rate` for 4 s of warm-up and 8 s
// measured. Cost is the plan's for the rate with the default 10% headroom.
void served() {
  printf("\nserved (one in-process node, emulated devices, Poisson, 4 s warm-up + 8 s):\n");
  const char* mixed = R"(device_types: [{name: t4, price: 0.53}, {name: a10, price: 1.01}, {name: a100, price: 3.67}]
nodes:
  - name: n
    address: tcp://127.0.0.1:0
    roles: [controller, frontend, worker]
    devices: [{kind: emulated, count: 8, type: t4}, {kind: emulated, count: 4, type: a10}, {kind: emulated, count: 2, type: a100}]
models:
  - name: detector
    input: {dtype: float32, shape: [16]}
    output: {dtype: float32, shape: [8]}
    max_batch: 32
    profile: {batch: [1, 4, 8, 16, 32], latency_ms: [14, 38, 70, 134, 262]}
    profiles:
      a10: {batch: [1, 4, 8, 16, 32], latency_ms: [9, 21, 37, 68, 131]}
      a100: {batch: [1, 4, 8, 16, 32], latency_ms: [5, 8, 12, 20, 36]}
  - name: classifier
    input: {dtype: float32, shape: [16]}
    output: {dtype: float32, shape: [4]}
    max_batch: 64
    profile: {batch: [1, 8, 16, 32, 64], latency_ms: [6, 15, 27, 51, 99]}
    profiles:
      a10: {batch: [1, 8, 16, 32, 64], latency_ms: [4, 9, 15, 27, 51]}
      a100: {batch: [1, 8, 16, 32, 64], latency_ms: [2, 4, 6, 10, 18]}
pipelines:
  - name: traffic
    slo_ms: 300
    stages:
      - {name: detect, model: detector}
      - {name: classify, model: classifier, after: [detect], fanout: 2}
)";
  const char* padded = R"(nodes:
  - {name: n, address: tcp://127.0.0.1:0, roles: [controller, frontend, worker], devices: [{kind: emulated, count: 2}]}
models:
  - {name: det, input: {dtype: float32, shape: [16]}, output: {dtype: float32, shape: [4]}, max_batch: 8,
     profile: {batch: [1, 8], latency_ms: [20, 24]}}
pipelines:
  - {name: traffic, slo_ms: 100, stages: [{name: detect, model: det}]}
)";
  struct run {
    const char* name;
    const char* yaml;
    double rate;
  };
  printf("%-14s %6s | %-8s %6s %10s %7s %5s %8s\n", "workload", "rate", "policy", "cost", "attainment", "p99 ms",
         "lost", "dummies");
  int kept = 0, runs = 0;
  for (auto [name, yaml, rate] :
       {run{"mixed 2-stage", mixed, 100}, run{"mixed 2-stage", mixed, 250}, run{"padded", padded, 55}}) {
    for (auto policy : {scheduler_policy::nexus, scheduler_policy::piccolo}) {
      auto text = std::string(yaml) +
                  "runtime: {beacon_ms: 500}\nscheduler: {policy: " + std::string(knob_name(policy)) +
                  ", epoch_s: 2, min_epoch_s: 1}\n";
      auto cfg = std::make_shared<cluster_config>(parse(text));
      auto cost = epoch_cost(*cfg, {rate * (1 + cfg->scheduler.headroom)}, policy);
      auto s = bench::trial(cfg, rate, 4, 8);
      bool ok = s.attainment >= 0.99 && s.lost == 0;
      kept += ok, ++runs;
      printf("%-14s %6.0f | %-8s %6.3f %9.2f%% %7.1f %5lu %8lu%s\n", name, rate, std::string(knob_name(policy)).c_str(),
             cost.cost, 100 * s.attainment, s.p99, (unsigned long)s.lost, (unsigned long)s.dummies,
             ok ? "" : "  (below 99% or lost)");
    }
  }
  // Partitioned clients (config/examples/graft.yaml on one node): Graft's plan against every
  // fragment alone (group_size 1: each fragment re-aligned by itself, GSLICE-style), served.
  const char* phones = R"(nodes:
  - {name: n, address: tcp://127.0.0.1:0, roles: [controller, frontend, worker],
     devices: [{kind: emulated, count: 4, shares: [0.2, 0.15, 0.1, 0.1, 0.1, 0.05, 0.05, 0.05, 0.05, 0.05, 0.05, 0.05]}]}
models:
  - name: resnet18
    input: {dtype: float32, shape: [3, 64, 64]}
    output: {dtype: float32, shape: [1000]}
    max_batch: 16
    share_exponent: 0.7
    layers:
      - {profile: {alpha_ms: 0.2, beta_ms: 0.3}}
      - {input: {dtype: float32, shape: [64, 16, 16]}, profile: {alpha_ms: 0.2, beta_ms: 0.3}}
      - {input: {dtype: float32, shape: [64, 16, 16]}, profile: {alpha_ms: 0.2, beta_ms: 0.4}}
      - {input: {dtype: float32, shape: [128, 8, 8]}, profile: {alpha_ms: 0.3, beta_ms: 3}}
      - {input: {dtype: float32, shape: [256, 4, 4]}, profile: {alpha_ms: 0.3, beta_ms: 3}}
      - {input: {dtype: float32, shape: [512, 2, 2]}, profile: {alpha_ms: 0.05, beta_ms: 1}}
pipelines:
  - {name: phones, slo_ms: 200, stages: [{name: rest, model: resnet18}]}
runtime: {beacon_ms: 500}
)";
  printf("\n%-14s %6s | %-14s %9s %10s %7s %5s\n", "workload", "rate", "plan", "GPU share", "attainment", "p99 ms",
         "lost");
  for (double rate : {200.0, 400.0})
    for (int group : {5, 1}) {
      auto cfg = std::make_shared<cluster_config>(
          parse(std::string(phones) + "scheduler: {policy: graft, epoch_s: 2, min_epoch_s: 1, graft: {group_size: " +
                std::to_string(group) + "}}\n"));
      // The fragments the frontend will count: four start layers and SLOs, four clients each.
      std::vector<mix_entry> mix;
      std::vector<sched::fragment_share> shares;
      for (auto [start, slo] : {std::pair{0, 200.0}, {1, 150.0}, {2, 150.0}, {4, 100.0}}) {
        mix_entry e{"phones", 1, slo, cfg->models[0].layers[static_cast<size_t>(start)].input};
        e.start_layer = static_cast<uint32_t>(start);
        e.declare_slo = true;
        e.clients = 4;
        mix.push_back(e);
        shares.push_back({start, slo, 0.25, 4});
      }
      auto in = planning_input(*cfg, cfg->models);
      in.rates = {rate * (1 + cfg->scheduler.headroom)};
      in.fragments = {shares};
      auto planned = sched::plan_scaled_epoch(in, nullptr);
      double gpu = planned ? planned->result.resources : -1;
      auto s = bench::trial(cfg, rate, 4, 8, arrival_kind::poisson, false, mix);
      bool ok = s.attainment >= 0.99 && s.lost == 0;
      kept += ok, ++runs;
      printf("%-14s %6.0f | %-14s %9.2f %9.2f%% %7.1f %5lu%s\n", "partitioned", rate,
             group == 5 ? "graft" : "alone (gslice)", gpu, 100 * s.attainment, s.p99, (unsigned long)s.lost,
             ok ? "" : "  (below 99% or lost)");
    }
  printf("  %d of %d served plans kept >= 99%% attainment with nothing lost\n", kept, runs);
}

}  // namespace sloserve::planners_bench
