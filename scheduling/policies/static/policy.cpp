#include "scheduling/policies/static/policy.hpp"

namespace sloserve::sched {

namespace {
class static_policy final : public scheduling_policy {
 public:
  bool plans_epochs() const override { return false; }
};
}  // namespace

std::shared_ptr<const scheduling_policy> make_static_policy() {
  return std::make_shared<static_policy>();
}

}  // namespace sloserve::sched
