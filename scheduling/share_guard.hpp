#pragma once
// What a pipeline with tenants carries in time at one frontend when no plan gives it a quota:
// the feedback half of tenants' shares. A plan short of devices gives each pipeline a quota that
// the frontend splits among the tenants by priority and weight (sched::admission); static
// placement, Jellyfish's rounds and the scalers plan none, and without a quota a device's early
// drop, not the tenants' weights, would decide who is served. Every interval, a pipeline whose
// answered queries missed their SLO more often than `engage_share`, some in time, is over what it carries: it is
// given a quota of `plateau` of what got through in time, which the admission splits among its
// tenants. While the quota holds, a miss share above `miss_share` cuts it again to `plateau` of
// what got through (not below `floor` of where it began: misses that are not the load's do not
// wear it away), not again in the interval after (whose outcomes show what came before the cut);
// one still missing `hopeless` as often as when the quota was set is not missing for its load
// (a slow or failing device), and is lifted and left alone for `rest_intervals`. After
// `hold_intervals` calm ones it grows by `probe` of itself an interval (a device added, a surge
// over); it is lifted once the pipeline is offered less than it. Pure and clocked by the
// caller; the frontend owns one.

#include <cstddef>
#include <cstdint>
#include <vector>

#include "scheduling/interval_clock.hpp"

namespace sloserve::sched {

class share_guard {
 public:
  struct options {
    double interval_s = 0.5;
    uint32_t min_outcomes = 20;  // an interval with fewer outcomes says nothing
    double engage_share = 0.05;  // a quota is set above this share of the outcomes missed,
    double miss_share = 0.01;    // and cut again above this one
    double plateau = 0.95;       // of what got through in time
    double floor = 0.8;          // of the rate it got through when the quota was set
    uint32_t hold_intervals = 4;
    double probe = 0.02;
    double hopeless = 0.5;         // held and still missing this share as often as when it was
                                   // set: not the load's misses;
    uint32_t rest_intervals = 20;  // lifted, and not set again for this many intervals (twice
                                   // that the next time, up to 8 times)
  };

  share_guard() : share_guard(options{}) {}
  explicit share_guard(options o) : o_(o), clock_(o.interval_s) {}

  // `guarded[pi]`: whether pipeline `pi` is watched (it has tenants to share among). Quotas are
  // lifted.
  void configure(std::vector<bool> guarded);
  // Closes the interval that ended by `now_s`, if one did; true when a quota changed. The caller
  // rolls to the time of each event before it counts it.
  bool roll(double now_s);
  // A query of pipeline `pi` arrived (within its tenant's cap).
  void on_offered(size_t pi);
  // An admitted query of pipeline `pi` was answered, within its SLO or not.
  void on_outcome(size_t pi, bool within_slo);
  // Pipeline `pi`'s quota at this frontend (queries/s); < 0: none.
  double quota(size_t pi) const { return pi < pipes_.size() ? pipes_[pi].quota : -1; }
  size_t size() const { return pipes_.size(); }

 private:
  struct pipe {
    bool guarded = false;
    uint32_t offered = 0, outcomes = 0, misses = 0;  // in the current interval
    uint32_t outcomes_closed = 0;                    // in the interval just closed
    double quota = -1;
    double floor = 0;      // the least the quota is cut to
    bool cooling = false;  // the interval after a cut
    uint32_t calm = 0;
    uint32_t rest = 0;   // intervals left before a quota may be set again
    uint32_t rests = 0;  // how often it has been lifted so
    double missed_when_set = 0;
  };
  // Closes one interval of `span_s`; true when a quota changed.
  bool close_interval(double span_s);

  options o_;
  interval_clock clock_;
  std::vector<pipe> pipes_;
  bool any_ = false;
};

}  // namespace sloserve::sched
