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

#include <ostream>
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

// The wiring the entries assume. bmv2 runs one pipeline a switch, so a switch's ports stand for
// its pipelines: a switch of layer i with P pipelines, fed by the U pipelines upstream of it (the
// feature switch for the first layer, else layer i-1's), takes upstream pipeline j's packets into
// its pipeline p on port p * U + j, and sends pipeline p's outputs toward downstream pipeline q
// (of D, the next layer's) on port P * U + p * D + q: the link to port (q % P') * U' + (p's index
// in its layer) of switch q / P' of the next layer (P', U' as seen from there). The feature switch
// takes packets on port 0 and sends to the first layer's pipeline q on port 1 + q.
//
// The control plane's part of switch `sw` of the chain (0: the feature switch, then each layer's
// switches in order, the final switch last) as simple_switch_CLI commands: on the feature switch
// the gaps' log scale (longest-prefix entries, features.hpp's log_time) and the multicast group of
// the first layer's windows (a node a window, replication id its position); on a layer's switch,
// per pipeline its block (an entry a port: its first output and its group), its outputs' biases
// and weights, and a multicast group (a node an output, to every pipeline downstream), then the
// product entries: every 8-bit activation by each weight the switch's outputs use (the table is
// declared for all 65,536 products; the rest are never looked up). Node handles count from 0 on a
// switch that starts empty.
void write_p4_entries(const model& m, const chain_plan& plan, int sw, std::ostream& out);

}  // namespace sloserve::netnn
