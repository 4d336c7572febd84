#pragma once
// The scheduling policies by name (`scheduler.policy`): the built-in ones, one line each in
// registry.cpp, and any registered beside them.

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "config/cluster_config.hpp"
#include "config/knobs.hpp"
#include "scheduling/policies/policy.hpp"

namespace sloserve::sched {

// The policy registered as `name`; null when none is.
const scheduling_policy* find_policy(std::string_view name);
// The built-in policy `p` (its name is the knob's).
const scheduling_policy& policy_of(scheduler_policy p);
// The policy a file's `scheduler:` names (a registered one, else the built-in).
const scheduling_policy& policy_of(const scheduler_options& o);
// Registers `policy` as `name`, in place of one of that name; cluster files may name it from then on.
void register_policy(std::string name, std::shared_ptr<const scheduling_policy> policy);
// Every name registered, in order.
std::vector<std::string> policy_names();

}  // namespace sloserve::sched
