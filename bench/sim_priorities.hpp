#pragma once

namespace sloserve::bench {

// bench_sim priorities: the high pipeline's attainment and the low one's goodput at twice the
// capacity under each policy that plans, against the static placement with the devices' order.
void priorities(bool quick);

}  // namespace sloserve::bench
