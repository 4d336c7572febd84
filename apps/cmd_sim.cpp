// `sloserve sim`: the data plane of a cluster file in simulated time.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>

#include "apps/commands.hpp"
#include "config/knob_option.hpp"
#include "gpu/executor.hpp"
#include "loadgen/arrivals.hpp"
#include "pipelines/write_file.hpp"
#include "scheduling/policies/registry.hpp"
#include "sim/simulator.hpp"

namespace sloserve {

namespace {

struct sim_opts {
  std::string config, json, trace;
  std::vector<std::string> failures, tenants;
  std::string slowdown;
  sim::options so;
};

// What a run measured: the load summary, the simulation's own figures, and with --json the file
// (the exit status: 1 when it cannot be written).
int report_sim(const sim_opts& o, const cluster_config& cfg, const sim::result& ran, double wall_s) {
  std::cout << ran.summary.to_text();
  std::printf("simulated %zu devices, %lu events, %zu plans (at most %zu devices used) in %.2f s\n", ran.devices,
              static_cast<unsigned long>(ran.events), ran.plans, ran.peak_devices_used, wall_s);
  bool accuracies = std::any_of(cfg.models.begin(), cfg.models.end(), [](auto& m) { return m.accuracy; });
  if (accuracies)
    std::printf("accuracy served %.2f%% (mean over OK replies of their stages' product)\n", 100 * ran.accuracy);
  for (auto& r : ran.refreshes) std::printf("profile refreshed: %s\n", r.c_str());
  // Per pipeline where several were sent, and per tenant.
  double measured_s = ran.described.duration_s > 0 ? ran.described.duration_s : 1;
  auto outcome = [&](const char* what, const std::string& name, const sim::result::pipeline_outcome& x) {
    std::printf("%s %s: %lu sent, %.1f/s within the SLO (%.2f%%), %lu shed\n", what, name.c_str(),
                static_cast<unsigned long>(x.sent), static_cast<double>(x.within_slo) / measured_s,
                x.sent ? 100.0 * static_cast<double>(x.within_slo) / static_cast<double>(x.sent) : 0.0,
                static_cast<unsigned long>(x.shed));
  };
  size_t sent_to = std::count_if(ran.pipelines.begin(), ran.pipelines.end(), [](auto& x) { return x.second.sent > 0; });
  if (sent_to > 1)
    for (auto& [name, x] : ran.pipelines)
      if (x.sent > 0) outcome("pipeline", name, x);
  for (auto& [name, t] : ran.tenants) outcome("tenant", name, t);
  if (cfg.scheduler.cost_budget > 0)
    std::printf("budget: %.4g of %.4g spent (%.1f%%)\n", ran.budget_spent, cfg.scheduler.cost_budget,
                100 * ran.budget_spent / cfg.scheduler.cost_budget);
  if (cfg.scaler.enabled())
    std::printf("scaler %s: %.0f instance-s, %.0f core-s, %lu resizes in place, %lu instances started or stopped\n",
                std::string(knob_name(cfg.scaler.policy)).c_str(), ran.scaling.instance_seconds,
                ran.scaling.core_seconds, static_cast<unsigned long>(ran.scaling.vertical_changes),
                static_cast<unsigned long>(ran.scaling.horizontal_changes));
  if (!o.json.empty()) {
    auto j = ran.summary.to_json(ran.described);
    j["simulated"] = {{"devices", ran.devices},
                      {"events", ran.events},
                      {"plans", ran.plans},
                      {"peak_devices_used", ran.peak_devices_used},
                      {"wall_s", wall_s}};
    if (accuracies) j["simulated"]["accuracy"] = ran.accuracy;
    if (cfg.scheduler.cost_budget > 0) j["simulated"]["budget_spent"] = ran.budget_spent;
    if (!ran.refreshes.empty()) j["simulated"]["profile_refreshes"] = ran.refreshes;
    for (auto& [name, t] : ran.tenants)
      j["simulated"]["tenants"][name] = {{"sent", t.sent}, {"within_slo", t.within_slo}, {"shed", t.shed}};
    for (auto& [name, x] : ran.pipelines)
      if (x.sent > 0)
        j["simulated"]["pipelines"][name] = {{"sent", x.sent}, {"within_slo", x.within_slo}, {"shed", x.shed}};
    if (cfg.scaler.enabled())
      j["simulated"]["scaler"] = {{"instance_seconds", ran.scaling.instance_seconds},
                                  {"core_seconds", ran.scaling.core_seconds},
                                  {"vertical_changes", ran.scaling.vertical_changes},
                                  {"horizontal_changes", ran.scaling.horizontal_changes}};
    if (auto written = write_file(o.json, j.dump(2) + "\n"); !written) {
      std::cerr << "sloserve sim: " << written.error() << "\n";
      return 1;
    }
  }
  return 0;
}

int run_sim(sim_opts& o, bool duration_given) {
  auto cfg = load_config_or_report(o.config);
  if (!cfg) return 2;
  auto& so = o.so;
  if (sched::policy_of(cfg->scheduler).rounds(*cfg)) {
    std::cerr << o.config << ": sloserve sim does not simulate clients and their uplinks, on which scheduler policy "
              << cfg->scheduler.name()
              << " places in rounds of its own; serve it and load it with sloserve load --clients\n";
    return 2;
  }
  if (!o.slowdown.empty()) {
    auto slow = parse_slowdown(o.slowdown);
    if (!slow) {
      std::cerr << "--slowdown '" << o.slowdown << "': expected AFTER_S:FACTOR (FACTOR > 0)\n";
      return 2;
    }
    so.slowdown_after_s = slow->first;
    so.slowdown_factor = slow->second;
  }
  for (auto& t : o.tenants) {
    auto parsed = sim::parse_tenant(t);
    if (!parsed) {
      std::cerr << "--tenant " << parsed.error() << "\n";
      return 2;
    }
    so.tenants.push_back(*parsed);
  }
  for (auto& f : o.failures) {
    auto parsed = sim::parse_failure(f);
    if (!parsed) {
      std::cerr << "--fail " << parsed.error() << "\n";
      return 2;
    }
    so.failures.push_back(*parsed);
  }
  if (!o.trace.empty()) {
    auto got = read_rate_trace(o.trace);
    if (!got) {
      std::cerr << got.error() << "\n";
      return 2;
    }
    so.trace = std::move(*got);
    if (!duration_given) so.duration_s = static_cast<double>(so.trace.size());
  }
  auto t0 = std::chrono::steady_clock::now();
  auto ran = sim::simulate(*cfg, so);
  double wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!ran) {
    std::cerr << "sloserve sim: " << ran.error() << "\n";
    return 2;
  }
  return report_sim(o, *cfg, *ran, wall_s);
}

}  // namespace

