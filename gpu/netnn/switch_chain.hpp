#pragma once
// NetNN's DNN on a chain of programmable switches (seed 004, P6.3): the mapper, and the data
// plane emulated packet by packet within a switch's limits.
//
// Mapping (P6.3.2): the first switch extracts the features (features.hpp); every layer but the
// last runs on a tier of `tier_switches` switches, its filters (convolution) or neurons (dense)
// divided among the tier's pipelines in contiguous blocks; the last layer, the class and the
// flow's majority vote run on a final switch. The model of the paper (two convolutions, three
// dense layers) takes 1 + 4 x 4 + 1 = 18 switches.
//
// Data plane (P6.3.3-P6.3.4): only table look-ups, integer adds, shifts and compares. A product
// x * w is a look-up in a table of every 8-bit activation by every 8-bit weight; weights and biases
// are table entries; partial results live in register arrays. Results travel between tiers as
// generated packets, multicast to every pipeline of the next tier: the feature switch sends the
// first layer one packet per window (its kernel's values in the header); a convolution sends one
// packet per pooled value, a dense layer one per neuron (value and index in the header). A
// convolution that reads another's output keeps its input in a register buffer with a counter
// per position and computes a window on the packet that completes it; a dense layer accumulates
// every packet into its neurons' registers and finishes them on the last (a counter).
// Operations counted per packet and pipeline: every look-up, add, shift, compare, register read
// and write, and packet emission.

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "gpu/netnn/features.hpp"
#include "gpu/netnn/model.hpp"
#include "pipelines/expected.hpp"

namespace sloserve::netnn {

// What one switch's data plane allows (a `kind: switch` device's settings).
struct switch_limits {
  int pipelines = 4;                            // per switch
  int stages = 32;                              // match-action stages per pipeline
  int64_t register_bytes_per_stage = 64 << 10;  // register memory of one stage of one pipeline
  int64_t table_bytes_per_stage = 256 << 10;    // table (SRAM/TCAM) memory of one stage of one pipeline
  int64_t ops_per_packet = 8192;                // operations one pipeline may spend on one packet
  int flow_slots = 4096;                        // the feature switch's flow table
};

// Per layer, what the mapping costs (Table P6.1's columns and more).
struct layer_cost {
  std::string name;  // conv1, conv2, dense1, ...
  int switches = 0, pipelines = 0;
  int outputs_per_pipeline = 0;  // the most any pipeline holds
  uint64_t packets = 0;          // generated toward the layer per inference (before multicast)
  int64_t ops_per_packet = 0;    // the most one pipeline spends on one packet
  int64_t weight_bytes = 0;      // the layer's weights and biases (all its pipelines)
  int64_t register_bytes = 0;    // its register arrays, per pipeline
  int64_t table_bytes = 0;       // its tables (weights, biases, the product table), per pipeline
  int stages = 0;                // stages one pipeline needs for its registers and tables
};

struct chain_plan {
  int switches = 0;
  std::vector<layer_cost> layers;      // per model layer
  int64_t feature_register_bytes = 0;  // the flow table (key, count, last arrival, min and max gap)
};

// Maps `m` onto switches of `limits`, `tier_switches` switches a layer; refused, with the layer
// and the limit, where a pipeline would need more operations per packet, register or table
// memory in one stage, or stages, than the limits allow.
expected<chain_plan> map_model(const model& m, const switch_limits& limits, int tier_switches = 4);

// One inference point's outcome.
struct verdict {
  std::vector<int32_t> logits;
  int label = 0;       // this packet's class
  int majority = 0;    // the flow's class by majority of its inference points so far (ties: lowest)
  uint32_t point = 0;  // which packet of the flow (1, 2, 4, ...)
};

// What the emulated chain did, per layer, since it started.
struct chain_counters {
  std::vector<uint64_t> packets;            // generated toward each layer
  std::vector<uint64_t> deliveries;         // copies processed by its pipelines
  std::vector<int64_t> max_ops_per_packet;  // the most one pipeline spent on one packet
  std::vector<uint64_t> ops;                // in all
  uint64_t inference_points = 0, flows_evicted = 0;
};

class switch_chain {
 public:
  // `m` must have been mapped by map_model with the same limits.
  switch_chain(model m, switch_limits limits, int tier_switches = 4);
  // One packet through the chain: nullopt unless it is an inference point of its flow.
  std::optional<verdict> process(const packet& p);
  // The class of `p`'s flow by majority so far; -1 when it has had no inference point.
  int majority(const packet& p) const;
  // The logits of one input vector run through the tiers (no flow state; for tests and the
  // bench).
  std::vector<int32_t> infer(const std::vector<uint8_t>& input);
  const chain_counters& counters() const { return counters_; }

 private:
  struct flow_slot {
    flow_state state;
    std::vector<uint32_t> votes;
  };
  model m_;
  switch_limits limits_;
  int tier_switches_;
  std::vector<shape> shapes_;
  std::vector<flow_slot> flows_;
  chain_counters counters_;
};

// The outputs of a layer of `n` that pipeline `u` of its `units` holds, [first, end): contiguous
// blocks, as even as they divide.
std::pair<int, int> output_block(int n, int u, int units);

// The product table's entry: x * w for an 8-bit activation and an 8-bit weight.
int32_t product(uint8_t x, int8_t w);

}  // namespace sloserve::netnn
