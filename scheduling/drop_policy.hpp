#pragma once
// Batch formation with early drop over a deadline-ordered queue (thesis 002 §3.5.1).
// Every policy drops a prefix of the queue and takes the next `take` requests as the batch.

#include <chrono>
#include <functional>
#include <memory>
#include <string_view>
#include <vector>

#include "config/knobs.hpp"

namespace sloserve::sched {

using time_point = std::chrono::steady_clock::time_point;
using nanos = std::chrono::nanoseconds;
// l(b): how long a batch of b runs.
using latency_fn = std::function<nanos(int)>;
// Deadline of the i-th queued request; non-decreasing in i.
using deadline_fn = std::function<time_point(size_t)>;

struct batch_plan {
  size_t drop = 0;  // requests at the front answered DROPPED
  size_t take = 0;  // requests after those that form the batch
};

class drop_policy {
 public:
  virtual ~drop_policy() = default;
  virtual std::string_view name() const = 0;
  // `size` queued requests, batch at most `target`, starting at `now`.
  virtual batch_plan plan(const deadline_fn& deadline, size_t size, time_point now, int target,
                          const latency_fn& l) const = 0;
};

// Nexus early drop: slide a window of the target size; stop at the first request that meets its
// deadline if the window's batch starts now.
class sliding_window_policy final : public drop_policy {
 public:
  std::string_view name() const override { return "sliding_window"; }
  batch_plan plan(const deadline_fn&, size_t, time_point, int, const latency_fn&) const override;
};

// Clipper: drop what cannot make it even alone; the batch is the largest that fits the oldest
// request's remaining time.
class earliest_first_policy final : public drop_policy {
 public:
  std::string_view name() const override { return "earliest_first"; }
  batch_plan plan(const deadline_fn&, size_t, time_point, int, const latency_fn&) const override;
};

// The largest window whose latency fits every deadline in it.
class maximal_window_policy final : public drop_policy {
 public:
  std::string_view name() const override { return "maximal_window"; }
  batch_plan plan(const deadline_fn&, size_t, time_point, int, const latency_fn&) const override;
};

// The policy of runtime.drop_policy.
std::unique_ptr<drop_policy> make_drop_policy(drop_policy_kind kind);

}  // namespace sloserve::sched
