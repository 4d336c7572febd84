#pragma once
// From a cluster file and an epoch's plan to what nodes receive: the devices a plan may use,
// routing tables for frontends and schedules for workers.

#include <map>
#include <string>
#include <vector>

#include "config/cluster_config.hpp"
#include "messages/types.hpp"
#include "scheduling/epoch.hpp"

namespace sloserve {

// Every device of every worker node, in config order.
std::vector<sched::device_slot> device_slots(const cluster_config& cfg);

// Instances per model weighted by the rate each takes, and the epoch's stage budgets.
msg::routing_table routing_from(const cluster_config& cfg, const sched::epoch_input& in,
                                const sched::epoch_result& r, uint64_t epoch);

// Per worker node: each of its devices with the sessions it runs (none when unused).
std::map<std::string, msg::schedule> schedules_from(const cluster_config& cfg, const sched::epoch_input& in,
                                                    const sched::epoch_result& r, uint64_t epoch);

}  // namespace sloserve
