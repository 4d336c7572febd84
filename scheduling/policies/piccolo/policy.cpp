#include "scheduling/policies/piccolo/policy.hpp"

#include "scheduling/policies/piccolo/epoch.hpp"

namespace sloserve::sched {

namespace {
class piccolo_policy final : public scheduling_policy {
 public:
  bool plans_least_cost() const override { return true; }
  expected<epoch_result> plan(const epoch_input& in, const epoch_result* previous) const override {
    return plan_piccolo_epoch(in, previous);
  }
};
}  // namespace

std::shared_ptr<const scheduling_policy> make_piccolo_policy() {
  return std::make_shared<piccolo_policy>();
}

}  // namespace sloserve::sched
