#pragma once
// P4_16 for the bmv2 simple_switch target (v1model) from NetNN's mapping (switch_chain.hpp): the
// programs the emulated chain stands for. There is no P4 compiler here, so the tests check their
// structure (sections, declarations against the plan, every table applied once), not p4c.
//
// Three programs: the feature switch (the flow table in registers, a CRC32 hash of the 5-tuple,
// inference points by count & (count - 1), the input bits kept in a register and sent to the
// first tier as one multicast replica per window or value, which the egress fills by its
// replication id); a tier switch per layer (every switch of a tier runs the same program, the
// control plane writing each pipeline's block of outputs and its weights as table entries): per
// output and tap a weight look-up and a product look-up in a table of every 8-bit activation by
// every 8-bit weight, the sums, the shift and the two compares, the layer's register arrays as
// the plan sizes them, and the results out as multicast replicas; and the final switch: the last
// layer's accumulators, the class by compares, and the flow's votes.

#include <string>
#include <vector>

#include "gpu/netnn/switch_chain.hpp"

namespace sloserve::netnn {

struct p4_program {
  std::string name;      // features, tier1 (layer 1's switches), ..., final
  int first_switch = 0;  // the switches of the chain that run it
  int switches = 1;
  std::string source;
};

// The programs for `m` as `plan` maps it within `limits`.
std::vector<p4_program> emit_p4(const model& m, const chain_plan& plan, const switch_limits& limits);

}  // namespace sloserve::netnn
