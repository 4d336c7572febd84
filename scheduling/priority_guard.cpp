#include "scheduling/priority_guard.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace sloserve::sched {

void priority_guard::configure(std::vector<std::string> names, std::vector<int> priorities) {
  pipes_.assign(names.size(), pipe{});
  for (size_t i = 0; i < names.size(); ++i) {
    pipes_[i].name = std::move(names[i]);
    pipes_[i].priority = i < priorities.size() ? priorities[i] : 0;
  }
  differ_ = std::any_of(pipes_.begin(), pipes_.end(), [&](auto& p) { return p.priority != pipes_.front().priority; });
  clock_.reset();
}

void priority_guard::set_sharing(std::vector<std::vector<size_t>> sharing) {
  for (size_t i = 0; i < pipes_.size(); ++i)
    pipes_[i].sharing = i < sharing.size() ? std::move(sharing[i]) : std::vector<size_t>{};
}

void priority_guard::roll(double now_s) {
  clock_.roll(now_s, [this](double span_s) { return close_interval(span_s), true; });
}

void priority_guard::close_interval(double span_s) {
  for (auto& p : pipes_) {
    p.offered_rate = p.offered / span_s;
    p.admitted_rate = p.admitted / span_s;
    p.within_rate = (p.outcomes - p.misses) / span_s;
    p.miss_share = p.outcomes ? static_cast<double>(p.misses) / p.outcomes : 0;
    p.last_outcomes = p.outcomes;
    p.hurt = p.outcomes >= o_.min_outcomes && p.miss_share > o_.miss_share;
    p.outcomes = p.misses = p.offered = p.admitted = 0;
  }
  for (auto& p : pipes_) {
    // Of the pipelines it shares a device with: the highest that is hurt, what those above it
    // offer, and what all of them and it got through in time.
    const pipe* by = nullptr;
    double above = 0, through = p.within_rate;
    for (auto h : p.sharing) {
      auto& o = pipes_[h];
      through += o.within_rate;
      if (o.priority <= p.priority) continue;
      above += o.offered_rate;
      if (o.hurt && (!by || o.priority > by->priority)) by = &o;
    }
    bool cooling = p.calm == 0 && p.limit >= 0;  // the interval after a decrease shows what came before it
    if (by && cooling) {
      ++p.calm;  // neither held lower nor let grow yet
      continue;
    }
    if (by) {
      // What it was let in at is too much beside the higher ones. Their devices were saturated:
      // what all got through in time, less what the higher ones offer, is what is left for it.
      double base = p.limit >= 0 ? std::min(p.limit, p.admitted_rate) : p.admitted_rate;
      if (p.limit < 0) p.tokens = 0, p.tokens_at = -1;
      p.ceiling = std::min(base, std::max(0.0, through - above));
      p.limit = std::min(o_.decrease * base, o_.plateau * p.ceiling);
      p.above_at_hurt = above;
      p.calm = 0;
      p.held_by = static_cast<size_t>(by - pipes_.data());
      continue;
    }
    if (p.limit < 0) continue;
    ++p.calm;
    // The higher ones offer less than when it last hurt them, or it has been calm long: what
    // was left then no longer bounds it.
    bool eased = above < 0.9 * p.above_at_hurt, long_calm = p.calm >= o_.hold_intervals;
    double below = eased || long_calm ? p.offered_rate : o_.plateau * p.ceiling;
    if (p.limit < below)
      p.limit = std::min(below, p.limit + (eased || !long_calm ? o_.increase : o_.probe) * p.offered_rate);
    if (p.limit >= p.offered_rate) p.limit = -1;
  }
}

void priority_guard::on_outcome(size_t pi, bool within_slo, double now_s) {
  if (!differ_ || pi >= pipes_.size()) return;
  roll(now_s);
  ++pipes_[pi].outcomes;
  if (!within_slo) ++pipes_[pi].misses;
}

std::string priority_guard::admit(size_t pi, double now_s) {
  if (!differ_ || pi >= pipes_.size()) return {};
  roll(now_s);
  auto& p = pipes_[pi];
  ++p.offered;
  if (p.limit >= 0) {
    double cap = std::max(1.0, 0.2 * p.limit);
    if (p.tokens_at >= 0) p.tokens = std::min(cap, p.tokens + p.limit * std::max(0.0, now_s - p.tokens_at));
    p.tokens_at = now_s;
    if (p.tokens < 1) {
      auto& h = pipes_[p.held_by];
      return fmt::format(
          "shed for priority: pipeline '{}' (priority {}) shares devices with '{}' (priority {}) and missed its SLO "
          "for "
          "{:.1f}% of its {} queries in the last {:.1f} s; '{}' is admitted at {:.1f} queries/s here until it recovers",
          h.name, h.priority, p.name, p.priority, 100 * h.miss_share, h.last_outcomes, o_.interval_s, p.name, p.limit);
    }
    p.tokens -= 1;
  }
  ++p.admitted;
  return {};
}

}  // namespace sloserve::sched
