#pragma once
// A frontend's guard on the path to each worker node. A reply's transit is its round trip less
// what the worker reports for its queue and its execution: the transport both ways and the
// frontend's own mailbox. Its base is the least transit of the last seconds (what the link takes
// when nothing queues); the rest is queueing. When the path holds a standing queue (even the
// least queueing of the replies of the last interval above a share of their budgets: a saturated
// link or host, a receiver that cannot keep up), every invocation sent joins it and arrives with
// its budget spent, so that the devices serve requests already late and none is answered in time.
// While the queue stands, an invocation goes only if Little's law leaves it time: the invocations
// in flight to the node over the rate its replies come back at is how long one takes; less the
// worker's own queue and execution of late and the base transit, what it would queue on the path,
// which must stay within a share of the time it has left. The rest are refused at once, with the
// reason, and the path drains to what it carries in time.

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>

namespace sloserve::sched {

class transit_guard {
 public:
  struct options {
    double interval_s = 0.1;      // the standing queue: the least transit of the replies in this window
    double standing_share = 0.2;  // standing while that least transit is above this share of their budgets
    double wait_share = 0.3;      // while standing: the path's wait by Little's law, within this share of the time left
    double rate_window_s = 0.5;   // the reply rate, over this window
    double base_window_s = 10;    // the base transit: the least of this window
  };

  transit_guard() = default;
  explicit transit_guard(options o) : o_(o) {}

  // A reply from `node` at `now_s` after a round trip of `round_s`, of which the worker reports
  // `worker_s` in its queue and executing, for an invocation that went with `budget_s` to its
  // deadline.
  void on_reply(const std::string& node, double now_s, double round_s, double worker_s, double budget_s);
  // Why an invocation to `node` with `left_s` to its deadline may not go at `now_s`, with
  // `in_flight` invocations outstanding there: the standing queue's figures; none when it may.
  struct backed_up {
    double transit_s;  // the least transit of the interval
    double base_s;     // the path's unloaded transit
    uint32_t in_flight;
    double rate;    // replies/s
    double wait_s;  // what it would queue on the path
  };
  std::optional<backed_up> congested(const std::string& node, double now_s, double left_s, uint32_t in_flight);
  // The same, said for a path to worker `node`; empty when it may go.
  std::string refusal(const std::string& node, double now_s, double left_s, uint32_t in_flight);
  // The path's standing one-way delay at `now_s` (half the least transit of the interval; 0 when
  // no reply came in it): what an invocation's budget loses before the worker takes it in.
  double one_way_s(const std::string& node, double now_s);
  // Whether the path to `node` holds a standing queue at `now_s`.
  bool standing(const std::string& node, double now_s);

 private:
  // The least of the values of the last window, in time order (a monotonic queue: O(1) a value).
  struct window_min {
    std::deque<std::pair<double, double>> q;  // (at, value), the values increasing
    void push(double at, double v);
    void trim(double from);
    bool empty() const { return q.empty(); }
    double least() const { return q.front().second; }
  };
  struct path {
    std::deque<std::pair<double, double>> recent;  // (at, the worker's time) of the interval's replies
    double worker_sum = 0;                         // of recent
    window_min transit;                            // the interval's least transit
    window_min queued;                             // the interval's least transit less standing_share of its budget
    std::deque<double> replies;                    // reply times in the rate window
    std::deque<std::pair<double, double>> bases;   // (second, least transit in it) in the base window
    double first_s = -1;                           // the first reply's time
    double base_s() const;
  };
  path& trimmed(const std::string& node, double now_s);
  options o_;
  std::unordered_map<std::string, path> paths_;
};

}  // namespace sloserve::sched
