#pragma once
// What `sloserve plan --policy piccolo` prints: Piccolo at the given rates, as a cluster with
// `scheduler.policy: piccolo` plans it: per pipeline, each stage's budget and configuration set
// over the cluster's device types, its dummies and cost; then what the sets need of each type
// against what the cluster has (scarce types weigh more while planning).

#include "scheduling/policies/policy.hpp"

namespace sloserve::sched {

expected<plan_report> piccolo_report(const cluster_config& cfg, const epoch_input& in);

}  // namespace sloserve::sched
