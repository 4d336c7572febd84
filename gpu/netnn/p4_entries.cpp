// The control plane's table entries and multicast groups for the programs of p4.cpp, as
// simple_switch_CLI commands (p4.hpp: write_p4_entries, and the wiring they assume).

#include <fmt/format.h>

#include <cstdint>
#include <map>
#include <set>

#include "gpu/netnn/p4.hpp"

namespace sloserve::netnn {

namespace {

// A multicast group of `nodes` (replication ids 0, 1, ...), each to every port of `ports`.
void write_group(std::ostream& out, int group, int nodes, const std::string& ports, int& handle) {
  out << fmt::format("mc_mgrp_create {}\n", group);
  for (int r = 0; r < nodes; ++r) {
    out << fmt::format("mc_node_create {} {}\n", r, ports);
    out << fmt::format("mc_node_associate {} {}\n", group, handle++);
  }
}

std::string port_range(int from, int count) {
  std::string s;
  for (int q = 0; q < count; ++q) s += (q ? " " : "") + std::to_string(from + q);
  return s;
}

void write_feature_entries(const model& m, const chain_plan& plan, std::ostream& out) {
  // log_time: 0-7 as they are; else the leading bit's place and the three bits after it, a prefix
  // of 35 - msb bits; "none yet" (all ones) exactly.
  for (const char* table : {"log_min", "log_max"}) {
    auto action = fmt::format("set_{}", table);
    for (uint32_t us = 0; us < 8; ++us)
      out << fmt::format("table_add {} {} 0x{:08x}/32 => {}\n", table, action, us, us);
    for (int msb = 3; msb < 32; ++msb)
      for (uint32_t b = 0; b < 8; ++b)
        out << fmt::format("table_add {} {} 0x{:08x}/{} => {}\n", table, action, (8u | b) << (msb - 3), 35 - msb,
                           (msb - 2) * 8 + static_cast<int>(b));
    out << fmt::format("table_add {} {} 0xffffffff/32 => 255\n", table, action);
  }
  auto& first = m.layers.front();
  auto shapes = shapes_of(m);
  int replicas =
      first.kind == layer_kind::conv ? (shapes[0].positions - first.kernel) / first.stride + 1 : shapes[0].size();
  int handle = 0;
  write_group(out, 1, replicas, port_range(1, plan.layers.front().pipelines), handle);
}

void write_layer_entries(const model& m, const chain_plan& plan, size_t i, int k, std::ostream& out) {
  auto& l = m.layers[i];
  auto& cost = plan.layers[i];
  int pipelines = cost.pipelines / cost.switches;
  int upstream = i == 0 ? 1 : plan.layers[i - 1].pipelines;
  int downstream = i + 1 < m.layers.size() ? plan.layers[i + 1].pipelines : 0;
  int taps = l.kind == layer_kind::conv ? l.inputs * l.kernel : 1;
  // Per output and tap of the program: the weights its product table is looked up with.
  std::map<std::pair<int, int>, std::set<uint8_t>> used;
  int handle = 0;
  for (int p = 0; p < pipelines; ++p) {
    auto [first, end] = output_block(l.outputs, k * pipelines + p, cost.pipelines);
    for (int j = 0; j < upstream; ++j)
      out << fmt::format("table_add block set_block {} => {} {}\n", p * upstream + j, first, p + 1);
    for (int o = 0; o < end - first; ++o) {
      auto f = static_cast<size_t>(first + o);
      out << fmt::format("table_add bias{0} set_bias{0} {1} => {2}\n", o, first, static_cast<uint32_t>(l.bias[f]));
      if (l.kind == layer_kind::conv) {
        for (int t = 0; t < taps; ++t) {
          auto w = static_cast<uint8_t>(l.weights[f * static_cast<size_t>(taps) + static_cast<size_t>(t)]);
          out << fmt::format("table_add weight{0}_{1} set_w{0}_{1} {2} => {3}\n", o, t, first, w);
          used[{o, t}].insert(w);
        }
      } else {
        for (int x = 0; x < l.inputs; ++x) {
          auto w = static_cast<uint8_t>(l.weights[f * static_cast<size_t>(l.inputs) + static_cast<size_t>(x)]);
          out << fmt::format("table_add weight{0}_0 set_w{0}_0 {1} {2} => {3}\n", o, first, x, w);
          used[{o, 0}].insert(w);
        }
      }
    }
    if (downstream > 0)
      write_group(out, p + 1, end - first, port_range(pipelines * upstream + p * downstream, downstream), handle);
  }
  for (auto& [at, weights] : used)
    for (auto w : weights)
      for (int x = 0; x < 256; ++x)
        out << fmt::format("table_add product{0}_{1} set_p{0}_{1} {2} {3} => {4}\n", at.first, at.second, x, w,
                           static_cast<uint16_t>(product(static_cast<uint8_t>(x), static_cast<int8_t>(w))));
}

}  // namespace

void write_p4_entries(const model& m, const chain_plan& plan, int sw, std::ostream& out) {
  if (sw == 0) return write_feature_entries(m, plan, out);
  int at = 1;
  for (size_t i = 0; i < plan.layers.size(); ++i) {
    if (sw < at + plan.layers[i].switches) return write_layer_entries(m, plan, i, sw - at, out);
    at += plan.layers[i].switches;
  }
}

}  // namespace sloserve::netnn
