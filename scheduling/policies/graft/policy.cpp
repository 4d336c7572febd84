#include "scheduling/policies/graft/policy.hpp"

#include <algorithm>
#include <cmath>

#include "scheduling/policies/graft/epoch.hpp"

namespace sloserve::sched {

namespace {
class graft_policy final : public scheduling_policy {
 public:
  bool plans_least_cost() const override { return true; }
  expected<epoch_result> plan(const epoch_input& in, const epoch_result* previous) const override {
    return plan_graft_epoch(in, previous);
  }
  // A fragment (start layer, SLO) with a twentieth of its pipeline's queries that the plan has
  // no route for: its queries run the model's rest from where they start meanwhile.
  bool plan_outdated(const pipeline_rates& measured, const epoch_result& planned) const override {
    auto& routes = planned.fragment_routes;
    for (size_t pi = 0; pi < measured.pipelines.size(); ++pi)
      for (auto& f : measured.pipelines[pi].fragments) {
        if (f.share < 0.05) continue;
        if (std::none_of(routes.begin(), routes.end(), [&](auto& r) {
              return r.pipeline == pi && r.start == f.start && std::abs(r.slo_ms - f.slo_ms) < 1e-6;
            }))
          return true;
      }
    return false;
  }
};
}  // namespace

std::shared_ptr<const scheduling_policy> make_graft_policy() {
  return std::make_shared<graft_policy>();
}

}  // namespace sloserve::sched
