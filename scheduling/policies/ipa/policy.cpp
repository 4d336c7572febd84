#include "scheduling/policies/ipa/policy.hpp"

namespace sloserve::sched {

namespace {
// Its choices are the scaler's (scheduler: {policy: ipa} runs the scaler's ipa policy): epochs,
// where a caller plans one, pack as nexus.
class ipa_policy final : public scheduling_policy {};
}  // namespace

std::shared_ptr<const scheduling_policy> make_ipa_policy() {
  return std::make_shared<ipa_policy>();
}

}  // namespace sloserve::sched
