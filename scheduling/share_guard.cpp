#include "scheduling/share_guard.hpp"

#include <algorithm>

namespace sloserve::sched {

void share_guard::configure(std::vector<bool> guarded) {
  pipes_.assign(guarded.size(), pipe{});
  for (size_t i = 0; i < guarded.size(); ++i) pipes_[i].guarded = guarded[i];
  any_ = std::find(guarded.begin(), guarded.end(), true) != guarded.end();
  clock_.reset();
}

void share_guard::on_offered(size_t pi) {
  if (!any_ || pi >= pipes_.size() || !pipes_[pi].guarded) return;
  ++pipes_[pi].offered;
}

void share_guard::on_outcome(size_t pi, bool within_slo) {
  if (!any_ || pi >= pipes_.size() || !pipes_[pi].guarded) return;
  ++pipes_[pi].outcomes;
  if (!within_slo) ++pipes_[pi].misses;
}

bool share_guard::roll(double now_s) {
  return any_ && clock_.roll(now_s, [this](double span_s) { return close_interval(span_s); });
}

bool share_guard::close_interval(double span_s) {
  bool changed = false;
  for (auto& p : pipes_) {
    if (!p.guarded) continue;
    double offered = p.offered / span_s, within = (p.outcomes - p.misses) / span_s;
    double missed = p.outcomes ? static_cast<double>(p.misses) / p.outcomes : 0;
    bool enough = p.outcomes >= o_.min_outcomes;
    p.outcomes_closed = p.outcomes;
    p.offered = p.outcomes = p.misses = 0;
    if (p.rest > 0) {
      --p.rest;
      continue;
    }
    if (p.quota < 0) {
      // Nothing at all in time is not a load too high (a model that cannot meet its SLO, a
      // device that fails): no quota would help.
      if (!enough || missed <= o_.engage_share || within * span_s < 1) continue;
      p.quota = std::max(1.0, o_.plateau * within);
      p.floor = o_.floor * p.quota;
      p.missed_when_set = missed;
      p.cooling = true, p.calm = 0, changed = true;
      continue;
    }
    if (p.cooling) {  // what this interval answered was mostly let in before the cut
      p.cooling = false;
      continue;
    }
    // Held at a small quota, fewer outcomes say as much.
    bool held_enough = p.outcomes_closed >= std::max(1.0, std::min<double>(o_.min_outcomes, 0.5 * p.quota * span_s));
    if (held_enough && missed > o_.miss_share && missed >= o_.hopeless * p.missed_when_set) {
      // Held to what gets through and missing nearly as often as before: the misses are not the
      // load's (a slow or failing device). Lifted, and left alone for a while, longer each time.
      p.quota = -1, changed = true;
      p.rest = o_.rest_intervals << std::min<uint32_t>(p.rests++, 3);
      continue;
    }
    if (enough && missed > o_.miss_share) {
      p.quota = std::max(p.floor, o_.plateau * within);
      p.cooling = true, p.calm = 0, changed = true;
      continue;
    }
    if (offered < p.quota) {  // nothing above it to shed
      p.quota = -1, changed = true;
      continue;
    }
    if (++p.calm > o_.hold_intervals) p.quota *= 1 + o_.probe, changed = true;
  }
  return changed;
}

}  // namespace sloserve::sched
