#pragma once
// Piccolo: the least-cost configuration of machines for the load it measures (epoch.hpp), nothing planned before there
// is load.

#include <memory>

#include "scheduling/policies/policy.hpp"

namespace sloserve::sched {

std::shared_ptr<const scheduling_policy> make_piccolo_policy();

}  // namespace sloserve::sched
