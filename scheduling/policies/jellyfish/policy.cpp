#include "scheduling/policies/jellyfish/policy.hpp"

namespace sloserve::sched {

namespace {
class jellyfish_policy final : public scheduling_policy {
 public:
  bool maps_clients() const override { return true; }
};
}  // namespace

std::shared_ptr<const scheduling_policy> make_jellyfish_policy() {
  return std::make_shared<jellyfish_policy>();
}

}  // namespace sloserve::sched
