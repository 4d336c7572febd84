// The shared devices of one packing (Nexus's squishy bin packing): residual sessions merged onto
// devices by duty cycle, best fit first, with a journal to roll a trial back.

#include <algorithm>
#include <cmath>
#include <limits>

#include "scheduling/packing.hpp"

namespace sloserve::sched {
namespace {

// ceil, forgiving the rounding of d·r that should land on a whole batch.
int ceil_batch(double x) {
  return std::max(1, static_cast<int>(std::ceil(x - 1e-6)));
}

// Duty-cycle buckets: four per octave.
int bucket_of(double duty_ms) {
  return static_cast<int>(std::floor(4 * std::log2(duty_ms)));
}
double bucket_start(int j) {
  return std::exp2(j / 4.0);
}

// How many devices one best fit may look at: past these the search is no longer exhaustive.
constexpr size_t max_examined = 384;
constexpr size_t max_shortened = 32;  // devices whose cycle the residual would shorten
constexpr double tol = 1e-6;

}  // namespace

std::optional<shared_devices::device> shared_devices::make(const std::vector<residual>& members, double duty_ms) const {
  if (members.empty()) return std::nullopt;
  double d = duty_ms;
  if (d <= 0) {
    d = members.front().max_duty_ms;
    for (auto& m : members) d = std::min(d, m.max_duty_ms);
  }
  device dev;
  dev.plan.id = -1;
  dev.plan.duty_cycle_ms = d;
  for (auto& m : members) {
    auto& s = ss_[m.s];
    auto& t = *m.table;
    int b = ceil_batch(d * m.rate / 1000);
    if (b > t.limit()) return std::nullopt;
    double l = t.ms(b);
    if (l + d > s.slo_ms + plan_eps) return std::nullopt;
    dev.busy_ms += l;
    dev.work += m.rate / 1000 * t.least_per_request_ms();
    dev.plan.sessions.push_back({m.s, b, m.rate});
  }
  if (dev.busy_ms > d + plan_eps) return std::nullopt;
  dev.plan.occupancy = dev.busy_ms / d;
  dev.plan.memory_mb = memory_of(dev.plan.sessions, ss_);
  if (caps_.memory_mb > 0 && dev.plan.memory_mb > caps_.memory_mb + plan_eps) return std::nullopt;
  dev.members = members;
  return dev;
}

std::optional<shared_devices::device> shared_devices::join(size_t k, const residual& r) const {
  auto& dev = devices_[k];
  auto& s = ss_[r.s];
  auto& t = *r.table;
  double d = std::min(dev.plan.duty_cycle_ms, r.max_duty_ms);
  // In the merged cycle, r's own batch must fit.
  if (t.ms(ceil_batch(d * r.rate / 1000)) > d) return std::nullopt;
  if (d < dev.plan.duty_cycle_ms) {
    auto members = dev.members;
    members.push_back(r);
    auto out = make(members, d);
    if (out) out->plan.id = dev.plan.id;
    return out;
  }
  // The cycle stays: the members keep their batches, r adds its own.
  int b = ceil_batch(d * r.rate / 1000);
  if (b > t.limit()) return std::nullopt;
  double l = t.ms(b);
  if (l + d > s.slo_ms + plan_eps || dev.busy_ms + l > d + plan_eps) return std::nullopt;
  double memory = dev.plan.memory_mb;
  bool held = false;
  for (auto& a : dev.plan.sessions) held = held || ss_[a.session].model == s.model;
  if (!held) memory += s.model->memory_mb;
  if (caps_.memory_mb > 0 && memory > caps_.memory_mb + plan_eps) return std::nullopt;
  device out = dev;
  out.busy_ms += l;
  out.work += r.rate / 1000 * t.least_per_request_ms();
  out.plan.sessions.push_back({r.s, b, r.rate});
  out.plan.occupancy = out.busy_ms / d;
  out.plan.memory_mb = memory;
  out.members.push_back(r);
  return out;
}

std::optional<double> shared_devices::occupancy_with(size_t k, const residual& r) const {
  auto& dev = devices_[k];
  auto& s = ss_[r.s];
  auto& t = *r.table;
  double d = std::min(dev.plan.duty_cycle_ms, r.max_duty_ms);
  int b = ceil_batch(d * r.rate / 1000);
  if (b > t.limit()) return std::nullopt;
  double l = t.ms(b);
  if (l > d || l + d > s.slo_ms + plan_eps) return std::nullopt;
  double busy = dev.busy_ms;
  if (d < dev.plan.duty_cycle_ms) {
    // Every member runs at the shorter cycle: as make() would, without making the device.
    busy = 0;
    for (auto& m : dev.members) {
      int mb = ceil_batch(d * m.rate / 1000);
      if (mb > m.table->limit()) return std::nullopt;
      double ml = m.table->ms(mb);
      if (ml + d > ss_[m.s].slo_ms + plan_eps) return std::nullopt;
      busy += ml;
    }
  }
  if (busy + l > d + plan_eps) return std::nullopt;
  if (caps_.memory_mb > 0) {
    bool held = false;
    for (auto& a : dev.plan.sessions) held = held || ss_[a.session].model == s.model;
    if (!held && dev.plan.memory_mb + s.model->memory_mb > caps_.memory_mb + plan_eps) return std::nullopt;
  }
  return (busy + l) / d;
}

std::optional<size_t> shared_devices::best_fit(const residual& r) const {
  auto& t = *r.table;
  const double D = r.max_duty_ms, rate_ms = r.rate / 1000;
  std::optional<size_t> best;
  double top = -std::numeric_limits<double>::infinity();
  auto consider = [&](size_t k) {
    auto occ = occupancy_with(k, r);
    if (occ && (*occ > top || (*occ == top && k < *best))) top = *occ, best = k;
  };
  // Devices whose cycle is no longer than D keep it: within a bucket of cycles [lo, hi], r adds
  // between l(ceil(lo·r))/hi and l(ceil(hi·r))/lo to the occupancy. So a device must have at
  // least the first free, and beats the best so far only if its occupancy plus the second does.
  const int top_bucket = bucket_of(D);
  size_t examined = 0;
  for (auto it = buckets_.upper_bound(top_bucket); it != buckets_.begin() && examined < max_examined;) {
    --it;
    double lo = bucket_start(it->first) * (1 - 1e-9), hi = std::min(bucket_start(it->first + 1), D) * (1 + 1e-9);
    int b_lo = ceil_batch(lo * rate_ms);
    if (b_lo > t.limit()) continue;
    int b_hi = std::min(ceil_batch(hi * rate_ms), t.limit());
    double least = t.least_from(b_lo) / hi, most = t.most_upto(b_hi) / lo;
    auto& by_free = it->second.by_free;
    for (auto f = by_free.lower_bound({least - tol, 0}); f != by_free.end(); ++f) {
      if (1 - f->first + most < top - tol) break;
      if (devices_[f->second].plan.duty_cycle_ms > D) continue;  // shortened: below
      consider(f->second);
      if (++examined >= max_examined) break;
    }
  }
  // Devices with longer cycles would run every member at D. A member's batches then cost at
  // least rate · (least ms per request) of the cycle, so their `work` bounds the occupancy from
  // below. Fullest first, nearest cycles first, a bounded number.
  const double room = 1 - rate_ms * t.least_per_request_ms() + 1e-4;
  size_t shortened = 0;
  for (auto it = buckets_.lower_bound(top_bucket); it != buckets_.end() && shortened < max_shortened; ++it) {
    auto& by_work = it->second.by_work;
    auto f = by_work.upper_bound({room, std::numeric_limits<size_t>::max()});
    while (f != by_work.begin() && shortened < max_shortened) {
      --f;
      if (devices_[f->second].plan.duty_cycle_ms <= D) continue;
      ++shortened;
      consider(f->second);
    }
  }
  return best;
}

void shared_devices::index(size_t k) {
  auto& dev = devices_[k];
  if (!dev.alive) return;
  auto& key = keys_[k];
  key = {bucket_of(dev.plan.duty_cycle_ms), 1 - dev.plan.occupancy, dev.work, true};
  auto& b = buckets_[key.bucket];
  b.by_free.emplace(key.free, k);
  b.by_work.emplace(key.work, k);
  load_ += dev.plan.occupancy;
}

void shared_devices::unindex(size_t k) {
  auto& key = keys_[k];
  if (!key.indexed) return;
  auto it = buckets_.find(key.bucket);
  it->second.by_free.erase({key.free, k});
  it->second.by_work.erase({key.work, k});
  if (it->second.by_free.empty()) buckets_.erase(it);
  key.indexed = false;
  load_ -= 1 - key.free;
}

void shared_devices::save(size_t k) {
  if (journaling_ && k < size_at_begin_) journal_.emplace_back(k, devices_[k]);
}

size_t shared_devices::add(device d) {
  devices_.push_back(std::move(d));
  keys_.emplace_back();
  size_t k = devices_.size() - 1;
  if (devices_[k].alive) ++alive_;
  index(k);
  return k;
}

void shared_devices::replace(size_t k, device d) {
  save(k);
  unindex(k);
  bool was = devices_[k].alive;
  devices_[k] = std::move(d);
  alive_ = alive_ - was + devices_[k].alive;
  index(k);
}

void shared_devices::remove_member(size_t k, size_t s) {
  save(k);
  unindex(k);
  auto& dev = devices_[k];
  for (size_t i = 0; i < dev.members.size(); ++i)
    if (dev.members[i].s == s) {
      dev.members.erase(dev.members.begin() + static_cast<long>(i));
      dev.plan.sessions.erase(dev.plan.sessions.begin() + static_cast<long>(i));
      break;
    }
  if (dev.members.empty()) {
    if (dev.alive) --alive_;
    dev.alive = false;
    return;
  }
  dev.busy_ms = dev.work = 0;
  for (size_t i = 0; i < dev.members.size(); ++i) {
    auto& t = *dev.members[i].table;
    dev.busy_ms += t.ms(dev.plan.sessions[i].batch);
    dev.work += dev.members[i].rate / 1000 * t.least_per_request_ms();
  }
  dev.plan.occupancy = dev.busy_ms / dev.plan.duty_cycle_ms;
  dev.plan.memory_mb = memory_of(dev.plan.sessions, ss_);
  index(k);
}

void shared_devices::retire(size_t k) {
  save(k);
  unindex(k);
  if (devices_[k].alive) --alive_;
  devices_[k].alive = false;
}

void shared_devices::begin() {
  journaling_ = true;
  journal_.clear();
  size_at_begin_ = devices_.size();
  alive_at_begin_ = alive_;
  load_at_begin_ = load_;
}

void shared_devices::rollback() {
  while (devices_.size() > size_at_begin_) {
    unindex(devices_.size() - 1);
    devices_.pop_back();
    keys_.pop_back();
  }
  for (auto it = journal_.rbegin(); it != journal_.rend(); ++it) {
    unindex(it->first);
    devices_[it->first] = std::move(it->second);
    index(it->first);
  }
  alive_ = alive_at_begin_;
  load_ = load_at_begin_;
  commit();
}

void shared_devices::commit() {
  journaling_ = false;
  journal_.clear();
}

}  // namespace sloserve::sched
