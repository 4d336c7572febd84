#pragma once
// A parallel_runner for planning (sched::epoch_input::parallel): fn(i) over all i, spread over
// the machine's cores in fixed strides, on threads that live for one call.

#include <algorithm>
#include <functional>
#include <thread>
#include <vector>

namespace sloserve {

inline void parallel_for(size_t n, const std::function<void(size_t)>& fn) {
  // Below a few dozen items a thread costs more than it saves.
  size_t threads = std::min<size_t>(std::max(1u, std::thread::hardware_concurrency()), n / 64 + 1);
  if (threads <= 1) {
    for (size_t i = 0; i < n; ++i) fn(i);
    return;
  }
  std::vector<std::thread> pool;
  for (size_t t = 0; t < threads; ++t)
    pool.emplace_back([&fn, n, threads, t] {
      for (size_t i = t; i < n; i += threads) fn(i);
    });
  for (auto& th : pool) th.join();
}

}  // namespace sloserve
