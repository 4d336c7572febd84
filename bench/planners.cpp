// bench/planners: the planners side by side on one set of workloads, by what their plans cost.
//
//   build/bench/bench_planners [workloads=48]
//   build/bench/bench_planners served|scale   (that section alone)
//
// Workloads: chains of 1-3 stages, each stage its own model with a linear profile per device
// type, rates of 50-1,000 queries/s and SLOs of 1.5-5x the fastest path. Half run on one device
// type (price 1), half on a mixed fleet of three (t4 0.53, a10 1.01, a100 3.67; per model the
// types' speeds vary). For each:
//   piccolo          scheduling/piccolo plan_app (sloserve plan --policy piccolo)
//   nexus            plan_epoch with the Nexus planner (DP split, squishy bin packing), every
//                    device planned with `profile` (the slowest type's), each priced by its type
//   batch-oblivious  plan_epoch with the batch-oblivious planner
//   two-config       Piccolo's split, then per stage one configuration for whole machines and
//                    one for the residual, round-robin worst cases (the paper's alternatives)
//   brute force      every set of machines per stage and every split on a grid of 60 (the
//                    optimum, up to the grid)
// Cost is the sum of price x occupied fraction. Then planning time: Piccolo on 1,000 sessions
// (one-stage pipelines) over 200 devices of three types, beside plan_epoch on the same; and
// Piccolo against brute force as stages and rates grow. Last, partitioned DNNs: Graft's
// merging, grouping and re-alignment against GSLICE-style per-fragment shares, for 10 to 100
// clients of one 12-layer DNN (GPU share x instances). And served: nexus and piccolo plans of
// a mixed fleet and of a padded set, each served by an in-process emulated node under Poisson
// load at the rate planned for (attainment, lost, dummies).

#include "bench/planners.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "bench/harness.hpp"
#include "scheduling/epoch.hpp"
#include "scheduling/placement.hpp"
#include "scheduling/policies/graft/config.hpp"
#include "scheduling/policies/graft/fragments.hpp"
#include "scheduling/policies/piccolo/configurations.hpp"
#include "scheduling/policies/piccolo/epoch.hpp"
#include "scheduling/policies/registry.hpp"

using namespace sloserve;
using namespace sloserve::planners_bench;

namespace sloserve::planners_bench {

cluster_config parse(const std::string& yaml) {
  auto r = parse_cluster_config(yaml, "bench-planners.yaml");
  if (!r) {
    fprintf(stderr, "%s\n%s", r.error_text().c_str(), yaml.c_str());
    std::exit(1);
  }
  return std::move(*r.config);
}

priced epoch_cost(const cluster_config& cfg, const std::vector<double>& rates, scheduler_policy policy) {
  auto in = planning_input(cfg, cfg.models);
  in.rates = rates;
  in.policy = &sched::policy_of(policy);
  auto res = sched::plan_epoch(in);
  priced out;
  if (!res || !res->placement.infeasible.empty()) return out;
  double dearest = 1;
  for (auto& s : in.slots) dearest = std::max(dearest, s.price);
  out.cost = 0;
  for (size_t k = 0; k < res->placement.devices.size(); ++k) {
    double price = res->slot_of[k] >= 0 ? in.slots[static_cast<size_t>(res->slot_of[k])].price : dearest;
    out.cost += price * std::min(1.0, res->placement.devices[k].occupancy);
  }
  out.devices = res->placement.devices.size();
  out.missing = res->devices_missing;
  return out;
}

}  // namespace sloserve::planners_bench