void add_sim_command(CLI::App& app, int& rc) {
  auto o = std::make_shared<sim_opts>();
  auto& so = o->so;
  so.warmup_s = 0;
  auto* cmd = app.add_subcommand(
      "sim", "Simulate the cluster file's data plane under load, in simulated time; prints what `load` prints");
  cmd->add_option("-c,--config", o->config, "cluster file")->required();
  cmd->add_option("--pipeline", so.pipelines,
                  "pipeline name (repeat: the rate is split evenly among the names given, a name given twice twice its "
                  "share; none: every pipeline)");
  cmd->add_option("--rate", so.rate, "queries/s in all (open loop)")->capture_default_str();
  auto* duration =
      cmd->add_option("--duration", so.duration_s, "seconds of measured load (with --trace: the whole trace)")
          ->capture_default_str();
  cmd->add_option("--trace", o->trace, "file of per-second rates, one per line (replaces --rate)");
  add_knob_option(cmd, "--arrival", so.arrival, "arrival process");
  cmd->add_option("--cv", so.cv, "gamma arrivals: coefficient of variation of the gaps")->capture_default_str();
  cmd->add_option("--warmup", so.warmup_s, "seconds sent before the measured window")->capture_default_str();
  cmd->add_option("--seed", so.seed, "random seed of arrivals, jitter and the network")->capture_default_str();
  cmd->add_option("--network-ms", so.network_ms, "one-way delay between two nodes, and client to frontend")
      ->capture_default_str();
  cmd->add_option("--network-jitter", so.network_jitter, "the delay is scaled by a factor in [1 - this, 1 + this]")
      ->capture_default_str();
  cmd->add_option("--uplink-ms", so.uplink_ms,
                  "each request's upload from its client, drawn uniformly from these values (ms; repeat or "
                  "comma-separate)")
      ->delimiter(',');
  cmd->add_option("--batch-overhead-ms", so.batch_overhead_ms, "what a device spends on each batch besides l(b)")
      ->capture_default_str();
  cmd->add_option("--tenant", o->tenants,
                  "TENANT[:SHARE]: the traffic is sent by these tenants (security.tenants), each query drawn by "
                  "their shares (1 when not given)");
  cmd->add_option("--fail", o->failures, "NODE@S or NODE@S-S: a worker node stops at S seconds (and returns)");
  cmd->add_option("--slowdown", o->slowdown,
                  "AFTER_S:FACTOR: every device runs its batches FACTOR times its profile from AFTER_S seconds");
  cmd->add_option("--json", o->json, "write the summary (and per-second series) here, as `load --json` does");
  cmd->callback([o, duration, &rc] { rc = run_sim(*o, duration->count() > 0); });
}

}  // namespace sloserve
