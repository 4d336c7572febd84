#include "scheduling/admission.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>

namespace sloserve::sched {

namespace {

// The time constant of a class's offered rate, and the margin it is given above it (so that a
// class under its share is not held at its mean, shedding its own bursts).
constexpr double offered_tau_s = 2.0;
constexpr double offered_margin = 1.5;

}  // namespace

std::vector<double> fair_shares(double rate, const std::vector<claim>& claims) {
  std::vector<double> out(claims.size(), 0);
  double left = std::max(0.0, rate);
  std::vector<int> levels;
  for (auto& c : claims) levels.push_back(c.priority);
  std::sort(levels.rbegin(), levels.rend());
  levels.erase(std::unique(levels.begin(), levels.end()), levels.end());
  for (int level : levels) {
    std::vector<size_t> open;
    for (size_t i = 0; i < claims.size(); ++i)
      if (claims[i].priority == level && claims[i].offered > 0) open.push_back(i);
    // Water-filling: a class offering less than its weighted share of what is left keeps what it
    // offers; the others share the rest again.
    for (bool settled = false; !open.empty() && !settled;) {
      double weights = 0;
      for (auto i : open) weights += claims[i].weight;
      settled = true;
      for (size_t k = 0; k < open.size(); ++k) {
        auto i = open[k];
        if (claims[i].offered <= left * claims[i].weight / weights) {
          out[i] = claims[i].offered;
          left -= out[i];
          open.erase(open.begin() + static_cast<long>(k));
          settled = false;
          break;
        }
      }
    }
    if (open.empty()) continue;
    double weights = 0;
    for (auto i : open) weights += claims[i].weight;
    for (auto i : open) out[i] = left * claims[i].weight / weights;
    left = 0;
  }
  // What every class that offers leaves goes to them all by weight (to all, when none offers).
  if (left > 0 && !claims.empty()) {
    bool any = std::any_of(claims.begin(), claims.end(), [](auto& c) { return c.offered > 0; });
    double weights = 0;
    for (auto& c : claims)
      if (!any || c.offered > 0) weights += c.weight;
    for (size_t i = 0; i < claims.size(); ++i)
      if ((!any || claims[i].offered > 0) && weights > 0) out[i] += left * claims[i].weight / weights;
  }
  return out;
}

double admission::bucket::refill(double now_s) {
  double burst = std::max(1.0, rate * 0.2);
  tokens = at_s < 0 ? burst : tokens + std::max(0.0, now_s - at_s) * rate;
  at_s = now_s;
  double over = std::max(0.0, tokens - burst);
  tokens -= over;
  return over;
}

bool admission::bucket::take() {
  if (tokens < 1) return false;
  tokens -= 1;
  return true;
}

double admission::slot::offered(double now_s) const {
  if (at_s < 0) return 0;
  // Over the time since the first arrival while that is short of the time constant (at least a
  // tenth of a second), so that a tenant that just started is not taken for a slow one.
  double span = offered_tau_s * (1 - std::exp(-std::max(0.1, now_s - first_s) / offered_tau_s));
  return count * std::exp(-std::max(0.0, now_s - at_s) / offered_tau_s) / span;
}

void admission::slot::arrive(double now_s) {
  if (first_s < 0) first_s = now_s;
  count = (at_s < 0 ? 0 : count * std::exp(-std::max(0.0, now_s - at_s) / offered_tau_s)) + 1;
  at_s = now_s;
}

void admission::configure(std::vector<tenant_class> tenants, size_t pipelines, size_t frontends) {
  tenants_ = std::move(tenants);
  frontends_ = std::max<size_t>(1, frontends);
  caps_.assign(tenants_.size(), {});
  arrivals_.assign(tenants_.size(), {});
  set_elsewhere(std::nullopt);  // an even split of the caps until the other frontends say
  quotas_.assign(pipelines, {});
}

void admission::set_elsewhere(std::optional<std::vector<double>> offered) {
  elsewhere_ = std::move(offered);
  if (elsewhere_) {
    elsewhere_->resize(tenants_.size(), 0);
    return;
  }
  for (size_t t = 0; t < tenants_.size(); ++t)
    if (tenants_[t].cap > 0) caps_[t].rate = tenants_[t].cap / static_cast<double>(frontends_);
}

double admission::offered_here(int tenant, double now_s) const {
  if (tenant < 0 || static_cast<size_t>(tenant) >= arrivals_.size()) return 0;
  return arrivals_[static_cast<size_t>(tenant)].offered(now_s);
}

void admission::set_quota(size_t pi, double rate, double offered, int priority) {
  if (pi >= quotas_.size()) return;
  auto& q = quotas_[pi];
  if (rate < 0) {
    if (!q.local) q = {};
    return;
  }
  q.rate = rate, q.offered = offered, q.priority = priority, q.local = false;
  q.slots.resize(tenants_.size() + 1);
}

void admission::set_local_quota(size_t pi, double rate) {
  if (pi >= quotas_.size()) return;
  auto& q = quotas_[pi];
  if (q.rate >= 0 && !q.local) return;  // the plan's
  if (rate < 0) {
    q = {};
    return;
  }
  q.rate = rate, q.offered = rate, q.priority = 0, q.local = true;
  q.slots.resize(tenants_.size() + 1);
}

double admission::given(size_t pi, int tenant) const {
  if (pi >= quotas_.size() || quotas_[pi].rate < 0) return -1;
  auto& q = quotas_[pi];
  double now = 0;
  for (auto& s : q.slots) now = std::max(now, s.at_s);
  std::vector<claim> claims;
  for (size_t k = 0; k < q.slots.size(); ++k) {
    claim c{q.slots[k].offered(now) * offered_margin, 1, 0};
    if (k < tenants_.size()) c.weight = tenants_[k].weight, c.priority = tenants_[k].priority;
    claims.push_back(c);
  }
  return fair_shares(local_rate(q, now), claims)[slot_of(tenant)];
}

double admission::local_rate(const quota& q, double now_s) const {
  if (q.local) return q.rate;
  double even = q.rate / static_cast<double>(frontends_);
  if (frontends_ == 1 || !(q.offered > 0)) return even;
  double mine = 0;
  for (auto& s : q.slots) mine += s.offered(now_s);
  if (mine <= 0) return even;
  return q.rate * std::min(1.0, mine / q.offered);
}

admission::verdict admission::admit(size_t pi, const std::string& pipeline, int tenant, double now_s) {
  if (tenant >= static_cast<int>(tenants_.size())) tenant = -1;
  if (tenant >= 0) {
    auto t = static_cast<size_t>(tenant);
    arrivals_[t].arrive(now_s);
    // Its part of the cap: by where it sends, once the other frontends have said; else even.
    if (tenants_[t].cap > 0 && elsewhere_) {
      double here = arrivals_[t].offered(now_s), there = std::max(0.0, (*elsewhere_)[t]);
      caps_[t].rate = tenants_[t].cap * (here + there > 0 ? here / (here + there) : 1.0);
    }
  }
  if (auto* cap = tenant >= 0 ? &caps_[static_cast<size_t>(tenant)] : nullptr;
      cap && cap->rate > 0 && (cap->refill(now_s), !cap->take())) {
    auto& t = tenants_[static_cast<size_t>(tenant)];
    return {outcome::capped, fmt::format("tenant '{}' is over its rate cap of {:g} queries/s", t.name, t.cap)};
  }
  if (pi >= quotas_.size() || quotas_[pi].rate < 0) return {};
  auto& q = quotas_[pi];
  auto& s = q.slots[slot_of(tenant)];
  s.arrive(now_s);
  s.b.rate = given(pi, tenant);
  q.spill = std::min(std::max(1.0, local_rate(q, now_s) * 0.2), q.spill + s.b.refill(now_s));
  if (s.b.take()) return {};
  if (q.spill >= 1) {
    q.spill -= 1;
    return {};
  }
  double sent = 0;
  for (auto& x : q.slots) sent += x.offered(now_s);
  auto carried = q.local ? fmt::format(
                               "pipeline '{}' misses its SLO beyond {:.1f} queries/s at this frontend, where it is "
                               "sent {:.1f}",
                               pipeline, q.rate, sent)
                         : fmt::format(
                               "the cluster is short of devices and carries {:.1f} of the {:.1f} queries/s sent to "
                               "pipeline '{}' (priority {})",
                               q.rate, q.offered, pipeline, q.priority);
  if (tenant < 0 && q.local)
    return {outcome::shed,
            fmt::format("shed for fair share: {}; requests of no tenant are given {:.1f} queries/s of it", carried,
                        s.b.rate)};
  if (tenant < 0) return {outcome::shed, "shed for priority: " + carried + ", pipelines of higher priority first"};
  auto& t = tenants_[static_cast<size_t>(tenant)];
  return {outcome::shed, fmt::format("shed for fair share: {}; tenant '{}' (priority {}, weight {:g}) is given {:.1f} "
                                     "queries/s of it at this frontend",
                                     carried, t.name, t.priority, t.weight, s.b.rate)};
}

}  // namespace sloserve::sched
