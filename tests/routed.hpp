#pragma once
// The instances a placement's table routes `model` to, as "NODE/DEVICE".

#include <string>
#include <vector>

#include "scheduling/placement.hpp"

namespace sloserve::testing {

inline std::vector<std::string> routed(const cluster_placement& p, const std::string& model) {
  std::vector<std::string> out;
  for (auto& r : p.table.routes)
    if (r.model == model)
      for (auto& i : r.instances) out.push_back(i.node + "/" + std::to_string(i.device));
  return out;
}

}  // namespace sloserve::testing
