#pragma once
// Nexus: the DP's split of each pipeline's SLO (and its neighbours), sessions packed by batch-aware squishy bin
// packing; the default.

#include <memory>

#include "scheduling/policies/policy.hpp"

namespace sloserve::sched {

std::shared_ptr<const scheduling_policy> make_nexus_policy();

}  // namespace sloserve::sched
