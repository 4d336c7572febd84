#pragma once
// The order in which a device offers its sessions a batch: round robin from the cursor `next`,
// and where the sessions serve pipelines of different priorities (`priority`, per session), the
// higher first, round robin within one (Nexus's device round-robin, with priorities on top: a
// lower priority's queue never holds the device while a higher one's waits). The device actor
// and the simulator's devices both read it.

#include <algorithm>
#include <cstddef>
#include <vector>

namespace sloserve::sched {

inline void turn_order(size_t next, const std::vector<int>& priority, std::vector<size_t>& order) {
  size_t n = priority.size();
  order.resize(n);
  for (size_t k = 0; k < n; ++k) order[k] = (next + k) % n;
  if (n > 1 && std::any_of(priority.begin(), priority.end(), [&](int p) { return p != priority.front(); }))
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return priority[a] > priority[b]; });
}

}  // namespace sloserve::sched
