#pragma once
// IPA's part of the cluster file (`scheduler: {policy: ipa, ipa: {...}}`).

#include "config/policy_config.hpp"

namespace sloserve::sched::ipa {

// Every `interval_s` each pipeline's variant, batch and replicas per stage are chosen anew to
// maximise alpha * accuracy - beta * cores - delta * sum of batches (scheduling/ipa.hpp).
struct options {
  double alpha = 1;
  double beta = 0.01;
  double delta = 0.0001;
  double interval_s = 10;
  // Base allocations (thesis P3.1): with th > 0, each variant with `cores:` gets as R the fewest
  // cores at which one replica serves th requests/s at its largest batch within its stage's SLA
  // (control/ipa_problem.cpp, `apply_base_allocation`); 0: the models' `base_cores`.
  double base_rps = 0;
};

// Its section, and its demand on the scaler: IPA's choices are realised as the scaler's
// instances, so the scaler's policy becomes ipa, and no other may run beside it.
policy_config config();

}  // namespace sloserve::sched::ipa
