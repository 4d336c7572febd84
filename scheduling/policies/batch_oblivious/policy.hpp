#pragma once
// Batch-oblivious: the baseline Nexus is measured against; each session on devices of its own at its best batch, the
// DP's split as it is.

#include <memory>

#include "scheduling/policies/policy.hpp"

namespace sloserve::sched {

std::shared_ptr<const scheduling_policy> make_batch_oblivious_policy();

}  // namespace sloserve::sched
