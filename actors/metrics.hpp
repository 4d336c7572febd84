#pragma once
// What a node tells Prometheus: counters, gauges and histograms its actors update as they work,
// rendered in the text exposition format (version 0.0.4) at /metrics. Thread-safe: actors update
// from their threads and the HTTP server renders from its own. CAF-free; times are seconds on
// the caller's clock (the actors' steady clock), so that tests inject them.

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sloserve {

// Per-second buckets of the last `seconds` seconds: what was added at each second, summed over a
// window that ends now.
class sliding_sum {
 public:
  explicit sliding_sum(int seconds = 60) : slots_(static_cast<size_t>(seconds)) {}
  void add(double at_s, double value);
  // The sum over (now - window, now], whole seconds; window at most the ring's length.
  double sum(double now_s, int window) const;

 private:
  struct slot {
    int64_t second = -1;
    double value = 0;
  };
  std::vector<slot> slots_;
};

// Triton's statistics of one pipeline (what KServe calls a model) on a frontend: counts and total
// nanoseconds, since the node started.
// What an ingress asks of a node's statistics: those of the pipeline named, or (empty) of every
// pipeline of the cluster file, in the file's order.
struct pipeline_statistics;
using statistics_source = std::function<std::vector<pipeline_statistics>(std::string_view pipeline)>;

struct pipeline_statistics {
  struct duration {
    uint64_t count = 0;
    uint64_t ns = 0;
  };
  std::string name;
  uint64_t last_inference_ms = 0;  // wall clock, ms since the epoch, of the last request answered; 0: none
  uint64_t inference_count = 0;    // requests answered ok
  uint64_t execution_count = 0;    // the batches they ran in (each member of a batch of b counts 1/b)
  duration success, fail;          // requests answered ok / not, from arrival to reply
  duration queue, compute;         // of the ok ones: time in device queues, and running, over their stages
  duration cache_hit, cache_miss;  // response-cache lookups (pipelines[].response_cache) and their time
};

class node_metrics {
 public:
  // Upper bounds of the histograms' buckets (+Inf is implied).
  static const std::vector<double> latency_buckets;  // seconds
  static const std::vector<double> batch_buckets;    // requests
  static constexpr int attainment_window_s = 60;

  // The request and stage duration buckets: latency_buckets and, for each SLO (seconds), a bound
  // every 5% of it from half of it to 120%, and at 1.5 and 2 times it, so that
  // histogram_quantile near an SLO lands within a few percent of the true quantile. Before the
  // first request.
  void slo_buckets(const std::vector<double>& slos_s);
  static constexpr int busy_window_s = 10;

  // Frontend: a query answered `outcome` (ok, dropped, overloaded, error) `seconds` after it
  // arrived; `within_slo`: ok by its deadline.
  void request_done(const std::string& pipeline, std::string_view outcome, double seconds, bool within_slo,
                    double now_s);
  // Frontend: what a query answered `ok` (or not) spent: `total_ns` from arrival to reply, and
  // over its invocations the time queued and running, and `executions` (1/batch each).
  void request_statistics(const std::string& pipeline, bool ok, int64_t total_ns, int64_t queue_ns, int64_t compute_ns,
                          double executions, uint64_t wall_ms);
  // Frontend: a response-cache lookup for `of` (a pipeline's or a model's name; `pipeline` says
  // which) that found its outputs or not, taking `seconds` (with the insertion, for a miss of a
  // pipeline answered since); a pipeline's also go into its statistics (cache_hit, cache_miss; a
  // hit is a success too).
  void cache_lookup(const std::string& of, bool pipeline, bool hit, double seconds);
  // Frontend: its response cache's totals now.
  void cache_state(uint64_t insertions, uint64_t evictions, uint64_t too_large, uint64_t bytes, uint64_t entries);
  // Each pipeline's statistics (those that answered something), by name.
  std::vector<pipeline_statistics> statistics() const;
  // The statistics of `names`, in their order; zeros for one that answered nothing yet.
  std::vector<pipeline_statistics> statistics(const std::vector<std::string>& names) const;
  // Frontend: an invocation of version `version` of `model` (its file name) came back `outcome`
  // (ok, dropped, overloaded, error) after `queue_s` in its device's queue and `compute_s` running.
  void model_done(const std::string& model, int version, std::string_view outcome, double queue_s, double compute_s);
  // Frontend: one stage of a query, from sending its invocation to its result.
  void stage_done(const std::string& pipeline, const std::string& stage, double seconds);
  // A request this node refused or dropped for load or time (early drop, full queue, payload
  // budget, stale on arrival); each is counted on the node that dropped it.
  void dropped(std::string_view reason);
  // Frontend: a request of tenant `tenant` (security.tenants) admitted, or refused over its cap
  // (capped) or for its share under overload (shed).
  void tenant_request(std::string_view tenant, std::string_view outcome);
  // Device: requests queued for `model` on `device` ("node/index").
  void queue_length(const std::string& model, const std::string& device, size_t n);
  // Device: a batch of `size` requests of `model` ran.
  void batch(const std::string& model, int size);
  // Device: `device` ran batches from `from_s` to `to_s`.
  void busy(const std::string& device, double from_s, double to_s);
  // Device: the memory each model it now serves takes on it (bytes), and what it has (0: not
  // limited), in place of what it reported before.
  void device_memory(const std::string& device, std::map<std::string, double> by_model, double limit_bytes);
  // Controller: the placement now served.
  void placement(size_t devices, const std::map<std::string, size_t>& instances);
  // Ingress: a reply of `protocol` (http, grpc) with status `code` (an HTTP status, a gRPC code
  // name), refusals of bad requests included.
  void ingress_reply(std::string_view protocol, std::string_view code);
  // Frontend: queries in flight now.
  void in_flight(size_t n);
  // Frontend: what its probes found of the link to `worker` (ms per MB a request adds, and the
  // round trip of an empty probe in ms).
  void link(const std::string& worker, double ms_per_mb, double base_ms);
  // Frontend: the quantile of its clients' uplink dips that `pipeline`'s uploads are timed at
  // (the policy's client tracking, scheduling_policy::clients: its uplink quantile, moved by its
  // miss target), the share of the wait behind a running batch that its lifts onto spare compute
  // plan for, and the share of scheduler.jellyfish.headroom its plan keeps.
  void uplink_quantile(const std::string& pipeline, double q, double wait_share, double headroom_share);

  // Counters of what the network and clients did to the node, each with at most one label.
  enum class event {
    rejected_frame,  // label reason: too_large, malformed, invalid, payload_too_large, not_a_node, handshake
    peer_down,       // label peer: a node this one stopped hearing
    rerouted,        // an invocation sent again because its node went down
    reply_dropped,   // label why: client_gone, client_not_reading
    dummy,           // label outcome: sent, ok, dropped, overloaded, error (padding requests)
    forwarded,       // label way: sent (to a model's dispatcher), placed (for another frontend), failed
    http_refused,    // label why: connections_per_address, connections, request_timeout, too_large, bad_request,
                     // tls_handshake
    shared_memory,   // label what: registered, unregistered, swept, refused, read, written
  };
  void count(event e, std::string_view label = {});

  // Everything, for node `node`, at `now_s` (the sliding windows end there).
  std::string render(std::string_view node, double now_s) const;

 private:
  // The parts of render(), under the lock: what frontends count of requests, their gauges, the
  // devices' families, and the events' and the placement's.
  void render_requests(std::string& out) const;
  void render_gauges(std::string& out, double now_s) const;
  void render_devices(std::string& out, double now_s) const;
  void render_events(std::string& out) const;
  void render_cache(std::string& out) const;

  std::vector<double> duration_buckets_ = latency_buckets;
  struct histogram {
    const std::vector<double>* bounds = nullptr;
    std::vector<uint64_t> counts;  // per bound, not cumulative; the last is +Inf
    double sum = 0;
    uint64_t count = 0;
    void observe(double v);
  };
  struct attainment {
    sliding_sum within{attainment_window_s}, total{attainment_window_s};
  };
  struct busy_time {
    sliding_sum seconds{busy_window_s};
    double first_s = -1;  // when the device first ran a batch
  };
  using labels = std::string;  // rendered: a="x",b="y"

  mutable std::mutex mu_;
  std::map<labels, uint64_t> requests_, drops_, ingress_replies_, model_requests_, tenant_requests_;
  std::map<labels, histogram> durations_, stage_durations_, batch_sizes_, model_queue_, model_compute_;
  struct pipeline_tally {
    pipeline_statistics stats;
    double executions = 0;
  };
  std::map<std::string, pipeline_tally> statistics_;
  std::map<std::string, attainment> attainment_;
  std::map<labels, double> queue_lengths_;
  std::map<std::string, std::pair<double, double>> links_;  // worker -> (ms per MB, empty round trip ms)
  struct dip_shares {
    double quantile, wait, headroom;
  };
  std::map<std::string, dip_shares> uplink_quantiles_;  // per pipeline
  std::map<std::string, busy_time> busy_;
  std::map<std::string, std::pair<std::map<std::string, double>, double>> memory_;  // device -> (model bytes, limit)
  std::map<std::string, size_t> instances_;
  std::map<std::pair<event, std::string>, uint64_t> events_;
  std::map<labels, uint64_t> cache_lookups_;  // of, kind, result
  std::map<labels, double> cache_seconds_;    // of, kind
  struct cache_totals {
    uint64_t insertions = 0, evictions = 0, too_large = 0, bytes = 0, entries = 0;
  };
  std::optional<cache_totals> cache_;  // none: no frontend with a cache
  double plan_devices_ = -1;           // -1: no placement yet
  double in_flight_ = -1;
};

// What the process uses, as Prometheus's process collector reports it (from /proc/self; zeros
// where it cannot be read).
struct process_sample {
  double cpu_seconds = 0;  // user and system
  double resident_bytes = 0;
  double virtual_bytes = 0;
  double start_time_seconds = 0;  // since the epoch
  double open_fds = 0;
  double max_fds = 0;
};
process_sample read_process();
// The process_* families of `p` in the exposition format (render() adds them for this process).
void render_process(std::string& out, const process_sample& p);

// `v` with backslash, double quote and newline escaped for a label value.
std::string escape_label(std::string_view v);

}  // namespace sloserve
