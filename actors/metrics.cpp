#include "actors/metrics.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "actors/exposition.hpp"

namespace sloserve {

const std::vector<double> node_metrics::latency_buckets{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                                        0.1,    0.25,  0.5,    1,     2.5,  5,     10};
const std::vector<double> node_metrics::batch_buckets{1, 2, 4, 8, 16, 32, 64, 128, 256};

void sliding_sum::add(double at_s, double value) {
  auto second = static_cast<int64_t>(std::floor(at_s));
  auto& s = slots_[static_cast<size_t>(second % static_cast<int64_t>(slots_.size()))];
  if (s.second != second) s = {second, 0};
  s.value += value;
}

double sliding_sum::sum(double now_s, int window) const {
  auto now = static_cast<int64_t>(std::floor(now_s));
  window = std::min<int>(window, static_cast<int>(slots_.size()));
  double total = 0;
  for (auto& s : slots_)
    if (s.second > now - window && s.second <= now) total += s.value;
  return total;
}

std::string escape_label(std::string_view v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '"')
      out += "\\\"";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

using namespace exposition;

void node_metrics::histogram::observe(double v) {
  if (counts.empty()) counts.assign(bounds->size() + 1, 0);
  auto i = std::lower_bound(bounds->begin(), bounds->end(), v) - bounds->begin();
  ++counts[static_cast<size_t>(i)];
  sum += v;
  ++count;
}

void node_metrics::slo_buckets(const std::vector<double>& slos_s) {
  std::lock_guard lock(mu_);
  auto b = latency_buckets;
  for (double slo : slos_s) {
    if (!(slo > 0)) continue;
    for (int k = 10; k <= 24; ++k) b.push_back(slo * k / 20);
    b.push_back(slo * 1.5);
    b.push_back(slo * 2);
  }
  std::sort(b.begin(), b.end());
  // Bounds closer than 0.1% of each other are one.
  std::vector<double> out;
  for (double x : b)
    if (out.empty() || x > out.back() * 1.001) out.push_back(x);
  duration_buckets_ = std::move(out);
}

void node_metrics::request_done(const std::string& pipeline, std::string_view outcome, double seconds, bool within_slo,
                                double now_s) {
  std::lock_guard lock(mu_);
  ++requests_[label2("pipeline", pipeline, "outcome", outcome)];
  auto& h = durations_[label("pipeline", pipeline)];
  h.bounds = &duration_buckets_;
  h.observe(seconds);
  auto& a = attainment_[pipeline];
  a.total.add(now_s, 1);
  if (within_slo) a.within.add(now_s, 1);
}

void node_metrics::stage_done(const std::string& pipeline, const std::string& stage, double seconds) {
  std::lock_guard lock(mu_);
  auto& h = stage_durations_[label2("pipeline", pipeline, "stage", stage)];
  h.bounds = &duration_buckets_;
  h.observe(seconds);
}

void node_metrics::dropped(std::string_view reason) {
  std::lock_guard lock(mu_);
  ++drops_[label("reason", reason)];
}

void node_metrics::tenant_request(std::string_view tenant, std::string_view outcome) {
  std::lock_guard lock(mu_);
  ++tenant_requests_[label2("tenant", tenant, "outcome", outcome)];
}

void node_metrics::queue_length(const std::string& model, const std::string& device, size_t n) {
  std::lock_guard lock(mu_);
  queue_lengths_[label2("model", model, "device", device)] = static_cast<double>(n);
}

void node_metrics::link(const std::string& worker, double ms_per_mb, double base_ms) {
  std::lock_guard lock(mu_);
  links_[worker] = {ms_per_mb, base_ms};
}

void node_metrics::uplink_quantile(const std::string& pipeline, double q, double wait_share, double headroom_share) {
  std::lock_guard lock(mu_);
  uplink_quantiles_[pipeline] = {q, wait_share, headroom_share};
}

void node_metrics::batch(const std::string& model, int size) {
  std::lock_guard lock(mu_);
  auto& h = batch_sizes_[label("model", model)];
  h.bounds = &batch_buckets;
  h.observe(size);
}

void node_metrics::device_memory(const std::string& device, std::map<std::string, double> by_model,
                                 double limit_bytes) {
  std::lock_guard g(mu_);
  memory_[device] = {std::move(by_model), limit_bytes};
}

void node_metrics::busy(const std::string& device, double from_s, double to_s) {
  std::lock_guard lock(mu_);
  auto& b = busy_[device];
  if (b.first_s < 0) b.first_s = from_s;
  // Split across the seconds it spans, so that each second holds at most one second of work.
  for (double t = from_s; t < to_s;) {
    double end = std::min(to_s, std::floor(t) + 1);
    b.seconds.add(t, end - t);
    t = end;
  }
}

void node_metrics::placement(size_t devices, const std::map<std::string, size_t>& instances) {
  std::lock_guard lock(mu_);
  plan_devices_ = static_cast<double>(devices);
  instances_ = instances;
}

void node_metrics::count(event e, std::string_view label) {
  std::lock_guard lock(mu_);
  ++events_[{e, std::string(label)}];
}

void node_metrics::ingress_reply(std::string_view protocol, std::string_view code) {
  std::lock_guard lock(mu_);
  ++ingress_replies_[label2("protocol", protocol, "code", code)];
}

void node_metrics::model_done(const std::string& model, int version, std::string_view outcome, double queue_s,
                              double compute_s) {
  std::lock_guard lock(mu_);
  auto l = label2("model", model, "version", std::to_string(version));
  ++model_requests_[l + "," + label("outcome", outcome)];
  if (outcome != "ok") return;
  for (auto [family, v] : {std::pair{&model_queue_, queue_s}, std::pair{&model_compute_, compute_s}}) {
    auto& h = (*family)[l];
    h.bounds = &latency_buckets;
    h.observe(v);
  }
}

void node_metrics::in_flight(size_t n) {
  std::lock_guard lock(mu_);
  in_flight_ = static_cast<double>(n);
}

namespace {

// A histogram family in the exposition format; a family with no series is left out (a worker
// shows no frontend families, and so on).
template <class Family>
void histograms(std::string& out, std::string_view name, std::string_view help, const Family& family) {
  if (family.empty()) return;
  header(out, name, "histogram", help);
  for (auto& [l, h] : family) {
    uint64_t cumulative = 0;
    auto bucket = fmt::format("{}_bucket", name);
    auto prefix = l.empty() ? std::string() : l + ",";
    for (size_t i = 0; i <= h.bounds->size(); ++i) {
      cumulative += h.counts[i];
      auto le = i < h.bounds->size() ? number((*h.bounds)[i]) : std::string("+Inf");
      sample(out, bucket, prefix + label("le", le), static_cast<double>(cumulative));
    }
    sample(out, fmt::format("{}_sum", name), l, h.sum);
    sample(out, fmt::format("{}_count", name), l, static_cast<double>(h.count));
  }
}

template <class Family>
void counters(std::string& out, std::string_view name, std::string_view help, const Family& family) {
  if (family.empty()) return;
  header(out, name, "counter", help);
  for (auto& [l, v] : family) sample(out, name, l, static_cast<double>(v));
}

}  // namespace

void node_metrics::render_requests(std::string& out) const {
  counters(out, "sloserve_requests_total",
           "Requests answered, by pipeline and outcome (ok, dropped, overloaded, error).", requests_);
  histograms(out, "sloserve_request_duration_seconds", "Time from a request's arrival to its reply.", durations_);
  counters(out, "sloserve_ingress_replies_total",
           "Replies of the KServe v2 ingresses, by protocol and status (an HTTP status, a gRPC code), requests "
           "refused before reaching a pipeline included.",
           ingress_replies_);
  counters(out, "sloserve_model_requests_total",
           "Invocations of each model (and version) answered to this frontend, by outcome (ok, dropped, overloaded, "
           "error).",
           model_requests_);
  histograms(out, "sloserve_model_queue_duration_seconds",
             "Time an invocation of a model answered ok spent in its device's queue.", model_queue_);
  histograms(out, "sloserve_model_compute_duration_seconds",
             "Time the batch an invocation of a model answered ok ran in took.", model_compute_);
  histograms(out, "sloserve_stage_duration_seconds", "Time from a stage's invocation to its result, queueing included.",
             stage_durations_);
  counters(out, "sloserve_drops_total",
           "Requests dropped or refused for load or time on this node (early_drop, queue_full, payload_budget, "
           "client_in_flight, stale_on_arrival, network_time, priority, tenant_cap, path_backed_up, "
           "intake_backed_up).",
           drops_);
  counters(out, "sloserve_tenant_requests_total",
           "Requests of each tenant at this frontend: admitted, capped (over its rate cap) or shed (its share of an "
           "overloaded pipeline).",
           tenant_requests_);
}

void node_metrics::render_gauges(std::string& out, double now_s) const {
  if (!attainment_.empty()) {
    header(out, "sloserve_slo_attainment_ratio", "gauge",
           fmt::format("Fraction of the requests answered in the last {} s that were ok within their SLO.",
                       attainment_window_s));
    for (auto& [p, a] : attainment_) {
      double total = a.total.sum(now_s, attainment_window_s);
      if (total > 0)
        sample(out, "sloserve_slo_attainment_ratio", label("pipeline", p),
               a.within.sum(now_s, attainment_window_s) / total);
    }
  }
  if (in_flight_ >= 0) {
    header(out, "sloserve_requests_in_flight", "gauge", "Requests admitted and not yet answered.");
    sample(out, "sloserve_requests_in_flight", {}, in_flight_);
  }
  if (!queue_lengths_.empty()) {
    header(out, "sloserve_queue_length", "gauge", "Requests queued on a device, by model.");
    for (auto& [l, v] : queue_lengths_) sample(out, "sloserve_queue_length", l, v);
  }
  if (!links_.empty()) {
    header(out, "sloserve_link_seconds_per_megabyte", "gauge",
           "What each MB of a request adds on the way to a worker, by this frontend's link probes.");
    for (auto& [w, v] : links_) sample(out, "sloserve_link_seconds_per_megabyte", label("worker", w), v.first / 1e3);
    header(out, "sloserve_link_round_trip_seconds", "gauge", "Round trip of an empty link probe to a worker.");
    for (auto& [w, v] : links_) sample(out, "sloserve_link_round_trip_seconds", label("worker", w), v.second / 1e3);
  }
  if (!uplink_quantiles_.empty()) {
    header(out, "sloserve_client_uplink_quantile", "gauge",
           "The quantile of its clients' uplink dips a pipeline's uploads are planned at (lower: deeper dips).");
    for (auto& [p, q] : uplink_quantiles_)
      sample(out, "sloserve_client_uplink_quantile", label("pipeline", p), q.quantile);
    header(out, "sloserve_client_wait_share", "gauge",
           "The share of the wait behind a running batch a pipeline's lifts onto spare compute plan for.");
    for (auto& [p, q] : uplink_quantiles_) sample(out, "sloserve_client_wait_share", label("pipeline", p), q.wait);
    header(out, "sloserve_client_headroom_share", "gauge",
           "The share of scheduler.jellyfish.headroom a pipeline's plan leaves on each worker.");
    for (auto& [p, q] : uplink_quantiles_)
      sample(out, "sloserve_client_headroom_share", label("pipeline", p), q.headroom);
  }
}

void node_metrics::render_devices(std::string& out, double now_s) const {
  histograms(out, "sloserve_batch_size", "Requests per batch run, by model.", batch_sizes_);
  if (!memory_.empty()) {
    header(out, "sloserve_device_memory_used_bytes", "gauge",
           "Memory the models a device serves take on it, by model: measured on a real device (the loaded "
           "module's parameters and buffers, on the GPU for a cuda device), declared (models[].memory_mb) on an "
           "emulated one.");
    for (auto& [d, m] : memory_)
      for (auto& [model, bytes] : m.first)
        sample(out, "sloserve_device_memory_used_bytes", label2("device", d, "model", model), bytes);
    header(out, "sloserve_device_memory_total_bytes", "gauge",
           "Memory a device has for models (nodes[].devices[].memory_mb), where the file limits it.");
    for (auto& [d, m] : memory_)
      if (m.second > 0) sample(out, "sloserve_device_memory_total_bytes", label("device", d), m.second);
  }
  if (!busy_.empty()) {
    header(out, "sloserve_device_busy_ratio", "gauge",
           fmt::format("Fraction of the last {} s a device spent running batches.", busy_window_s));
    for (auto& [d, b] : busy_) {
      // A device that started less than a window ago is judged over the time it has been up.
      double start = std::max(b.first_s, std::floor(now_s) - busy_window_s + 1);
      double span = std::max(now_s - start, 1e-3);
      double ratio = std::min(1.0, b.seconds.sum(now_s, busy_window_s) / span);
      sample(out, "sloserve_device_busy_ratio", label("device", d), ratio);
    }
  }
}

void node_metrics::render_events(std::string& out) const {
  struct event_family {
    event e;
    const char* name;
    const char* label;
    const char* help;
  };
  static const event_family families[] = {
      {event::rejected_frame, "sloserve_rejected_frames_total", "reason",
       "Messages refused unread or unanswerable: too_large (over the frame limit), malformed, invalid, "
       "payload_too_large, not_a_node (control messages from outside the cluster), handshake (refused "
       "connections)."},
      {event::peer_down, "sloserve_peers_down_total", "peer", "Times a peer node was marked down."},
      {event::rerouted, "sloserve_rerouted_total", "", "Invocations sent again because their node went down."},
      {event::reply_dropped, "sloserve_replies_dropped_total", "why",
       "Replies that could not be sent: client_gone, client_not_reading (its queue is full)."},
      {event::dummy, "sloserve_dummy_requests_total", "outcome",
       "Piccolo's dummy requests: sent, and their answers by outcome (ok, dropped, overloaded, error)."},
      {event::forwarded, "sloserve_forwarded_invocations_total", "way",
       "Invocations of a model one frontend dispatches for all (Piccolo's central dispatcher): sent (by this "
       "frontend to the dispatcher), placed (by this frontend, for another), failed (placed nowhere, failed back)."},
      {event::http_refused, "sloserve_http_refused_total", "why",
       "HTTP connections and requests refused before any route: connections_per_address (over "
       "runtime.http_connections_per_address), connections (over the server's limit), request_timeout (not "
       "sent whole within runtime.http_request_timeout_ms), too_large, bad_request, tls_handshake."},
      {event::shared_memory, "sloserve_shared_memory_total", "what",
       "Clients' shared-memory regions (runtime.client_shared_memory): registered, unregistered, swept (their "
       "process exited or their object was unlinked), refused (a call or a tensor refused), and tensors read "
       "from and written into them."},
  };
  for (auto& f : families) {
    header(out, f.name, "counter", f.help);
    for (auto& [k, v] : events_)
      if (k.first == f.e)
        sample(out, f.name, *f.label ? label(f.label, k.second) : std::string(), static_cast<double>(v));
  }
  if (plan_devices_ >= 0) {
    header(out, "sloserve_plan_devices", "gauge", "Devices the current placement uses.");
    sample(out, "sloserve_plan_devices", {}, plan_devices_);
    header(out, "sloserve_instances", "gauge", "Instances (device sessions) of each model in the current placement.");
    for (auto& [m, n] : instances_) sample(out, "sloserve_instances", label("model", m), static_cast<double>(n));
  }
}

std::string node_metrics::render(std::string_view node, double now_s) const {
  auto process = read_process();
  std::lock_guard lock(mu_);
  std::string out;
  header(out, "sloserve_node_info", "gauge", "The node that serves these metrics.");
  sample(out, "sloserve_node_info", label("node", node), 1);
  header(out, "sloserve_build_info", "gauge", "The sloserve build this node runs.");
  sample(out, "sloserve_build_info", label("version", SLOSERVE_VERSION), 1);
  render_requests(out);
  render_gauges(out, now_s);
  render_devices(out, now_s);
  render_events(out);
  render_cache(out);
  render_process(out, process);
  return out;
}

}  // namespace sloserve
