#pragma once
// What `sloserve plan --policy ipa` prints: IPA at the given rates, as the scaler plans it: per
// pipeline, each stage's variant, batch and replicas (scheduling/ipa), and the scaler's instances
// placed on the cluster's device slots as a running cluster would.

#include <vector>

#include "scheduling/policies/policy.hpp"

namespace sloserve::sched {

// `cfg` with `scheduler.policy: ipa`; `rates` per pipeline.
expected<plan_report> ipa_report(const cluster_config& cfg, const std::vector<double>& rates);

}  // namespace sloserve::sched
