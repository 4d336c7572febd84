#include "scheduling/policies/ipa/policy.hpp"

#include "scheduling/policies/ipa/report.hpp"

namespace sloserve::sched {

namespace {
// Its choices are the scaler's (scheduler: {policy: ipa} runs the scaler's ipa policy): epochs,
// where a caller plans one, pack as nexus.
class ipa_policy final : public scheduling_policy {
 public:
  // What the scaler would run at these rates.
  expected<plan_report> report(const cluster_config& cfg, const epoch_input& in) const override {
    auto ipa_cfg = cfg;
    ipa_cfg.scheduler.policy = scheduler_policy::ipa;
    return ipa_report(ipa_cfg, in.rates);
  }
};
}  // namespace

std::shared_ptr<const scheduling_policy> make_ipa_policy() {
  return std::make_shared<ipa_policy>();
}

}  // namespace sloserve::sched
