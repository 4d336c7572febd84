#pragma once
// What a higher priority's misses take from the lower ones, at one frontend, whatever the policy
// planned: the feedback half of priorities. A plan short of devices gives each pipeline a quota
// (sched::admission); static placement, Jellyfish's rounds and the scalers give none, and a plan
// that believed it fit can still leave a pipeline of high priority missing its SLO on devices it
// shares with lower ones. Every interval, a pipeline whose admitted queries missed their SLO more
// often than `miss_share` is hurt. Each pipeline of lower priority that shares a device with it
// (`set_sharing`, from the routing table) is then held to a limit: the least of `decrease` of
// what it was let in at and `plateau` of what was left for it (what the pipelines sharing its
// devices got through in time, less what the higher ones among them offer), not again in the
// interval after (whose outcomes show what came before the cut). While none above it is hurt,
// the limit grows by `increase` of what it is offered each interval up to that mark; past it, by
// `probe` once it has been calm for `hold_intervals`, and by `increase` at once when the higher
// ones offer 10% less than when it hurt them; it is lifted when it reaches what it is offered. What is above the
// limit is shed at once, with the reason. Pure and clocked by the caller; the frontend owns one.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "scheduling/interval_clock.hpp"

namespace sloserve::sched {

class priority_guard {
 public:
  struct options {
    double interval_s = 0.5;
    double miss_share = 0.005;     // hurt above this share of the interval's outcomes missed
    uint32_t min_outcomes = 20;    // and only with at least this many outcomes in the interval
    double decrease = 0.7;         // a held pipeline's limit: this share of what it was admitted at
    double increase = 0.05;        // a held pipeline's limit grows by this share of its offered rate an interval
    double plateau = 0.95;         // up to this share of what was left for it when it last hurt,
    uint32_t hold_intervals = 60;  // where it stays this many calm intervals (or until the higher
                                   // ones offer less),
    double probe = 0.01;           // then grows by this share of its offered rate an interval
  };

  priority_guard() : priority_guard(options{}) {}
  explicit priority_guard(options o) : o_(o), clock_(o.interval_s) {}

  // The pipelines: their names and priorities, and for each the pipelines that share a device
  // with it (from the routing table). Limits are lifted when the pipelines change; kept when only
  // the sharing does.
  void configure(std::vector<std::string> names, std::vector<int> priorities);
  void set_sharing(std::vector<std::vector<size_t>> sharing);
  // A query of pipeline `pi` admitted at `now_s` was answered, within its SLO or not.
  void on_outcome(size_t pi, bool within_slo, double now_s);
  // Whether a query of pipeline `pi` arriving at `now_s` is let in: empty when it is, the reason
  // of the shed otherwise.
  std::string admit(size_t pi, double now_s);
  // Pipeline `pi`'s limit (queries/s at this frontend); < 0: none.
  double limit(size_t pi) const { return pi < pipes_.size() ? pipes_[pi].limit : -1; }
  bool active() const { return differ_; }

 private:
  struct pipe {
    std::string name;
    int priority = 0;
    std::vector<size_t> sharing;
    // The current interval's counts, and the last closed interval's.
    uint32_t outcomes = 0, misses = 0, offered = 0, admitted = 0;
    double offered_rate = 0, admitted_rate = 0, miss_share = 0;
    uint32_t last_outcomes = 0;
    bool hurt = false;
    double limit = -1;
    double within_rate = 0;
    double ceiling = 0;        // what was left for it when it last hurt a higher one
    double above_at_hurt = 0;  // what the higher ones it shares with offered then
    uint32_t calm = 0;         // intervals since
    size_t held_by = 0;        // the hurt pipeline that last held it
    double tokens = 0, tokens_at = -1;
  };
  // Closes every interval up to `now_s`.
  void roll(double now_s);
  void close_interval(double span_s);

  options o_;
  interval_clock clock_;
  std::vector<pipe> pipes_;
  bool differ_ = false;
};

}  // namespace sloserve::sched
