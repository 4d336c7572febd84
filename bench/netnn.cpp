// NetNN in one run: the trained, quantized model of tools/netnn.py mapped onto switches (per
// layer the packets, operations per packet and memory, as the thesis's Table P6.1 lists them),
// packets per second through the emulated switch chain against the integer reference on the
// CPU, and the quantized model's accuracy on the test flows beside the float model's.
//
//   bench_netnn [DIR [P4DIR]]   DIR: what tools/netnn.py wrote (default: build/netnn); P4DIR: where
//                               to write the P4_16 programs of the mapping (one a switch role) and
//                               each switch's table entries and multicast groups (simple_switch_CLI
//                               commands, netnn_switchNN.txt)

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "gpu/netnn/dataset.hpp"
#include "gpu/netnn/p4.hpp"
#include "pipelines/write_file.hpp"

using namespace sloserve::netnn;

int main(int argc, char** argv) {
  std::string dir = argc > 1 ? argv[1] : "build/netnn";
  auto m = read_model(dir + "/model.json");
  auto flows = read_flows(dir + "/test.bin");
  std::ifstream meta_in(dir + "/meta.json");
  auto meta = nlohmann::json::parse(meta_in, nullptr, false);
  if (!m || !flows || meta.is_discarded()) {
    std::fprintf(stderr, "bench_netnn: %s\n", !m ? m.error().c_str() : !flows ? flows.error().c_str() : "meta.json");
    return 1;
  }
  switch_limits limits;
  auto plan = map_model(*m, limits);
  if (!plan) {
    std::fprintf(stderr, "bench_netnn: %s\n", plan.error().c_str());
    return 1;
  }
  std::printf("NetNN on %d switches (%d pipelines each, %d stages, %lld operations a packet at most)\n", plan->switches,
              limits.pipelines, limits.stages, static_cast<long long>(limits.ops_per_packet));
  std::printf("%-8s %9s %9s %12s %12s %12s %7s\n", "layer", "switches", "packets", "ops/packet", "weights B",
              "regs B/pipe", "stages");
  for (auto& c : plan->layers)
    std::printf("%-8s %9d %9llu %12lld %12lld %12lld %7d\n", c.name.c_str(), c.switches,
                static_cast<unsigned long long>(c.packets), static_cast<long long>(c.ops_per_packet),
                static_cast<long long>(c.weight_bytes), static_cast<long long>(c.register_bytes), c.stages);

  // Correctness and accuracy: every packet through the chain, each inference point checked
  // against the reference.
  switch_chain checked(*m, limits);
  auto s = run_flows(checked, *m, *flows, true);
  std::printf("test flows %llu, inference points %llu, logits differing from the reference %llu\n",
              static_cast<unsigned long long>(s.flows), static_cast<unsigned long long>(s.points),
              static_cast<unsigned long long>(s.mismatches));
  std::printf("accuracy        per packet   per flow (majority)\n");
  std::printf("float           %10.4f %10.4f\n", meta.value("float_packet_accuracy", 0.0),
              meta.value("float_flow_accuracy", 0.0));
  std::printf("quantized       %10.4f %10.4f   (switch chain)\n", s.packet_accuracy(), s.flow_accuracy());

  // Speed, side by side: the chain (every packet, inference points through the tiers) against
  // the reference alone on the same inference points' features.
  using clock = std::chrono::steady_clock;
  uint64_t packets = 0;
  for (auto& f : *flows) packets += f.packets.size();
  switch_chain timed(*m, limits);
  auto t0 = clock::now();
  auto r = run_flows(timed, *m, *flows, false);
  double chain_s = std::chrono::duration<double>(clock::now() - t0).count();
  std::vector<std::vector<uint8_t>> inputs;
  for (auto& f : *flows) {
    flow_state st;
    for (auto& p : f.packets)
      if (observe(st, p)) inputs.push_back(features(p, st));
  }
  t0 = clock::now();
  int64_t sink = 0;
  for (auto& x : inputs) sink += reference(*m, x)[0];
  double ref_s = std::chrono::duration<double>(clock::now() - t0).count();
  std::printf("chain: %llu packets in %.3f s, %.0f packets/s, %.0f inference points/s\n",
              static_cast<unsigned long long>(packets), chain_s, packets / chain_s, r.points / chain_s);
  std::printf("reference on the CPU: %zu inference points in %.3f s, %.0f points/s (checksum %lld)\n", inputs.size(),
              ref_s, inputs.size() / ref_s, static_cast<long long>(sink));
  std::printf("ratio chain / reference, inference points per second: %.3f\n",
              (r.points / chain_s) / (inputs.size() / ref_s));
  if (argc > 2) {
    for (auto& p : emit_p4(*m, *plan, limits)) {
      auto path = std::string(argv[2]) + "/netnn_" + p.name + ".p4";
      if (auto written = sloserve::write_file(path, p.source); !written) {
        std::fprintf(stderr, "bench_netnn: %s\n", written.error().c_str());
        return 1;
      }
      std::printf("wrote %s (switches %d-%d)\n", path.c_str(), p.first_switch, p.first_switch + p.switches - 1);
    }
    // Each switch's table entries and multicast groups (simple_switch_CLI commands).
    uint64_t commands = 0;
    for (int sw = 0; sw < plan->switches; ++sw) {
      std::ostringstream out;
      write_p4_entries(*m, *plan, sw, out);
      auto text = out.str();
      commands += static_cast<uint64_t>(std::count(text.begin(), text.end(), '\n'));
      if (auto written = sloserve::write_file(fmt::format("{}/netnn_switch{:02d}.txt", argv[2], sw), text); !written) {
        std::fprintf(stderr, "bench_netnn: %s\n", written.error().c_str());
        return 1;
      }
    }
    std::printf("wrote %s/netnn_switch00.txt-%02d.txt: %llu commands\n", argv[2], plan->switches - 1,
                static_cast<unsigned long long>(commands));
  }
  return s.mismatches == 0 ? 0 : 2;
}
