#pragma once
// The built-in load generator: open loop (constant, Poisson, gamma, or a per-second rate trace)
// or closed loop, over one ZeroMQ DEALER, with exact accounting of every request.

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "messages/curve.hpp"
#include "pipelines/tensor.hpp"

namespace sloserve {

// One pipeline of a traffic mix.
struct mix_entry {
  std::string pipeline;
  double weight = 1;
  double slo_ms = 0;
  tensor_spec input;
};

struct load_options {
  std::string address;   // the frontend's ROUTER
  std::string pipeline;
  double slo_ms = 0;     // for ok_within_slo and lost accounting
  tensor_spec input;     // the pipeline's root input
  std::vector<mix_entry> mix;  // when set, each request picks its pipeline by weight
  double rate = 100;     // requests/s (open loop)
  double duration_s = 10;
  std::string arrival = "poisson";  // constant | poisson | gamma
  double cv = 1;                    // gamma: coefficient of variation of inter-arrival times
  std::vector<double> trace;        // per-second rates; replaces `rate` when set
  int concurrency = 0;              // > 0: closed loop with this many outstanding
  double warmup_s = 0;              // sent before the measured window, not counted
  double grace_ms = 2000;           // lost = no reply by send + SLO + grace
  double network_ms = -1;           // attached to every request when >= 0
  // Per-second uplink bandwidth (Mbps): each request carries network_ms = payload_kb·8 / Mbps
  // of the second it is sent in. Replaces network_ms when set.
  std::vector<double> bandwidth_mbps;
  double payload_kb = 0;
  uint64_t seed = 1;
  bool progress = false;            // live line on stderr
  double wait_ready_s = 20;         // wait for the frontend to be ready first
  curve_pair key;                   // CurveZMQ: this client's pair; empty: plain connection
  std::string server_key;           // the frontend node's public key (Z85)
  // Sending threads, each with its own connection and an independent share of the arrivals;
  // 0: enough for the rate and the payload size.
  int threads = 0;
  // When set, requests carry these inputs in turn instead of a generated tensor of `input`
  // (images: uint8 HWC, or encoded JPEG as uint8[N]).
  std::vector<tensor> images;
};

struct load_summary {
  // late: replies after a request was counted lost; delayed: requests the generator sent more
  // than 2 ms after their arrival time (generator_late_fraction of those sent).
  uint64_t sent = 0, ok = 0, ok_within_slo = 0, dropped = 0, overloaded = 0, errors = 0,
           lost = 0, late = 0, delayed = 0;
  double generator_late_fraction = 0;
  size_t lanes = 1;  // sending threads used
  double attainment = 0, goodput_rps = 0, measured_s = 0;
  double p50 = 0, p90 = 0, p99 = 0, max = 0, mean = 0;
  nlohmann::json series = nlohmann::json::array();
  nlohmann::json reasons = nlohmann::json::object();
  nlohmann::json nodes = nlohmann::json::object();  // stage runs of OK replies, per worker node
  // Where OK replies' latency went: {client, frontend, queue, exec: {p50, p99}} in ms.
  nlohmann::json breakdown = nlohmann::json::object();

  nlohmann::json to_json(const load_options& o) const;
  std::string to_text() const;
  // What makes the figures doubtful (a generator that fell behind), one sentence each.
  std::vector<std::string> warnings() const;
};

// Reads a per-second trace: one number per line (requests/s, or Mbps for a bandwidth trace);
// '#' starts a comment.
bool read_rate_trace(const std::string& path, std::vector<double>& out, std::string& error);

// Synthetic traces (`sloserve trace`), one value per second:
// bursty: `base` requests/s, times `factor` for `burst_s` seconds at the start of every
// `period_s` (thesis 004's ×5 for 5 s every 60 s), with Poisson noise of the given seed.
std::vector<double> bursty_trace(double base, double factor, int burst_s, int period_s, int duration_s, uint64_t seed);
// stepped: the levels in turn, each held for `step_s` seconds, cycling (a 4G uplink's steps).
std::vector<double> stepped_trace(const std::vector<double>& levels, int step_s, int duration_s);

// JPEG files as request inputs (uint8[N] each): `path` is one file, or a folder whose *.jpg and
// *.jpeg files are read in name order.
bool read_images(const std::string& path, std::vector<tensor>& out, std::string& error);

// Sending threads `run_load` uses when `threads` is 0.
size_t default_lanes(const load_options& o);

// Runs the load; returns false with `error` set when it could not start.
bool run_load(const load_options& o, load_summary& out, std::string& error);

}  // namespace sloserve
