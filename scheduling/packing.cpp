#include "scheduling/packing.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

namespace sloserve::sched {
namespace {

// Lines 8-11 of Algorithm 3.1: the largest b with l(b) + b/r <= L; d = b/r.
std::optional<residual> residual_of(const session& s, size_t i, double r, const batch_table& t) {
  auto& batches = t.plannable();
  if (batches.empty() || r <= 0) return std::nullopt;
  residual out{i, r, 0, 0, 0, &t};
  for (int b : batches)
    if (t.ms(b) + b / r * 1000 <= s.slo_ms + plan_eps) out.batch = b;
  if (out.batch) {
    out.max_duty_ms = out.batch / r * 1000;
  } else {
    // Too little traffic to gather even the smallest batch in time: run what is there every
    // L - l(b) ms.
    out.batch = batches.front();
    out.max_duty_ms = s.slo_ms - t.ms(out.batch);
    if (out.max_duty_ms <= 0) return std::nullopt;
  }
  out.occupancy = t.ms(out.batch) / out.max_duty_ms;
  return out;
}

}  // namespace

double memory_of(const std::vector<assignment>& as, const std::vector<session>& ss) {
  // Devices hold a handful of models: a linear scan beats a set here.
  double mb = 0;
  for (size_t i = 0; i < as.size(); ++i) {
    auto* m = ss[as[i].session].model;
    bool seen = false;
    for (size_t j = 0; j < i && !seen; ++j) seen = ss[as[j].session].model == m;
    if (!seen) mb += m->memory_mb;
  }
  return mb;
}

session_load load_of(const std::vector<session>& ss, size_t i, const batch_tables& tables) {
  session_load out;
  auto& s = ss[i];
  if (s.rate <= 0) return out;
  auto& t = tables.of(*s.model);
  int B = t.saturating_batch(s.slo_ms);
  double T = B ? B / t.ms(B) * 1000 : 0;
  out.saturating = B;
  out.throughput = T;
  int n = T > 0 ? static_cast<int>(std::floor(s.rate / T + 1e-9)) : 0;
  double r = s.rate - n * T;
  if (r > 1e-6) {
    out.rest = residual_of(s, i, r, t);
    // A residual that cannot keep up on its own device gets one more dedicated device.
    if (out.rest && out.rest->occupancy > 1 + plan_eps && T > 0)
      out.rest.reset(), ++n;
    else if (!out.rest && T > 0)
      ++n;
    else if (!out.rest)
      out.infeasible = true;
  }
  out.dedicated = n;
  return out;
}

device_plan dedicated_device(const std::vector<session>& ss, size_t i, int batch, double rate,
                             const batch_tables& tables) {
  device_plan dev;
  dev.dedicated = true;
  dev.duty_cycle_ms = tables.of(*ss[i].model).ms(batch);
  dev.sessions.push_back({i, batch, rate});
  dev.occupancy = 1;
  dev.memory_mb = memory_of(dev.sessions, ss);
  return dev;
}

namespace {

std::string key_of(const session& s) {
  char buf[64];
  snprintf(buf, sizeof buf, "@%.3f", s.slo_ms);
  return s.model->name + buf;
}

}  // namespace

namespace detail {
// Smallest ids not taken.
struct id_pool {
  std::vector<bool> used;
  int next = 0;
  void take(int id) {
    if (id >= static_cast<int>(used.size())) used.resize(static_cast<size_t>(id) + 1, false);
    used[static_cast<size_t>(id)] = true;
  }
  int take() {
    while (next < static_cast<int>(used.size()) && used[static_cast<size_t>(next)]) ++next;
    take(next);
    return next;
  }
};
}  // namespace detail

using detail::id_pool;

bool squishy_packing::place(const residual& r) {
  if (auto k = shared_.best_fit(r)) {
    shared_.replace(*k, std::move(*shared_.join(*k, r)));
    at_[r.s] = static_cast<int>(*k);
    return true;
  }
  auto alone = shared_.make({r});
  if (!alone) return false;
  at_[r.s] = static_cast<int>(shared_.add(std::move(*alone)));
  return true;
}

void squishy_packing::keep_previous(const plan& previous, const std::vector<session>* previous_sessions, plan& out,
                                    id_pool& ids, std::vector<int>& dedicated_needed, std::vector<int>& was,
                                    std::vector<bool>& placed) {
  const size_t n = ss_.size();
  std::map<std::string, size_t> by_key;
  if (previous_sessions)
    for (size_t i = 0; i < n; ++i) by_key[key_of(ss_[i])] = i;
  auto map_prev = [&](size_t prev_index) -> std::optional<size_t> {
    if (!previous_sessions) return std::nullopt;
    auto it = by_key.find(key_of((*previous_sessions)[prev_index]));
    if (it == by_key.end()) return std::nullopt;
    return it->second;
  };

  for (auto& dev : previous.devices) {
    if (dev.dedicated) {
      auto s = map_prev(dev.sessions[0].session);
      if (s && dedicated_needed[*s] > 0) {
        --dedicated_needed[*s];
        auto d = dedicated_device(ss_, *s, loads_[*s].saturating, loads_[*s].throughput, tables_);
        d.id = dev.id;
        ids.take(dev.id);
        out.devices.push_back(std::move(d));
      } else {
        ++out.moved;
      }
      continue;
    }
    std::vector<residual> members;
    for (auto& a : dev.sessions)
      if (auto s = map_prev(a.session)) {
        was[*s] = dev.id;
        if (loads_[*s].rest && !placed[*s]) members.push_back(*loads_[*s].rest);
      }
    std::sort(members.begin(), members.end(),
              [](const residual& a, const residual& b) { return a.occupancy > b.occupancy; });
    std::optional<shared_devices::device> kept;
    while (!members.empty() && !(kept = shared_.make(members))) members.pop_back();
    if (!kept) continue;
    kept->plan.id = dev.id;
    ids.take(dev.id);
    auto k = static_cast<int>(shared_.add(std::move(*kept)));
    for (auto& m : members) placed[m.s] = true, at_[m.s] = k;
  }
}

plan squishy_packing::make(const plan* previous, const std::vector<session>* previous_sessions) {
  plan out;
  id_pool ids;
  const size_t n = ss_.size();
  loads_.assign(n, {});
  at_.assign(n, -1);
  std::vector<int> dedicated_needed(n, 0);
  for (size_t i = 0; i < n; ++i) {
    loads_[i] = load_of(ss_, i, tables_);
    if (loads_[i].infeasible) out.infeasible.push_back(i);
    dedicated_needed[i] = loads_[i].dedicated;
  }

  std::vector<int> was(n, -1);
  std::vector<bool> placed(n, false);
  if (previous) keep_previous(*previous, previous_sessions, out, ids, dedicated_needed, was, placed);
  for (size_t i = 0; i < n; ++i)
    for (int k = 0; k < dedicated_needed[i]; ++k) {
      auto d = dedicated_device(ss_, i, loads_[i].saturating, loads_[i].throughput, tables_);
      d.id = ids.take();
      out.devices.push_back(std::move(d));
    }
  dedicated_ = out.devices.size();

  // Residual loads, best-fit decreasing by occupancy (lines 12-25).
  std::vector<residual> todo;
  for (size_t i = 0; i < n; ++i)
    if (loads_[i].rest && !placed[i]) todo.push_back(*loads_[i].rest);
  std::sort(todo.begin(), todo.end(), [](const residual& a, const residual& b) { return a.occupancy > b.occupancy; });
  for (auto& r : todo)
    if (!place(r)) {
      out.infeasible.push_back(r.s);
      loads_[r.s].infeasible = true;
    }
  infeasible_ = out.infeasible.size();
  drain(previous != nullptr);
  // Ids in the order devices opened (the drained ones too, so that the ids of a plan do not
  // depend on what drained).
  for (size_t k = 0; k < shared_.all().size(); ++k)
    if (shared_.all()[k].plan.id < 0) {
      auto d = shared_.all()[k];
      d.plan.id = ids.take();
      shared_.replace(k, std::move(d));
    }
  for (auto& dev : shared_.all())
    if (dev.alive) out.devices.push_back(dev.plan);
  for (size_t i = 0; i < n; ++i)
    if (was[i] >= 0 && at_[i] >= 0 && was[i] != shared_.all()[static_cast<size_t>(at_[i])].plan.id) ++out.moved;
  std::sort(out.devices.begin(), out.devices.end(),
            [](const device_plan& a, const device_plan& b) { return a.id < b.id; });
  return out;
}

// When load falls, drain the least-used devices into the others where everything fits: first
// those at most half busy, least busy first, until one has filled past half (Nexus); then every
// device left, least busy first.
void squishy_packing::drain(bool replan) {
  auto& all = shared_.all();
  auto by_occupancy = [&] {
    std::vector<size_t> order;
    for (size_t k = 0; k < all.size(); ++k)
      if (all[k].alive) order.push_back(k);
    std::sort(order.begin(), order.end(),
              [&](size_t a, size_t b) { return all[a].plan.occupancy < all[b].plan.occupancy; });
    return order;
  };
  for (auto k : by_occupancy()) {
    if (all[k].plan.occupancy > 0.5) break;  // fuller devices will not empty into the others
    empty_into_others(k);
  }
  for (auto k : by_occupancy()) empty_into_others(k);
  // Then the least busy devices together: their residuals best-fit decreasing into the others,
  // on devices of their own where they fit nowhere, kept when that takes fewer devices.
  // A re-plan moves sessions only in small groups: a device saved is not worth many cold starts.
  for (size_t group : {2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64}) {
    if (replan && group > 4) break;
    auto order = by_occupancy();
    if (order.size() < group) break;
    std::vector<residual> members;
    std::vector<std::pair<size_t, int>> at_before;
    shared_.begin();
    size_t before = shared_.alive();
    for (size_t i = 0; i < group; ++i) {
      for (auto& m : all[order[i]].members) members.push_back(m), at_before.emplace_back(m.s, at_[m.s]);
      shared_.retire(order[i]);
    }
    std::sort(members.begin(), members.end(),
              [](const residual& a, const residual& b) { return a.occupancy > b.occupancy; });
    bool ok = true;
    for (auto& m : members) ok = ok && place(m);
    if (ok && shared_.alive() < before) {
      shared_.commit();
      continue;
    }
    shared_.rollback();
    for (auto& [s, k] : at_before) at_[s] = k;
  }
}

bool squishy_packing::empty_into_others(size_t k) {
  auto members = shared_.all()[k].members;
  std::vector<int> at_before;
  for (auto& m : members) at_before.push_back(at_[m.s]);
  shared_.begin();
  shared_.retire(k);
  for (auto& m : members) {
    auto to = shared_.best_fit(m);
    if (!to) {
      shared_.rollback();
      for (size_t i = 0; i < members.size(); ++i) at_[members[i].s] = at_before[i];
      return false;
    }
    shared_.replace(*to, std::move(*shared_.join(*to, m)));
    at_[m.s] = static_cast<int>(*to);
  }
  shared_.commit();
  return true;
}

void squishy_packing::remove(size_t i) {
  if (i >= loads_.size()) return;
  saved_.push_back({i, loads_[i], at_[i]});
  dedicated_ -= static_cast<size_t>(loads_[i].dedicated);
  if (loads_[i].infeasible) --infeasible_;
  if (at_[i] >= 0) shared_.remove_member(static_cast<size_t>(at_[i]), i);
  loads_[i] = {};
  at_[i] = -1;
}

void squishy_packing::add(size_t i) {
  if (i >= loads_.size()) loads_.resize(i + 1), at_.resize(i + 1, -1);
  saved_.push_back({i, loads_[i], at_[i]});
  loads_[i] = load_of(ss_, i, tables_);
  dedicated_ += static_cast<size_t>(loads_[i].dedicated);
  if (loads_[i].rest && !place(*loads_[i].rest)) loads_[i].infeasible = true;
  if (loads_[i].infeasible) ++infeasible_;
}

void squishy_packing::begin() {
  shared_.begin();
  saved_.clear();
  dedicated_at_begin_ = dedicated_;
  infeasible_at_begin_ = infeasible_;
  sessions_at_begin_ = loads_.size();
}

void squishy_packing::rollback() {
  shared_.rollback();
  for (auto it = saved_.rbegin(); it != saved_.rend(); ++it)
    if (it->session < loads_.size()) loads_[it->session] = it->load, at_[it->session] = it->at;
  loads_.resize(sessions_at_begin_);
  at_.resize(sessions_at_begin_);
  dedicated_ = dedicated_at_begin_;
  infeasible_ = infeasible_at_begin_;
  saved_.clear();
}

void squishy_packing::commit() {
  shared_.commit();
  saved_.clear();
}

}  // namespace sloserve::sched
