#pragma once
// The cluster file: nodes, models, pipelines and runtime knobs, loaded and validated.

#include <algorithm>
#include <any>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "config/knobs.hpp"
#include "config/policy_config.hpp"
#include "pipelines/expected.hpp"
#include "pipelines/pipeline.hpp"

namespace sloserve {

// A kind of hardware the cluster pays for (`device_types: [{name, price}]`).
struct device_type {
  std::string name;
  double price = 1;  // per device, per unit of time (any currency): plans report cost in it
};

struct device_group {
  device_kind kind = device_kind::emulated;
  std::string type;  // a device_types name; empty: untyped (price 1, the model's `profile`)
  int count = 1;
  std::vector<std::string> models;  // models these devices serve; empty: every model
  double memory_mb = 0;             // per device; 0: not limited
  int threads = 1;                  // intra-op threads of each cpu device
  // Fractional devices (`shares`): each device of the group hosts one instance per share, each
  // with that fraction of the device (as MPS gives), summing to at most 1; empty: whole devices.
  // Every instance is a device of its own to schedules and routes.
  std::vector<double> shares;
  // `kind: switch`: one device stands for a chain of programmable switches that runs a NetNN
  // model (models[].netnn) in its data plane, each switch within these limits
  // (gpu/netnn/switch_chain.hpp): pipelines per switch, match-action stages per pipeline, register
  // and table memory per stage, operations a pipeline may spend on one packet, the feature
  // switch's flow table, and switches per layer.
  int pipelines = 4;
  int stages = 32;
  int register_kb_per_stage = 64;
  int table_kb_per_stage = 256;
  int ops_per_packet = 8192;
  int flow_slots = 4096;
  int tier_switches = 4;
  int instances() const { return count * std::max<int>(1, static_cast<int>(shares.size())); }
  double share_of(int i) const { return shares.empty() ? 1 : shares[static_cast<size_t>(i) % shares.size()]; }
};

struct node_spec {
  std::string name;
  std::string address;  // where other nodes and clients reach this node's ZeroMQ ROUTER
  // Where the ROUTER binds when that differs from `address` (behind NAT, a proxy or a relay);
  // empty: `address`.
  std::string bind;
  std::vector<role> roles;
  std::vector<device_group> devices;
  int cores = 0;  // cores the scaler may hand out on this node; 0: not limited
  // "HOST:PORT" of the KServe v2 HTTP ingress (frontends); empty: none. Port 0 is resolved by `up`.
  std::string http;
  // "HOST:PORT" of the KServe v2 gRPC ingress (frontends); empty: none. Port 0 is resolved by `up`.
  std::string grpc;
  // "HOST:PORT" where the node serves Prometheus /metrics on its own (nodes without http: workers,
  // controllers); empty: none. A node with http serves /metrics there as well.
  std::string metrics;

