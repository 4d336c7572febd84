#include "scheduling/policies/jellyfish/policy.hpp"

#include "scheduling/policies/jellyfish/config.hpp"
#include "scheduling/policies/jellyfish/rounds.hpp"

namespace sloserve::sched {

namespace {
class jellyfish_policy final : public scheduling_policy {
 public:
  std::shared_ptr<client_rounds> rounds(const cluster_config& cfg) const override {
    return std::make_shared<jellyfish::rounds>(cfg);
  }
  // Reported twice an interval, so that a round sees estimates at most half an interval old.
  client_tracking clients(const cluster_config& cfg) const override {
    auto& o = cfg.scheduler.section_as<jellyfish::options>();
    return {o.interval_ms / 2, o.uplink_quantile, o.miss_target, o.min_wait_share};
  }
  expected<plan_report> report(const cluster_config&, const epoch_input&) const override {
    return fail(
        "policy jellyfish maps clients on their uplinks, every interval while serving; there is no plan for "
        "pipeline rates to print (see the controller's log)");
  }
};
}  // namespace

std::shared_ptr<const scheduling_policy> make_jellyfish_policy() {
  return std::make_shared<jellyfish_policy>();
}

}  // namespace sloserve::sched
