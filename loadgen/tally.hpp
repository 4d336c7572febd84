#pragma once
// Exact accounting of a load run: every request sent in the measured window ends as OK (within
// its SLO or not), DROPPED, OVERLOADED, ERROR or lost; latencies, where they went, per-second
// series and reasons. Each sending lane keeps a tally; the run merges them into a summary.

#include <array>
#include <chrono>
#include <cstdint>
#include <deque>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "loadgen/options.hpp"
#include "messages/types.hpp"

namespace sloserve {

// A request sent later than this after its arrival time counts as sent late by the generator.
constexpr std::chrono::milliseconds late_after{2};

struct load_summary {
  // late: replies after a request was counted lost; delayed: requests the generator sent more
  // than late_after after their arrival time (generator_late_fraction of those sent).
  uint64_t sent = 0, ok = 0, ok_within_slo = 0, dropped = 0, overloaded = 0, errors = 0, lost = 0, late = 0,
           delayed = 0;
  // --clients: frames the clients captured and did not send, as they could not have been answered
  // within their SLO (client_options::skip_hopeless). Not among `sent`; attainment counts them
  // missed.
  uint64_t skipped = 0;
  double generator_late_fraction = 0;
  // Dummy requests (Piccolo's padding) the frontend sent from before the first request to after
  // the last: never among the figures above.
  uint64_t dummies = 0;
  size_t lanes = 1;  // sending threads used
  double attainment = 0, goodput_rps = 0, measured_s = 0;
  // The wall-clock time (Unix seconds) at which second 0 of `series` began: the measured window's
  // start, to line the series up with node logs and outside events.
  double started_at_unix_s = 0;
  double p50 = 0, p90 = 0, p99 = 0, max = 0, mean = 0;
  nlohmann::json series = nlohmann::json::array();
  nlohmann::json reasons = nlohmann::json::object();
  nlohmann::json nodes = nlohmann::json::object();   // stage runs of OK replies, per worker node
  nlohmann::json models = nlohmann::json::object();  // stage runs of OK replies, per model (variant) that ran
  // Stage runs of OK replies per model version (models[].version), by the file's model name:
  // {"det": {"1": 9012, "2": 988}}.
  nlohmann::json versions = nlohmann::json::object();
  // Per-path SLOs: OK replies whose path to this leaf stage ended after the leaf's own SLO, per
  // leaf (such a reply is not within its SLO though it came within the pipeline's).
  nlohmann::json late_paths = nlohmann::json::object();
  // Where OK replies' latency went: {client, frontend, queue, exec: {p50, p99}} in ms.
  nlohmann::json breakdown = nlohmann::json::object();
  // --clients: per client (slo_ms, fps, sent, skipped, ok_within_slo, miss_rate, accuracy, sizes), and the
  // mean accuracy (percent) of the models that answered within their SLO.
  nlohmann::json clients = nlohmann::json::object();
  double accuracy = 0;
  // Device time the OK replies took: each its share of its batch's execution, in seconds.
  double device_busy_s = 0;
  // The latency CDF of OK replies: (ms, fraction of them at most that), at 201 quantiles.
  std::vector<std::pair<double, double>> cdf;

  nlohmann::json to_json(const load_options& o) const;
  std::string to_text() const;
  // Of the requests sent in seconds [from_s, to_s) of the measured window, the share answered
  // OK within the SLO (1 when none was sent).
  double attainment_in(size_t from_s, size_t to_s) const;
  // The same of a summary's `series` as `to_json` (and `load --json`) writes it.
  static double attainment_in(const nlohmann::json& series, size_t from_s, size_t to_s);
  // What makes the figures doubtful (a generator that fell behind), one sentence each.
  std::vector<std::string> warnings() const;
};

// One lane's counts.
class lane_tally {
 public:
  // `seconds`: length of the run, for the per-second series.
  explicit lane_tally(size_t seconds = 0);

  // A measured request was sent in second `second` of the measured window.
  void sent(size_t second);
  // A measured request was sent more than late_after after its arrival time.
  void delayed() { ++s_.delayed; }
  // A measured frame was skipped: it could not have been answered within its SLO.
  void skipped() { ++s_.skipped; }
  // A measured request got no reply by its SLO plus grace.
  void lost() { ++s_.lost; }
  // A reply came for a request already counted lost.
  void late() { ++s_.late; }
  // The reply to a measured request sent in `second`, `latency_ms` after its intended send time,
  // with `network_ms` of upload the user also waited for, under `slo_ms`.
  void reply(const msg::client_reply& r, size_t second, double latency_ms, double network_ms, double slo_ms);

  const load_summary& counts() const { return s_; }
  // p99 latency so far, for a progress line.
  double p99_ms() const;

 private:
  friend load_summary merge_lanes(std::vector<lane_tally>& lanes, double measured_s);
  struct bucket {
    uint64_t sent = 0, ok = 0, ok_within_slo = 0, dropped = 0, errors = 0;
    std::vector<float> latencies;
  };
  void count_reason(const std::string& reason);

  load_summary s_;
  std::vector<bucket> buckets_;
  std::vector<float> latencies_;
  std::array<std::vector<float>, 4> parts_;  // of OK replies: client, frontend, queue, exec (ms)
};

// Requests whose time is up (`expiry`: (deadline, id) in deadline order) and still in `pending`
// (id -> something with `measured`) are lost: counted (when measured) and forgotten.
template <class Pending>
void expire_lost(std::deque<std::pair<std::chrono::steady_clock::time_point, uint64_t>>& expiry, Pending& pending,
                 std::chrono::steady_clock::time_point now, lane_tally& out) {
  while (!expiry.empty() && expiry.front().first <= now) {
    auto it = pending.find(expiry.front().second);
    if (it != pending.end()) {
      if (it->second.measured) out.lost();
      pending.erase(it);
    }
    expiry.pop_front();
  }
}

// The run's summary over `measured_s` seconds from every lane's tally.
load_summary merge_lanes(std::vector<lane_tally>& lanes, double measured_s);

// The p-quantile (0..1) of `v` (reordered); 0 when empty.
double percentile(std::vector<float>& v, double p);

}  // namespace sloserve
