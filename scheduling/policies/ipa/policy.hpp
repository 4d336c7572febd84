#pragma once
// IPA: the scaler chooses each stage's variant and sizes its instances (scheduling/ipa.hpp); what epochs place packs as
// nexus.

#include <memory>

#include "scheduling/policies/policy.hpp"

namespace sloserve::sched {

std::shared_ptr<const scheduling_policy> make_ipa_policy();

}  // namespace sloserve::sched
