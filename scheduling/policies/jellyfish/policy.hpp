#pragma once
// Jellyfish: the controller maps clients to instances in rounds of its own, from the uplinks frontends report; no
// epochs beside them (what `sloserve plan` places packs as nexus).

#include <memory>

#include "scheduling/policies/policy.hpp"

namespace sloserve::sched {

std::shared_ptr<const scheduling_policy> make_jellyfish_policy();

}  // namespace sloserve::sched
