#pragma once
// What bench/planners' sections share (bench/planners.cpp, bench/planners_served.cpp).

#include <limits>
#include <string>
#include <vector>

#include "config/cluster_config.hpp"

namespace sloserve::planners_bench {

// The cluster file `yaml`, parsed; exits with its errors when it has any.
cluster_config parse(const std::string& yaml);

// plan_epoch's plan, priced: each device at its slot's type, one no slot took at the dearest.
struct priced {
  double cost = std::numeric_limits<double>::infinity();
  size_t devices = 0;
  size_t missing = 0;  // devices no slot was left for
};
priced epoch_cost(const cluster_config& cfg, const std::vector<double>& rates, scheduler_policy policy);

// Each policy's plan served by an in-process node (bench/planners_served.cpp).
void served();

}  // namespace sloserve::planners_bench
