#pragma once
// Graft as a scheduler epoch (`scheduler.policy: graft`): every pipeline is one stage on a
// partitioned model (models[].layers); its queries, counted by where they start and their SLO,
// are Graft's fragments <p, t, q>. Each is split into its clients' equal parts, merged while the
// margin stays above theta, grouped and re-aligned (scheduling/policies/graft/fragments.hpp). Every stage of the
// plan runs layers [a, b) as the fragment model "BASE[a,b)" on devices (instances) of its own at
// the share it was planned with, bound to the free slot with the least share that is as large;
// each fragment's route lists its stages in turn with their budgets.

#include "pipelines/expected.hpp"
#include "scheduling/epoch.hpp"
#include "scheduling/policies/graft/fragments.hpp"

namespace sloserve::sched {

// Graft's latency model of partitioned `m`: l([a, b), batch, share) is the sum of its layers'
// profiles, slowed for the share (model_spec::share_slowdown); shares are `shares`.
graft::model graft_model(const model_spec& m, std::vector<double> shares);

expected<epoch_result> plan_graft_epoch(const epoch_input& in, const epoch_result* previous);

}  // namespace sloserve::sched
