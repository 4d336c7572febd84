#pragma once
// Static: no epochs; every device runs every model it may, as the file places them (sloserve plan packs it as nexus).

#include <memory>

#include "scheduling/policies/policy.hpp"

namespace sloserve::sched {

std::shared_ptr<const scheduling_policy> make_static_policy();

}  // namespace sloserve::sched
