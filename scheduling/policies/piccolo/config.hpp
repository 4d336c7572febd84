#pragma once
// Piccolo's part of the cluster file (`scheduler: {policy: piccolo, piccolo: {...}}`), and its
// demands on the rest.

#include "config/policy_config.hpp"
#include "scheduling/policies/piccolo/options.hpp"

namespace sloserve::sched::piccolo {

// It gives every machine one stage's model at one configuration, and owns the devices: no
// scaler beside it, and no cascades.
policy_config config();

}  // namespace sloserve::sched::piccolo
