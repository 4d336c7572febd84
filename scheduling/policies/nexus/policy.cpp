#include "scheduling/policies/nexus/policy.hpp"

namespace sloserve::sched {

namespace {
class nexus_policy final : public scheduling_policy {};
}  // namespace

std::shared_ptr<const scheduling_policy> make_nexus_policy() {
  return std::make_shared<nexus_policy>();
}

}  // namespace sloserve::sched
