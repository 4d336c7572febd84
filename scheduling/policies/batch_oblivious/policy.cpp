#include "scheduling/policies/batch_oblivious/policy.hpp"

namespace sloserve::sched {

namespace {
class batch_oblivious_policy final : public scheduling_policy {
 public:
  std::unique_ptr<planner> packer() const override { return std::make_unique<batch_oblivious_planner>(); }

 protected:
  bool searches_neighbours() const override { return false; }
};
}  // namespace

std::shared_ptr<const scheduling_policy> make_batch_oblivious_policy() {
  return std::make_shared<batch_oblivious_policy>();
}

}  // namespace sloserve::sched