namespace {

struct type_spec {
  const char* name;
  double price, slowdown;  // l(b) relative to the a10's
};
const type_spec mixed_types[] = {{"t4", 0.53, 2.0}, {"a10", 1.01, 1.0}, {"a100", 3.67, 0.35}};

struct workload {
  std::string yaml;
  bool mixed = false;
  int stages = 1;
  double rate = 0, slo_ms = 0;
};

// The nodes: a controller, and `per_type_devices` workers of each type (mixed) or three times
// as many untyped.
std::string fleet_yaml(bool mixed, int per_type_devices) {
  std::ostringstream y;
  int port = 7600;
  if (mixed) {
    y << "device_types:\n";
    for (auto& t : mixed_types) y << "  - {name: " << t.name << ", price: " << t.price << "}\n";
  }
  y << "nodes:\n  - {name: ctl, address: tcp://127.0.0.1:" << port++ << ", roles: [controller, frontend]}\n";
  if (mixed) {
    for (auto& t : mixed_types)
      y << "  - {name: w" << t.name << ", address: tcp://127.0.0.1:" << port++
        << ", roles: [worker], devices: [{kind: emulated, count: " << per_type_devices << ", type: " << t.name
        << "}]}\n";
  } else {
    y << "  - {name: w, address: tcp://127.0.0.1:" << port++
      << ", roles: [worker], devices: [{kind: emulated, count: " << 3 * per_type_devices << "}]}\n";
  }
  return y.str();
}

// A model whose a10 profile is l(b) = alpha b + beta ms; on a mixed fleet each type's speed is
// drawn around its slowdown, and `profile` is the slowest type's.
std::string model_yaml(const std::string& name, double alpha, double beta, bool mixed, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> u(0.7, 1.3);
  std::ostringstream y;
  y << "  - {name: " << name << ", input: {dtype: float32, shape: [4]}, output: {dtype: float32, shape: [2]}, "
    << "max_batch: 32, ";
  if (!mixed) {
    y << "profile: {alpha_ms: " << alpha << ", beta_ms: " << beta << "}}\n";
    return y.str();
  }
  std::vector<double> slow;
  for (auto& t : mixed_types) slow.push_back(t.slowdown * u(rng));
  double worst = *std::max_element(slow.begin(), slow.end());
  y << "profile: {alpha_ms: " << alpha * worst << ", beta_ms: " << beta * worst << "}, profiles: {";
  for (size_t k = 0; k < slow.size(); ++k)
    y << (k ? ", " : "") << mixed_types[k].name << ": {alpha_ms: " << alpha * slow[k] << ", beta_ms: " << beta * slow[k]
      << "}";
  y << "}}\n";
  return y.str();
}

// A chain of `stages` models (a10: l(b) = alpha b + beta ms, drawn from `rng`) on a fleet, one
// pipeline `p` whose SLO `slo_ms` makes of the fastest path (batch 1 on the slowest type).
std::string chain_yaml(int stages, bool mixed, int per_type_devices, std::mt19937_64& rng,
                       const std::function<double(double)>& slo_ms) {
  std::uniform_real_distribution<double> u(0, 1);
  std::ostringstream models, chain;
  double fastest = 0;
  for (int s = 0; s < stages; ++s) {
    double alpha = 0.5 + 3 * u(rng), beta = 2 + 10 * u(rng);
    models << model_yaml("m" + std::to_string(s), alpha, beta, mixed, rng);
    chain << (s ? ", " : "") << "{name: s" << s << ", model: m" << s
          << (s ? ", after: [s" + std::to_string(s - 1) + "]" : "") << "}";
    fastest += (alpha + beta) * (mixed ? 2.6 : 1);
  }
  double slo = slo_ms(fastest);
  return fleet_yaml(mixed, per_type_devices) + "models:\n" + models.str() +
         "pipelines:\n  - {name: p, slo_ms: " + std::to_string(slo) + ", stages: [" + chain.str() + "]}\n";
}

std::vector<workload> workloads(int count) {
  std::mt19937_64 rng(1001);
  std::uniform_real_distribution<double> u(0, 1);
  std::vector<workload> out;
  for (int w = 0; w < count; ++w) {
    workload x;
    x.mixed = w % 2 == 1;
    x.stages = 1 + (w / 2) % 3;
    x.rate = std::round(50 * std::pow(20.0, u(rng)));  // 50 - 1,000
    x.yaml = chain_yaml(x.stages, x.mixed, 16, rng,
                        [&](double fastest) { return x.slo_ms = std::round(fastest * (1.5 + 3.5 * u(rng))); });
    out.push_back(std::move(x));
  }
  return out;
}

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

void compare(int count) {
  printf("%-5s %6s %6s %7s | %8s %8s %8s %8s %8s | %s\n", "fleet", "stages", "rate", "SLO", "piccolo", "nexus",
         "b-obliv", "two-cfg", "brute", "piccolo ms");
  struct tally {
    double sum = 0, max = 0;
    int n = 0;
    void add(double extra) { sum += extra, max = std::max(max, extra), ++n; }
  };
  tally nexus_extra, oblivious_extra, two_extra, brute_gap;
  int at_most_nexus = 0, below_nexus_mixed = 0, mixed = 0, compared = 0;
  for (auto& w : workloads(count)) {
    auto cfg = parse(w.yaml);
    auto app = sched::piccolo_app(cfg, cfg.pipelines[0], w.rate);
    auto t0 = std::chrono::steady_clock::now();
    auto pc = sched::piccolo::plan_app(app);
    double pc_ms = ms_since(t0);
    auto nx = epoch_cost(cfg, {w.rate}, scheduler_policy::nexus);
    auto bo = epoch_cost(cfg, {w.rate}, scheduler_policy::batch_oblivious);
    double two = std::numeric_limits<double>::infinity();
    if (auto split = sched::piccolo::split_latency(app); split.feasible) {
      two = 0;
      for (size_t m = 0; m < app.modules.size(); ++m) {
        auto p = sched::piccolo::two_config_plan(sched::piccolo::by_ratio(app.modules[m].configs), app.modules[m].rate,
                                                 split.budget_s[m]);
        two += p.feasible ? p.cost : std::numeric_limits<double>::infinity();
      }
    }
    double brute =
        w.rate <= 400 ? sched::piccolo::brute_force_chain(app, 60) : std::numeric_limits<double>::quiet_NaN();
    printf("%-5s %6d %6.0f %7.0f | %8.3f %8.3f %8.3f %8.3f %8.3f | %.2f\n", w.mixed ? "mixed" : "one", w.stages, w.rate,
           w.slo_ms, pc.feasible ? pc.cost : NAN, nx.cost, bo.cost, two, brute, pc_ms);
    if (!pc.feasible) continue;
    ++compared;
    auto extra = [&](double c) { return c / pc.cost - 1; };
    if (std::isfinite(nx.cost)) nexus_extra.add(extra(nx.cost));
    if (std::isfinite(bo.cost)) oblivious_extra.add(extra(bo.cost));
    if (std::isfinite(two)) two_extra.add(extra(two));
    if (std::isfinite(brute)) brute_gap.add(extra(brute) < 0 ? -extra(brute) : 0);
    at_most_nexus += pc.cost <= nx.cost * (1 + 1e-9);
    mixed += w.mixed;
    below_nexus_mixed += w.mixed && pc.cost < nx.cost;
  }
  auto line = [](const char* what, const tally& t) {
    printf("  %-16s extra cost over piccolo: mean %5.1f%%, max %6.1f%% (%d workloads)\n", what,
           100 * t.sum / std::max(1, t.n), 100 * t.max, t.n);
  };
  printf("\n");
  line("nexus", nexus_extra);
  line("batch-oblivious", oblivious_extra);
  line("two-config", two_extra);
  printf("  piccolo above the brute-force optimum: mean %.2f%%, max %.2f%% (%d workloads of rate <= 400)\n",
         100 * brute_gap.sum / std::max(1, brute_gap.n), 100 * brute_gap.max, brute_gap.n);
  printf("  piccolo's cost <= nexus's on %d of %d workloads; lower on %d of %d mixed fleets\n", at_most_nexus, compared,
         below_nexus_mixed, mixed);
}

// 1,000 one-stage pipelines (sessions) of 50 models on 200 devices of three types, and their
// rates. `shares`: each device split into that many equal instances (Piccolo gives every session
// machines of its own, so 1,000 sessions need at least 1,000 instances).
std::string at_scale_yaml(int shares, std::vector<double>& rates) {
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> u(0, 1);
  std::ostringstream y;
  y << "device_types:\n";
  for (auto& t : mixed_types) y << "  - {name: " << t.name << ", price: " << t.price << "}\n";
  y << "nodes:\n  - {name: ctl, address: tcp://127.0.0.1:7700, roles: [controller, frontend]}\n";
  int counts[] = {100, 70, 30}, port = 7701;
  for (int k = 0; k < 3; ++k) {
    y << "  - {name: w" << k << ", address: tcp://127.0.0.1:" << port++
      << ", roles: [worker], devices: [{kind: emulated, count: " << counts[k] << ", type: " << mixed_types[k].name;
    for (int i = 0; shares > 1 && i < shares; ++i) y << (i ? ", " : ", shares: [") << 1.0 / shares;
    y << (shares > 1 ? "]" : "") << "}]}\n";
  }
  y << "models:\n";
  for (int m = 0; m < 50; ++m) {
    auto model = model_yaml("m" + std::to_string(m), 0.5 + 3 * u(rng), 2 + 10 * u(rng), true, rng);
    // A small batch leaves most of a GPU idle: a share slows it by less than in proportion.
    if (shares > 1) model.replace(model.find("max_batch"), 0, "share_exponent: 0.5, ");
    y << model;
  }
  y << "pipelines:\n";
  rates.clear();
  for (int p = 0; p < 1000; ++p) {
    y << "  - {name: p" << p << ", slo_ms: " << 100 + 50 * (p % 9) << ", stages: [{name: s, model: m" << p % 50
      << "}]}\n";
    rates.push_back(std::round(2 + 20 * u(rng)));
  }
  return y.str();
}

// 1,000 one-stage pipelines (sessions) of 50 models on 200 devices of three types: the epoch a
// cluster with `scheduler.policy: piccolo` plans (every pipeline's sets, then machines bound to
// slots of their types), on the devices whole and split into shares (the models slowed by
// share^-0.5 there); beside Nexus's.
void at_scale() {
  std::vector<double> rates;
  auto whole = parse(at_scale_yaml(1, rates));
  auto split = parse(at_scale_yaml(5, rates));
  auto finer = parse(at_scale_yaml(10, rates));
  printf("\nat scale: 1000 sessions on 200 devices of 3 types (target < 100 ms):\n");
  for (auto [name, cfg, policy] : {std::tuple{"piccolo, whole devices", &whole, scheduler_policy::piccolo},
                                   std::tuple{"piccolo, 5 x 0.2 shares", &split, scheduler_policy::piccolo},
                                   std::tuple{"piccolo, 10 x 0.1 shares", &finer, scheduler_policy::piccolo},
                                   std::tuple{"nexus, whole devices", &whole, scheduler_policy::nexus}}) {
    auto t0 = std::chrono::steady_clock::now();
    auto c = epoch_cost(*cfg, rates, policy);
    printf("  %-24s plan_epoch %7.1f ms: cost %7.2f, %4zu devices (instances), %4zu without a slot\n", name,
           ms_since(t0), c.cost, c.devices, c.missing);
  }
}

// Piccolo against brute force as a chain's stages and rate grow.
void against_brute_force() {
  printf("\npiccolo against brute force (grid 60), mixed fleet:\n");
  for (auto [stages, rate] : {std::pair{1, 100.0}, {2, 100.0}, {3, 100.0}, {3, 300.0}, {4, 300.0}, {3, 1000.0}}) {
    std::mt19937_64 rng(static_cast<uint64_t>(stages * 1000 + rate));
    auto cfg = parse(chain_yaml(stages, true, 64, rng, [](double fastest) { return std::round(fastest * 3); }));
    auto app = sched::piccolo_app(cfg, cfg.pipelines[0], rate);
    auto t0 = std::chrono::steady_clock::now();
    auto pc = sched::piccolo::plan_app(app);
    double pc_ms = ms_since(t0);
    t0 = std::chrono::steady_clock::now();
    double brute = sched::piccolo::brute_force_chain(app, 60);
    double brute_ms = ms_since(t0);
    printf("  %d stages at %6.0f req/s: piccolo %.3f in %8.2f ms, brute force %.3f in %10.1f ms: %7.0fx faster\n",
           stages, rate, pc.cost, pc_ms, brute, brute_ms, brute_ms / std::max(pc_ms, 1e-3));
  }
}

// Clients of one 12-layer DNN split where their uplinks put them, each with its rate and time
// left: Graft against every fragment running its rest alone.
void partitioned() {
  printf("\npartitioned DNNs (12 layers; l = (beta + alpha b) / share per layer), GPU share x instances:\n");
  for (int clients : {10, 20, 50, 100}) {
    std::mt19937_64 rng(static_cast<uint64_t>(clients));
    std::uniform_real_distribution<double> u(0, 1);
    std::vector<double> alpha, beta;
    for (int i = 0; i < 12; ++i) alpha.push_back(0.0001 + 0.0004 * u(rng)), beta.push_back(0.0005 + 0.001 * u(rng));
    sched::graft::model m;
    m.layers = 12;
    m.latency_s = [alpha, beta](int a, int b, int batch, double share) {
      double l = 0;
      for (int i = a; i < b; ++i) l += (beta[static_cast<size_t>(i)] + alpha[static_cast<size_t>(i)] * batch) / share;
      return l;
    };
    std::vector<sched::graft::fragment> f;
    for (int c = 0; c < clients; ++c) {
      // Uplinks cluster the split points early or late (as Neurosurgeon's choices do).
      int p = u(rng) < 0.6 ? static_cast<int>(u(rng) * 4) : 6 + static_cast<int>(u(rng) * 5);
      f.push_back({p, std::round(100 + 150 * u(rng)) / 1e3, std::round(5 + 25 * u(rng))});
    }
    auto t0 = std::chrono::steady_clock::now();
    std::vector<sched::graft::fragment> merged;
    auto graft = sched::graft::plan_graft(m, f, &merged, 5, 0.2, {}, sched::graft::options{}.refine);
    double graft_ms = ms_since(t0);
    auto paper = sched::graft::plan_graft(m, f);
    auto gslice = sched::graft::gslice_plan(m, f);
    auto gslice_merged = sched::graft::gslice_plan(m, sched::graft::merge_fragments(m, f, -1));
    printf(
        "  %3d clients: graft %.2f (%zu fragments after merging, %.0f ms; the paper's grouping alone %.2f), gslice "
        "%.2f, gslice+merging %.2f: %.1f%% / %.1f%% less\n",
        clients, graft.resources, merged.size(), graft_ms, paper.resources, gslice.resources, gslice_merged.resources,
        100 * (1 - graft.resources / gslice.resources), 100 * (1 - graft.resources / gslice_merged.resources));
  }
}

}  // namespace

int main(int argc, char** argv) {
  bench::log_to_stderr();
  // One section alone: `served` or `scale`.
  if (argc > 1 && std::string(argv[1]) == "served") return planners_bench::served(), 0;
  if (argc > 1 && std::string(argv[1]) == "scale") return at_scale(), 0;
  if (argc > 1 && std::string(argv[1]) == "partitioned") return partitioned(), 0;
  int count = argc > 1 ? std::atoi(argv[1]) : 48;
  compare(count);
  at_scale();
  against_brute_force();
  partitioned();
  planners_bench::served();
  return 0;
}
