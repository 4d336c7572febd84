#pragma once
// NetNN's files as tools/netnn.py writes them: the quantized model (model.json) and the test
// flows (test.bin: per packet 68 header bytes, the arrival time as a little-endian int64 in us and
// the flow's class in one byte; flows one after another), and what running flows through a
// switch chain scores.

#include <string>
#include <vector>

#include "gpu/netnn/switch_chain.hpp"

namespace sloserve::netnn {

struct flow_trace {
  std::vector<packet> packets;
  int label = 0;
};

inline constexpr size_t record_bytes = packet_bytes + 1;  // and the class

expected<model> read_model(const std::string& path);
// The flows of `path` (a flow ends where the next packet's 5-tuple differs).
expected<std::vector<flow_trace>> read_flows(const std::string& path);

struct score {
  uint64_t points = 0, points_right = 0;  // inference points, and those classified right
  uint64_t flows = 0, flows_right = 0;    // flows, and those whose final majority is right
  uint64_t mismatches = 0;                // inference points whose logits differ from reference()
  double packet_accuracy() const { return points ? static_cast<double>(points_right) / points : 0; }
  double flow_accuracy() const { return flows ? static_cast<double>(flows_right) / flows : 0; }
};

// Runs every packet of `flows` through `chain`; with `check`, each inference point's logits are
// compared with the integer reference of `m`.
score run_flows(switch_chain& chain, const model& m, const std::vector<flow_trace>& flows, bool check);

}  // namespace sloserve::netnn
