#include "scheduling/policies/registry.hpp"

#include <map>
#include <mutex>
#include <stdexcept>

#include "scheduling/policies/batch_oblivious/policy.hpp"
#include "scheduling/policies/graft/policy.hpp"
#include "scheduling/policies/ipa/policy.hpp"
#include "scheduling/policies/jellyfish/policy.hpp"
#include "scheduling/policies/nexus/policy.hpp"
#include "scheduling/policies/piccolo/policy.hpp"
#include "scheduling/policies/static/policy.hpp"

namespace sloserve::sched {

namespace {

struct registry {
  std::mutex lock;
  std::map<std::string, std::shared_ptr<const scheduling_policy>, std::less<>> by_name;
};

registry& the_registry() {
  static registry r{{},
                    {
                        {"nexus", make_nexus_policy()},
                        {"batch-oblivious", make_batch_oblivious_policy()},
                        {"static", make_static_policy()},
                        {"ipa", make_ipa_policy()},
                        {"jellyfish", make_jellyfish_policy()},
                        {"piccolo", make_piccolo_policy()},
                        {"graft", make_graft_policy()},
                    }};
  return r;
}

}  // namespace

const scheduling_policy* find_policy(std::string_view name) {
  auto& r = the_registry();
  std::lock_guard g(r.lock);
  auto it = r.by_name.find(name);
  return it == r.by_name.end() ? nullptr : it->second.get();
}

const scheduling_policy& policy_of(scheduler_policy p) {
  auto* found = find_policy(knob_name(p));
  if (!found) throw std::logic_error("no scheduling policy registered as '" + std::string(knob_name(p)) + "'");
  return *found;
}

const scheduling_policy& policy_of(const scheduler_options& o) {
  if (o.policy_name.empty()) return policy_of(o.policy);
  auto* found = find_policy(o.policy_name);
  if (!found) throw std::logic_error("no scheduling policy registered as '" + o.policy_name + "'");
  return *found;
}

void register_policy(std::string name, std::shared_ptr<const scheduling_policy> policy) {
  accept_scheduler_policy(name, policy->config());
  auto& r = the_registry();
  std::lock_guard g(r.lock);
  r.by_name[std::move(name)] = std::move(policy);
}

std::vector<std::string> policy_names() {
  auto& r = the_registry();
  std::lock_guard g(r.lock);
  std::vector<std::string> out;
  for (auto& [name, p] : r.by_name) out.push_back(name);
  return out;
}

epoch_reason epoch_gate(const scheduling_policy& policy, const epoch_rule& rule, const pipeline_rates& measured,
                        const planned_load* planned, const epoch_result* plan, double since_s) {
  auto why = epoch_due(rule, measured, planned, since_s);
  if (why == epoch_reason::none && plan && since_s >= rule.min_epoch_s && policy.plan_outdated(measured, *plan))
    return epoch_reason::band;
  return why;
}

}  // namespace sloserve::sched
