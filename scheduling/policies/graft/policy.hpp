#pragma once
// Graft: fragments of partitioned models re-aligned onto GPU shares for the load it measures (epoch.hpp); plans again
// when a fragment of queries has no route.

#include <memory>

#include "scheduling/policies/policy.hpp"

namespace sloserve::sched {

std::shared_ptr<const scheduling_policy> make_graft_policy();

}  // namespace sloserve::sched
