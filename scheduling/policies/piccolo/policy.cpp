#include "scheduling/policies/piccolo/policy.hpp"

#include "scheduling/policies/piccolo/epoch.hpp"
#include "scheduling/policies/piccolo/options.hpp"
#include "scheduling/policies/piccolo/report.hpp"

namespace sloserve::sched {

namespace {
class piccolo_policy final : public scheduling_policy {
 public:
  bool plans_least_cost() const override { return true; }
  expected<epoch_result> plan(const epoch_input& in, const epoch_result* previous) const override {
    return plan_piccolo_epoch(in, previous);
  }
  // Throughput-cost dispatch: machines fill in the order the plan takes them, most cost-efficient
  // first, each with whole batches up to what its budget allows.
  // (`runtime_balancer`: the file's balancer instead, the baseline.)
  std::unique_ptr<balancer> dispatcher(balancer_kind configured, const std::any& options) const override {
    auto* o = std::any_cast<piccolo::options>(&options);
    if (o && o->runtime_balancer) return make_balancer(configured);
    return std::make_unique<fill_balancer>();
  }
  bool whole_batches(const std::any& options) const override {
    auto* o = std::any_cast<piccolo::options>(&options);
    return o && o->whole_batches;
  }
  bool central_dispatch(const std::any& options) const override {
    auto* o = std::any_cast<piccolo::options>(&options);
    return o && o->whole_batches && o->central_dispatch;
  }
  // Per stage, its configuration set over the device types, dummies and cost.
  expected<plan_report> report(const cluster_config& cfg, const epoch_input& in) const override {
    return piccolo_report(cfg, in);
  }
};
}  // namespace

std::shared_ptr<const scheduling_policy> make_piccolo_policy() {
  return std::make_shared<piccolo_policy>();
}

}  // namespace sloserve::sched
