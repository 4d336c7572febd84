#pragma once
// One session's requests on one device, kept in deadline order. A vector, not a deque: an empty
// one holds no memory (libstdc++'s deque allocates on construction), and a placement may hold
// millions of sessions that never see a request (every model on every device of a large fleet,
// before the first plan); queues stay short enough that taking from the front is cheap.

#include <algorithm>
#include <utility>
#include <vector>

#include "scheduling/drop_policy.hpp"

namespace sloserve::sched {

template <class T>
class session_queue {
 public:
  struct entry {
    time_point deadline;
    T item;
  };

  void push(time_point deadline, T item) {
    // Deadlines mostly arrive in order, so search from the back.
    auto it =
        std::upper_bound(q_.begin(), q_.end(), deadline, [](time_point d, const entry& e) { return d < e.deadline; });
    q_.insert(it, entry{deadline, std::move(item)});
  }

  size_t size() const { return q_.size(); }
  bool empty() const { return q_.empty(); }
  time_point front_deadline() const { return q_.front().deadline; }

  // A session that waits for `collect` queued before its batch starts (0: it does not wait):
  // when its next batch may start, given l(collect). At once (`now`) with `collect` queued, else
  // when the most urgent request could wait no longer (its deadline less l(collect)).
  // With `fill` > 0 (the time a batch takes to fill at the planned rate), a wait also ends once
  // the oldest (come at `oldest_since`) has waited half again as long (the stream is slower than
  // planned), or once nothing has come for a tenth of it since `last_arrival` (it stopped).
  time_point start_at(time_point now, size_t collect, std::chrono::nanoseconds l_collect, time_point oldest_since = {},
                      time_point last_arrival = {}, std::chrono::nanoseconds fill = {}) const {
    if (collect == 0 || q_.empty() || q_.size() >= collect) return now;
    auto at = q_.front().deadline - l_collect;
    if (fill.count() > 0) at = std::min({at, oldest_since + fill * 3 / 2, last_arrival + fill / 10});
    return std::max(now, at);
  }
  const T& front() const { return q_.front().item; }

  // Padding (dummies) never displaces work: while more than `keep` are queued, removes the
  // entries `padding` picks, most urgent first, appending them to `removed`.
  template <class Pred>
  void shed_padding(size_t keep, Pred padding, std::vector<entry>& removed) {
    for (auto it = q_.begin(); it != q_.end() && q_.size() > keep;)
      if (padding(it->item))
        removed.push_back(std::move(*it)), it = q_.erase(it);
      else
        ++it;
  }

  // Applies `policy`; appends dropped requests to `dropped` and the batch to `batch`.
  void form_batch(const drop_policy& policy, time_point now, int target, const latency_fn& l, std::vector<entry>& batch,
                  std::vector<entry>& dropped) {
    auto p = policy.plan([this](size_t i) { return q_[i].deadline; }, q_.size(), now, target, l);
    for (size_t i = 0; i < p.drop; ++i) dropped.push_back(std::move(q_[i]));
    for (size_t i = p.drop; i < p.drop + p.take; ++i) batch.push_back(std::move(q_[i]));
    q_.erase(q_.begin(), q_.begin() + static_cast<std::ptrdiff_t>(p.drop + p.take));
  }

  // The time left to their deadlines at `now`, in ms, of the first `max` requests (EDF order):
  // what Sponge's per-request check takes.
  std::vector<double> budgets_ms(time_point now, size_t max) const {
    std::vector<double> out;
    for (size_t i = 0; i < q_.size() && i < max; ++i)
      out.push_back(std::chrono::duration<double, std::milli>(q_[i].deadline - now).count());
    return out;
  }

  // Removes every request; used when a device shuts down.
  std::vector<entry> take_all() { return std::exchange(q_, {}); }

 private:
  std::vector<entry> q_;
};

// The time left to their deadlines on arrival of a session's latest requests (at most
// `capacity`), reported and begun again with each load report.
class budget_sample {
 public:
  static constexpr size_t capacity = 256;
  void add(double ms) {
    if (ring_.size() < capacity)
      ring_.push_back(ms);
    else
      ring_[next_++ % capacity] = ms;
  }
  std::vector<double> take() {
    next_ = 0;
    return std::exchange(ring_, {});
  }

 private:
  std::vector<double> ring_;
  size_t next_ = 0;
};

}  // namespace sloserve::sched
