#pragma once
// What a load run sends: where, which pipelines, at what rate and by which arrival process.

#include <string>
#include <vector>

#include "config/knob_option.hpp"
#include "config/knobs.hpp"
#include "messages/curve.hpp"
#include "pipelines/tensor.hpp"

namespace sloserve {

// One pipeline of a traffic mix.
struct mix_entry {
  std::string pipeline;
  double weight = 1;
  double slo_ms = 0;
  tensor_spec input;
  std::string input_name = "input";  // http: as the KServe v2 protocol names it
  // A partitioned model (Graft): requests start at this layer and declare `slo_ms` as their own.
  uint32_t start_layer = 0;
  bool declare_slo = false;
  int clients = 0;  // > 0: its requests come from this many clients, named "PIPELINE@START/SLO#k"
};

// How the load client speaks to the frontend.
enum class load_protocol { zmq, http, grpc };

struct load_options {
  load_protocol protocol = load_protocol::zmq;
  std::string address;               // the frontend's ROUTER; with http or grpc, its KServe v2 ingress (HOST:PORT)
  std::string input_name = "input";  // http, grpc: the pipeline's input as the protocol names it
  std::string http_token;            // http, grpc: sent as Authorization: Bearer; empty: none
  std::string http_ca;               // http, grpc: TLS verified against this PEM; empty: plaintext
  std::string tenant;                // the tenant it names (security.tenants, without keys); empty: none
  std::string pipeline;
  double slo_ms = 0;           // for ok_within_slo and lost accounting
  tensor_spec input;           // the pipeline's root input
  std::vector<mix_entry> mix;  // when set, each request picks its pipeline by weight
  double rate = 100;           // requests/s (open loop)
  double duration_s = 10;
  arrival_kind arrival = arrival_kind::poisson;
  double cv = 1;              // gamma: coefficient of variation of inter-arrival times
  std::vector<double> trace;  // per-second rates; replaces `rate` when set
  int concurrency = 0;        // > 0: closed loop with this many outstanding
  double warmup_s = 0;        // sent before the measured window, not counted
  double grace_ms = 2000;     // lost = no reply by send + SLO + grace
  double network_ms = -1;     // attached to every request when >= 0
  // Per-second uplink bandwidth (Mbps): each request carries network_ms = payload_kb·8 / Mbps
  // of the second it is sent in. Replaces network_ms when set.
  std::vector<double> bandwidth_mbps;
  double payload_kb = 0;
  uint64_t seed = 1;
  // < 0: every request carries the same input. Else this share of requests repeats an input sent
  // before (one of the last 64 of its pipeline's fresh ones, at random) and the rest carry one of
  // their own (the input with the request's id in its first bytes): a stream a response cache
  // answers that share of.
  double repeat = -1;
  bool progress = false;     // live line on stderr
  double wait_ready_s = 20;  // wait for the frontend to be ready first
  curve_pair key;            // CurveZMQ: this client's pair; empty: plain connection
  std::string server_key;    // the frontend node's public key (Z85)
  // Sending threads, each with its own connection and an independent share of the arrivals;
  // 0: enough for the rate and the payload size.
  int threads = 0;
  // Requests leave their tensors in a shared-memory region registered with the frontend's node
  // (on this host, with runtime.client_shared_memory) instead of carrying their bytes: over zmq
  // by sloserve's own messages, over http and grpc by Triton's system shared-memory extension.
  bool shared_memory = false;
  // When set, requests carry these inputs in turn instead of a generated tensor of `input`
  // (images: uint8 HWC, or encoded JPEG as uint8[N]).
  std::vector<tensor> images;
};

}  // namespace sloserve
