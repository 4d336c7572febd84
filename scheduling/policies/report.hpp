#pragma once
// What `sloserve plan` prints for the policies whose epochs place sessions on devices (the default
// of scheduling_policy::report): per pipeline each stage's model and budget, the sessions, each
// device's sessions and occupancy, and the cost (price x occupancy). A policy with more to say
// (Graft's fragments) adds to the JSON and the text.

#include <nlohmann/json.hpp>
#include <string>

#include "scheduling/policies/policy.hpp"

namespace sloserve::sched {

struct packed_report {
  epoch_input in;  // as planned: with variants, those chosen for the cluster's memory
  epoch_result result;
  nlohmann::json json;
};

// Plans `in` with `policy` and describes the plan.
expected<packed_report> report_packed(const scheduling_policy& policy, const cluster_config& cfg, epoch_input in);
// The text of report_packed's JSON for a terminal.
std::string packed_text(const nlohmann::json& j);

}  // namespace sloserve::sched
