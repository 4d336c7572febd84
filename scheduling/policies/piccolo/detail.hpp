#pragma once
// What Piccolo's planning files share (configurations.cpp, app.cpp, brute_force.cpp).

#include <algorithm>
#include <limits>
#include <vector>

#include "scheduling/policies/piccolo/configurations.hpp"

namespace sloserve::sched::piccolo::detail {

constexpr double eps = 1e-9;
constexpr double inf = std::numeric_limits<double>::infinity();
constexpr int chain_grid = 60;  // steps of the SLO the chain split searches

// The largest worst case over `machines`.
inline double worst_case(const std::vector<config>& configs, const std::vector<machine>& machines) {
  auto w = worst_cases(configs, machines);
  return w.empty() ? 0 : *std::max_element(w.begin(), w.end());
}

}  // namespace sloserve::sched::piccolo::detail
