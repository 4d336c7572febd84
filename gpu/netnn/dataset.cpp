#include "gpu/netnn/dataset.hpp"

#include <cstring>
#include <fstream>
#include <sstream>

namespace sloserve::netnn {

expected<model> read_model(const std::string& path) {
  std::ifstream in(path);
  if (!in) return fail(path + ": cannot be read");
  std::stringstream text;
  text << in.rdbuf();
  return parse_model(text.str(), path);
}

expected<std::vector<flow_trace>> read_flows(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return fail(path + ": cannot be read");
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (bytes.size() % record_bytes != 0)
    return fail(path + ": " + std::to_string(bytes.size()) + " bytes is not a whole number of " +
                std::to_string(record_bytes) + "-byte records");
  std::vector<flow_trace> flows;
  uint64_t last = 0;
  for (size_t at = 0; at < bytes.size(); at += record_bytes) {
    auto* record = reinterpret_cast<const uint8_t*>(bytes.data() + at);
    auto p = packet_of(record);
    int label = record[packet_bytes];
    auto key = flow_key(p);
    if (flows.empty() || key != last) flows.push_back({{}, label});
    last = key;
    flows.back().packets.push_back(p);
  }
  return flows;
}

score run_flows(switch_chain& chain, const model& m, const std::vector<flow_trace>& flows, bool check) {
  score s;
  for (auto& f : flows) {
    flow_state mirror;
    std::optional<verdict> final;
    for (auto& p : f.packets) {
      bool point = check && observe(mirror, p);
      auto v = chain.process(p);
      if (!v) continue;
      ++s.points;
      s.points_right += v->label == f.label;
      if (point && v->logits != reference(m, features(p, mirror))) ++s.mismatches;
      final = std::move(v);
    }
    if (!final) continue;
    ++s.flows;
    s.flows_right += final->majority == f.label;
  }
  return s;
}

}  // namespace sloserve::netnn
