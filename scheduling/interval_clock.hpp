#pragma once
// The intervals a frontend's guards count in, clocked by the caller's own events: an interval
// closes at the first event past its end; after a lull of four intervals or more, what came is
// closed as one interval of its whole span and the next starts afresh.

namespace sloserve::sched {

class interval_clock {
 public:
  explicit interval_clock(double interval_s) : interval_s_(interval_s) {}
  void reset() { start_ = -1; }
  // At `now_s`: calls `close(span_s)` for the interval that ended, if one did; returns what it
  // returned (false when none ended).
  template <class F>
  bool roll(double now_s, F&& close) {
    if (start_ < 0) start_ = now_s;
    if (now_s - start_ < interval_s_) return false;
    if (now_s - start_ >= 4 * interval_s_) {
      bool out = close(now_s - start_);
      start_ = now_s;
      return out;
    }
    bool out = close(interval_s_);
    start_ += interval_s_;
    return out;
  }

 private:
  double interval_s_;
  double start_ = -1;
};

}  // namespace sloserve::sched
