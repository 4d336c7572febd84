#include "scheduling/drop_policy.hpp"

#include <algorithm>

namespace sloserve::sched {

batch_plan sliding_window_policy::plan(const deadline_fn& deadline, size_t size, time_point now, int target,
                                       const latency_fn& l) const {
  for (size_t i = 0; i < size; ++i) {
    auto w = std::min<size_t>(static_cast<size_t>(std::max(target, 1)), size - i);
    // The queue is in deadline order, so the window's first request has its tightest deadline.
    if (now + l(static_cast<int>(w)) <= deadline(i)) return {i, w};
  }
  return {size, 0};
}

namespace {
// Largest b in [1, cap] with now + l(b) <= d; 0 if none. l is non-decreasing in b.
size_t largest_fitting(time_point now, time_point d, size_t cap, const latency_fn& l) {
  size_t lo = 0, hi = cap;
  while (lo < hi) {
    auto mid = lo + (hi - lo + 1) / 2;
    if (now + l(static_cast<int>(mid)) <= d)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

size_t hopeless_prefix(const deadline_fn& deadline, size_t size, time_point now, const latency_fn& l) {
  size_t i = 0;
  auto single = l(1);
  while (i < size && now + single > deadline(i)) ++i;
  return i;
}
}  // namespace

batch_plan earliest_first_policy::plan(const deadline_fn& deadline, size_t size, time_point now, int target,
                                       const latency_fn& l) const {
  auto i = hopeless_prefix(deadline, size, now, l);
  if (i == size) return {size, 0};
  auto cap = std::min<size_t>(static_cast<size_t>(std::max(target, 1)), size - i);
  return {i, std::max<size_t>(1, largest_fitting(now, deadline(i), cap, l))};
}

batch_plan maximal_window_policy::plan(const deadline_fn& deadline, size_t size, time_point now, int target,
                                       const latency_fn& l) const {
  auto i = hopeless_prefix(deadline, size, now, l);
  if (i == size) return {size, 0};
  auto t = static_cast<size_t>(std::max(target, 1));
  batch_plan best{i, 0};
  // Starting later drops more; looking past a few windows never pays, so bound the scan.
  auto last = std::min(size, i + 4 * t);
  for (auto j = i; j < last; ++j) {
    auto cap = std::min(t, size - j);
    if (cap <= best.take) break;
    auto w = largest_fitting(now, deadline(j), cap, l);
    if (w > best.take) best = {j, w};
    if (best.take == t) break;
  }
  return best;
}

std::unique_ptr<drop_policy> make_drop_policy(drop_policy_kind kind) {
  switch (kind) {
    case drop_policy_kind::earliest_first:
      return std::make_unique<earliest_first_policy>();
    case drop_policy_kind::maximal_window:
      return std::make_unique<maximal_window_policy>();
    case drop_policy_kind::sliding_window:
      break;
  }
  return std::make_unique<sliding_window_policy>();
}

}  // namespace sloserve::sched