  bool has_role(role r) const;
  int device_count() const;
  // Models device `d` serves; empty: all.
  const std::vector<std::string>& device_models(int d) const;
  bool serves(int d, const std::string& model) const;
  const device_group* group_of(int d) const;
  double share_of(int d) const;  // of device (instance) d: 1 for a whole device
};

// Runtime knobs, named as the user writes them under `runtime:`.
struct runtime_options {
  int heartbeat_ms = 250;              // period of peer heartbeats
  int peer_timeout_ms = 1000;          // a peer silent this long is marked down
  int beacon_ms = 500;                 // load reports and re-registration
  long max_payload_bytes = 16L << 20;  // largest tensor payload a message may carry
  int max_queue_length = 4096;         // per device session; beyond it requests are OVERLOADED
  int reply_grace_ms = 250;            // frontend answers ERROR this long after a deadline passes
  int threads = 2;                     // CAF scheduler threads per node
  // How those threads wait for work: sharing (one queue; an idle thread sleeps until a message
  // comes) or stealing (a queue each; an idle thread polls, and sleeps only after ~35 ms idle).
  actor_scheduling_kind actor_scheduling = actor_scheduling_kind::sharing;
  drop_policy_kind drop_policy = drop_policy_kind::sliding_window;
  balancer_kind balancer = balancer_kind::p2c;
  long max_queued_mb = 1024;  // per node: payload bytes queued in its devices and frontend
  int zmq_hwm = 100000;       // ZeroMQ send and receive high-water marks between nodes (messages)
  // Per ZeroMQ client: replies queued for it (beyond, replies to a client that does not read are
  // dropped at the socket) and requests in flight at the frontend (beyond, OVERLOADED).
  int max_client_queued_replies = 10000;
  int max_client_in_flight = 10000;
  // A client whose requests all seem to take longer than this (or less than 0) to arrive has a
  // clock that differs from the frontend's: its send times then count only beyond that offset.
  double clock_tolerance_ms = 100;
  // Frontends probe each worker's link this often (0: never) with a pair of probes, one empty
  // and one of `link_probe_bytes`, and the planner keeps models whose requests would take too
  // long to cross a link off that worker.
  int link_probe_ms = 1000;
  long link_probe_bytes = 32768;
  // Frontends refuse, with the reason, invocations that would queue on a backed-up path to a
  // worker past a share of their budget (scheduling/transit_guard.hpp); false sends them all.
  bool path_guard = true;
  // The HTTP ingress: a request (headers and body) must arrive whole within this of being
  // awaited, or its connection is closed; one client address may hold at most this many
  // connections at once (0: no limit).
  int http_request_timeout_ms = 10000;
  int http_connections_per_address = 256;
  // Clients on the node's host may register shared-memory regions and pass tensors through them
  // (Triton's system shared-memory extension; ingress/shm_regions.hpp), at most
  // `shared_memory_regions` regions each.
  bool client_shared_memory = false;
  int shared_memory_regions = 64;
  // Each frontend's response cache (models[].response_cache, pipelines[].response_cache): MB of
  // outputs it keeps, the least recently used evicted first.
  long response_cache_mb = 64;
};

// A tenant (`security.tenants[]`): the clients that are it (CurveZMQ public keys, HTTP/gRPC bearer
// token files; without keys, a client names its tenant), the most it may send (queries/s across
// the cluster), and how it stands under overload: before tenants of lower priority, and beside
// those of its own by its weight.
struct tenant_spec {
  std::string name;
  std::vector<std::string> clients;  // Z85 text or .pub files
  std::vector<std::string> tokens;   // files each holding one bearer token
  std::optional<double> rate;        // the cap; none: no cap
  std::optional<double> weight;      // its share beside its priority's others; none: its rate, else 1
  int priority = 0;
  double share() const { return weight ? *weight : rate ? *rate : 1.0; }
  bool operator==(const tenant_spec&) const = default;
};

// CurveZMQ, named as the user writes them under `security:`. Off when `keys` is empty.
struct security_options {
  std::string keys;                  // directory: <node>.key of this node, <node>.pub of every node
  std::vector<std::string> clients;  // admitted client public keys: Z85 text or .pub files
  // The HTTP ingress: TLS certificate and key (PEM), and files each holding one bearer token a
  // client may present. Without all three, an http ingress stays on loopback.
  std::string tls_cert, tls_key;
  std::vector<std::string> tokens;
  std::vector<tenant_spec> tenants;
  bool enabled() const { return !keys.empty(); }
  const tenant_spec* find_tenant(std::string_view name) const {
    for (auto& t : tenants)
      if (t.name == name) return &t;
    return nullptr;
  }
  bool http_secured() const { return !tls_cert.empty() && !tls_key.empty() && !tokens.empty(); }
};

// The control plane, named as the user writes them under `scheduler:`.
struct scheduler_options {
  scheduler_policy policy = scheduler_policy::nexus;  // static: every device runs every model
  // A policy the program registered beside the built-in ones (sched::register_policy), as the
  // file names it; empty: `policy`'s.
  std::string policy_name;
  split_policy split = split_policy::dp;  // dp: the query analyzer
  double epoch_s = 30;                    // re-plan at least this often
  double min_epoch_s = 10;                // and never more often than this
  double rate_band_low = 0.8;             // re-plan early when a pipeline's rate leaves
  double rate_band_high = 1.1;            // [low, high] x the rate it was planned for
  double headroom = 0.1;                  // plan for measured rate x (1 + headroom)
  double peak_half_life_s = 300;          // plan for at least the recent peak, halved this often
  bool spares = true;                     // devices a plan leaves free stay loaded, routed as spares
  double profile_drift = 0.25;            // re-profile a model whose batches run this far off (0: never)
  int profile_drift_windows = 3;          // windows in a row off by that much before it does
  // MCDNN's budget (sched::budget_account): spend at most this (device-hours x price) over the
  // horizon, stages with variants stepping down as it drains; 0: no budget.
  double cost_budget = 0;
  double budget_horizon_s = 36000;
  int steps = 100;  // budget grid of the DP
  // The policy's own section (`scheduler: {policy: P, P: {...}}`) as the policy's config parsed
  // it (config/policy_config.hpp); empty where it has none, or the file was not read.
  std::any section;

