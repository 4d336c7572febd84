#pragma once
// `sloserve sim`: a discrete-event simulator of the data plane. Frontends, balancers, per-device
// deadline queues with the configured drop policy, emulated latencies with jitter, network
// delays, fan-out, node failures, and the scheduler's epochs, all in simulated time on one
// thread. Policies, planning and placement are the cluster's own code (scheduling/); what is
// simulated is only the passage of time and the wire.

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "config/cluster_config.hpp"
#include "control/scaler_core.hpp"
#include "loadgen/tally.hpp"
#include "pipelines/expected.hpp"

namespace sloserve::sim {

// A worker node stops at `at_s` (its queued and running work is lost, as with kill -9) and,
// when `back_s` >= 0, returns with empty devices at `back_s`.
struct failure {
  std::string node;
  double at_s = 0;
  double back_s = -1;
};

// A tenant (security.tenants) that sends `share` of the traffic; the shares are relative.
struct tenant_traffic {
  std::string name;
  double share = 1;
};

struct options {
  std::vector<std::string>
      pipelines;  // the traffic, split evenly among them (a name twice: twice its share); empty: every pipeline
  // Which tenants send it, each query drawn by their shares; empty: no tenant. The frontend admits
  // them as a cluster's does (caps, the plan's quotas split by priority and weight, the share
  // and priority guards).
  std::vector<tenant_traffic> tenants;
  double rate = 100;          // queries/s in all
  std::vector<double> trace;  // per-second rates; replaces `rate` (and the duration)
  double duration_s = 10;     // measured
  double warmup_s = 2;        // sent first, not counted
  arrival_kind arrival = arrival_kind::poisson;
  double cv = 1;
  uint64_t seed = 1;
  double network_ms = 0.1;      // one way between two nodes (and between the client and the frontend)
  double network_jitter = 0.5;  // the delay is scaled by a factor in [1 - this, 1 + this]
  // Each request's upload from its client, drawn uniformly from these (ms): clients on networks
  // of every kind; the SLO counts it. Empty: none beyond network_ms.
  std::vector<double> uplink_ms;
  // What a device spends on each batch besides l(b): taking requests off its queue, timers,
  // replies. A multi-process cluster on one machine spends about this much.
  double batch_overhead_ms = 0.5;
  std::vector<failure> failures;
  // Every device runs each batch `slowdown_factor` times its profile from `slowdown_after_s`
  // (as SLOSERVE_EMULATED_SLOWDOWN makes emulated devices of a cluster do); 1: never.
  double slowdown_after_s = 0;
  double slowdown_factor = 1;
  // Called as each stage's invocation is first sent (a cascade's second model included): the
  // query's number in order of arrival (from 1), its pipeline, the model, and the invocation's
  // deadline in nanoseconds after the query's arrival at the frontend.
  std::function<void(uint64_t query, size_t pipeline, const std::string& model, int64_t deadline_ns)> on_invocation;
};

struct result {
  load_summary summary;
  load_options described;  // what `load` would have been told, for summary.to_json
  uint64_t events = 0;
  size_t plans = 0;              // scheduler epochs applied
  size_t devices = 0;            // in the cluster
  size_t peak_devices_used = 0;  // the most devices any applied plan used
  scaler_stats scaling;          // with a scaler: what its instances cost
  // Mean over measured OK replies of the product of accuracy/100 of the models that ran their
  // stages (a model that declares no accuracy counts as 1): the rate-weighted accuracy served.
  double accuracy = 0;
  double budget_spent = 0;  // `scheduler.cost_budget`: what the stages spent of it, by the profile
  // Profiles refreshed online (scheduler.profile_drift), in order: "MODEL xSCALE at Ts".
  std::vector<std::string> refreshes;
  // Per model, the batches its devices ran, by size (padding included; warm-up too).
  std::map<std::string, std::map<size_t, uint64_t>> batches;
  // Per pipeline, and per tenant sending, its measured queries, those answered OK within the SLO,
  // and those the frontend did not let in (OVERLOADED: a tenant's cap, a quota, a guard).
  struct pipeline_outcome {
    uint64_t sent = 0, within_slo = 0, shed = 0;
  };
  std::map<std::string, pipeline_outcome> pipelines;
  std::map<std::string, pipeline_outcome> tenants;
};

// Runs the simulation; fails on options that do not fit the cluster (unknown pipeline or node).
expected<result> simulate(const cluster_config& cfg, const options& o);

// "NAME" or "NAME:SHARE" (SHARE > 0).
expected<tenant_traffic> parse_tenant(const std::string& text);

// "NODE@AT_S" or "NODE@AT_S-BACK_S".
expected<failure> parse_failure(const std::string& text);

}  // namespace sloserve::sim