  // The policy's name: a registered one's, else the built-in's.
  std::string_view name() const { return policy_name.empty() ? knob_name(policy) : std::string_view(policy_name); }
  // The policy's section as an S (its options struct): the file's, else S's defaults.
  template <class S>
  const S& section_as() const {
    static const S defaults{};
    auto* s = std::any_cast<S>(&section);
    return s ? *s : defaults;
  }
};

// Autoscaling, named as the user writes them under `scaler:`. With a policy other than none the
// scaler owns placement: every instance runs one model on one device slot of a worker, with
// `cores` intra-op threads, and the scheduler's epochs stop. `scheduler.policy: ipa` makes the
// scaler's policy ipa as well: IPA's choices are realised as the scaler's instances.
struct scaler_options {
  scaler_policy policy = scaler_policy::none;
  double vertical_s = 1;                             // period of the vertical loop (sponge, biscale)
  double horizontal_s = 10;                          // period of the horizontal loop (fa2, biscale)
  predictor_kind predictor = predictor_kind::trend;  // of the next window's largest rate
  int max_cores = 8;                                 // per instance
  int max_instances = 0;                             // in the cluster; 0: every device slot
  int max_total_cores = 0;                           // in the cluster; 0: not limited beyond nodes' cores
  double stable_band = 0.25;                         // biscale: load is stable when the last horizontal period's
                                                     // per-second rates stay within ±band of their mean
  bool per_request_budgets = true;                   // sponge, biscale: the EDF check takes each request's budget
                                                     // (false: the stage's mean budget, a baseline)
  bool central_queue = false;                        // fa2: each stage's planned batches go whole to its
                                                     // instances in turn, which wait for them (FA2's central queue)
  bool enabled() const { return policy != scaler_policy::none; }
};

struct cluster_config {
  std::string name = "sloserve";
  std::string file;  // where it was loaded from, for messages
  std::vector<device_type> device_types;
  std::vector<node_spec> nodes;
  std::vector<model_spec> models;
  // Every layer range [a, b) of every partitioned model but the whole, as a model named
  // "BASE[a,b)" (derive_fragments; find_model finds them).
  std::vector<model_spec> fragments;
  std::vector<pipeline> pipelines;
  runtime_options runtime;
  scheduler_options scheduler;
  scaler_options scaler;
  security_options security;

  const node_spec* find_node(std::string_view name) const;
  const model_spec* find_model(std::string_view name) const;
  const device_type* find_device_type(std::string_view name) const;
  // What a device of group `g` costs: its type's price, 1 untyped.
  double price_of(const device_group& g) const;
  const pipeline* find_pipeline(std::string_view name) const;
  const node_spec* controller() const;
  std::vector<const node_spec*> with_role(role r) const;
};

// Fills cfg.fragments from its partitioned models (the loader does).
void derive_fragments(cluster_config& cfg);

struct config_error {
  std::string file;
  int line = 0;    // 1-based; 0 when unknown
  int column = 0;  // 1-based
  std::string message;
  std::string to_string() const;  // "file:line:column: message"
};

struct config_result {
  std::optional<cluster_config> config;
  std::vector<config_error> errors;

  explicit operator bool() const { return config.has_value(); }
  std::string error_text() const;  // every error, one per line
};

// Every key the cluster file may hold, by section: "" is the top level, "nodes[].devices[]" the
// maps in a node's devices list. The parser refuses any other key; docs/configuration.md
// documents each of these. A policy's own section is `scheduler.NAME` (config/policy_config.hpp).
struct config_section {
  std::string_view path;
  std::vector<std::string_view> keys;
};
std::vector<config_section> config_keys();

config_result parse_cluster_config(std::string_view yaml, const std::string& file);
config_result load_cluster_config(const std::string& path);

// The configuration `sloserve run` uses when given no file (config/examples/default.yaml).
std::string_view default_config_yaml();
config_result default_config();

// Writes `cfg` back as YAML (used by `up` to hand resolved addresses to its nodes).
std::string to_yaml(const cluster_config& cfg);

// Checks "tcp://host:port" (port 0..65535) or "ipc://path"; an error says what is wrong.
status check_address(std::string_view address);
// "HOST:PORT" with a port of 0-65535 (0: `up` picks one).
status check_host_port(std::string_view address);

// Every role runs in one node; devices of all workers are pooled (what `sloserve run` does).
cluster_config single_node(const cluster_config& cfg);

}  // namespace sloserve
