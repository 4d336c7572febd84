#include "scheduling/planner.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>

#include "scheduling/query_analyzer.hpp"

namespace sloserve::sched {
namespace {

constexpr double eps = 1e-9;

double l_ms(const session& s, int b) {
  return s.model->profile.latency_ms_at(b);
}

// ceil, forgiving the rounding of d·r that should land on a whole batch.
int ceil_batch(double x) {
  return std::max(1, static_cast<int>(std::ceil(x - 1e-6)));
}

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

// A session's residual load on a shared device.
struct residual {
  size_t s = 0;
  double rate = 0;
  int batch = 0;
  double max_duty_ms = 0;  // the longest duty cycle that still meets its SLO
  double occupancy = 0;
};

// Lines 8-11 of Algorithm 3.1: the largest b with l(b) + b/r <= L; d = b/r.
std::optional<residual> residual_of(const std::vector<session>& ss, size_t i, double r) {
  auto& s = ss[i];
  auto batches = s.model->profile.plannable_batches(s.model->max_batch);
  if (batches.empty() || r <= 0) return std::nullopt;
  residual out{i, r, 0, 0, 0};
  for (int b : batches)
    if (l_ms(s, b) + b / r * 1000 <= s.slo_ms + eps) out.batch = b;
  if (out.batch) {
    out.max_duty_ms = out.batch / r * 1000;
  } else {
    // Too little traffic to gather even the smallest batch in time: run what is there every
    // L - l(b) ms.
    out.batch = batches.front();
    out.max_duty_ms = s.slo_ms - l_ms(s, out.batch);
    if (out.max_duty_ms <= 0) return std::nullopt;
  }
  out.occupancy = l_ms(s, out.batch) / out.max_duty_ms;
  return out;
}

// MERGENODES generalised to a set: the shortest duty cycle of the members, each batch
// ceil(d·r), feasible when the batches fit the cycle, every SLO holds and memory suffices.
std::optional<device_plan> shared_device(const std::vector<residual>& members, const std::vector<session>& ss,
                                         const device_caps& caps) {
  if (members.empty()) return std::nullopt;
  double d = members.front().max_duty_ms;
  for (auto& m : members) d = std::min(d, m.max_duty_ms);
  device_plan dev;
  dev.duty_cycle_ms = d;
  double busy = 0;
  for (auto& m : members) {
    auto& s = ss[m.s];
    int b = ceil_batch(d * m.rate / 1000);
    if (b > s.model->batch_limit()) return std::nullopt;
    double l = l_ms(s, b);
    if (l + d > s.slo_ms + eps) return std::nullopt;
    busy += l;
    dev.sessions.push_back({m.s, b, m.rate});
  }
  if (busy > d + eps) return std::nullopt;
  dev.occupancy = busy / d;
  dev.memory_mb = memory_of(dev.sessions, ss);
  if (caps.memory_mb > 0 && dev.memory_mb > caps.memory_mb + eps) return std::nullopt;
  return dev;
}

device_plan dedicated_device(const std::vector<session>& ss, size_t i, int B, double rate) {
  device_plan dev;
  dev.dedicated = true;
  dev.duty_cycle_ms = l_ms(ss[i], B);
  dev.sessions.push_back({i, B, rate});
  dev.occupancy = 1;
  dev.memory_mb = memory_of(dev.sessions, ss);
  return dev;
}

// Smallest ids not taken.
struct id_pool {
  std::set<int> used;
  int take() {
    int i = 0;
    while (used.count(i)) ++i;
    used.insert(i);
    return i;
  }
};

std::string key_of(const session& s) {
  char buf[64];
  snprintf(buf, sizeof buf, "@%.3f", s.slo_ms);
  return s.model->name + buf;
}

}  // namespace

plan nexus_planner::make_impl(const std::vector<session>& ss, const device_caps& caps, const plan* previous,
                              const std::vector<session>* previous_sessions) const {
  plan out;
  id_pool ids;
  // Saturate (lines 1-7).
  std::vector<int> dedicated_needed(ss.size(), 0), saturating(ss.size(), 0);
  std::vector<double> throughput(ss.size(), 0);
  std::vector<std::optional<residual>> residuals(ss.size());
  for (size_t i = 0; i < ss.size(); ++i) {
    auto& s = ss[i];
    if (s.rate <= 0) continue;
    int B = saturating_batch(*s.model, s.slo_ms);
    double T = B ? B / l_ms(s, B) * 1000 : 0;
    saturating[i] = B;
    throughput[i] = T;
    int n = T > 0 ? static_cast<int>(std::floor(s.rate / T + 1e-9)) : 0;
    double r = s.rate - n * T;
    if (r > 1e-6) {
      residuals[i] = residual_of(ss, i, r);
      // A residual that cannot keep up on its own device gets one more dedicated device.
      if (residuals[i] && residuals[i]->occupancy > 1 + eps && T > 0)
        residuals[i].reset(), ++n;
      else if (!residuals[i] && T > 0)
        ++n;
      else if (!residuals[i])
        out.infeasible.push_back(i);
    }
    dedicated_needed[i] = n;
  }

  std::map<std::string, size_t> by_key;
  for (size_t i = 0; i < ss.size(); ++i) by_key[key_of(ss[i])] = i;
  auto map_prev = [&](size_t prev_index) -> std::optional<size_t> {
    if (!previous_sessions) return std::nullopt;
    auto it = by_key.find(key_of((*previous_sessions)[prev_index]));
    if (it == by_key.end()) return std::nullopt;
    return it->second;
  };

  std::vector<device_plan> shared;
  std::vector<std::vector<residual>> members_at;  // parallel to `shared`
  std::vector<int> where(ss.size(), -1), was(ss.size(), -1);
  std::vector<bool> placed(ss.size(), false);
  if (previous) {
    // Keep dedicated devices that still have their session, and shared devices with as many of
    // their sessions as still fit (evicting the cheapest first).
    for (auto& dev : previous->devices) {
      if (dev.dedicated) {
        auto s = map_prev(dev.sessions[0].session);
        if (s && dedicated_needed[*s] > 0) {
          --dedicated_needed[*s];
          auto d = dedicated_device(ss, *s, saturating[*s], throughput[*s]);
          d.id = dev.id;
          ids.used.insert(dev.id);
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
          if (residuals[*s] && !placed[*s]) members.push_back(*residuals[*s]);
        }
      std::sort(members.begin(), members.end(),
                [](const residual& a, const residual& b) { return a.occupancy > b.occupancy; });
      std::optional<device_plan> kept;
      while (!members.empty() && !(kept = shared_device(members, ss, caps))) members.pop_back();
      if (!kept) continue;
      kept->id = dev.id;
      ids.used.insert(dev.id);
      for (auto& m : members) placed[m.s] = true, where[m.s] = dev.id;
      shared.push_back(std::move(*kept));
      members_at.push_back(std::move(members));
    }
  }
  for (size_t i = 0; i < ss.size(); ++i)
    for (int k = 0; k < dedicated_needed[i]; ++k) {
      auto d = dedicated_device(ss, i, saturating[i], throughput[i]);
      d.id = ids.take();
      out.devices.push_back(std::move(d));
    }

  // Residual loads, best-fit decreasing by occupancy (lines 12-25).
  std::vector<residual> todo;
  for (size_t i = 0; i < ss.size(); ++i)
    if (residuals[i] && !placed[i]) todo.push_back(*residuals[i]);
  std::sort(todo.begin(), todo.end(), [](const residual& a, const residual& b) { return a.occupancy > b.occupancy; });
  std::vector<residual> trial;
  auto best_fit = [&](const residual& r, const std::vector<size_t>& skip) -> bool {
    std::optional<device_plan> best;
    size_t best_at = 0;
    for (size_t k = 0; k < shared.size(); ++k) {
      if (std::find(skip.begin(), skip.end(), k) != skip.end()) continue;
      // Cheap necessary condition: in the merged (shorter) cycle, r's own batch must fit.
      double d = std::min(shared[k].duty_cycle_ms, r.max_duty_ms);
      if (l_ms(ss[r.s], ceil_batch(d * r.rate / 1000)) > d) continue;
      trial = members_at[k];
      trial.push_back(r);
      auto merged = shared_device(trial, ss, caps);
      if (merged && (!best || merged->occupancy > best->occupancy)) best = merged, best_at = k;
    }
    if (!best) return false;
    best->id = shared[best_at].id;
    shared[best_at] = std::move(*best);
    members_at[best_at].push_back(r);
    where[r.s] = shared[best_at].id;
    return true;
  };
  for (auto& r : todo) {
    if (best_fit(r, {})) continue;
    auto alone = shared_device({r}, ss, caps);
    if (!alone) {
      out.infeasible.push_back(r.s);
      continue;
    }
    alone->id = ids.take();
    where[r.s] = alone->id;
    shared.push_back(std::move(*alone));
    members_at.push_back({r});
  }
  // When load falls, drain the least-used devices into the others where everything fits.
  std::vector<size_t> order(shared.size());
  for (size_t k = 0; k < order.size(); ++k) order[k] = k;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return shared[a].occupancy < shared[b].occupancy; });
  std::vector<size_t> gone;
  for (auto k : order) {
    if (shared[k].occupancy > 0.5) break;  // fuller devices will not empty into the others
    auto backup = shared;
    auto backup_members = members_at;
    auto backup_where = where;
    std::vector<size_t> skip = gone;
    skip.push_back(k);
    bool all = true;
    for (auto& m : backup_members[k])
      if (!best_fit(m, skip)) {
        all = false;
        break;
      }
    if (all)
      gone.push_back(k);
    else
      shared = std::move(backup), members_at = std::move(backup_members), where = std::move(backup_where);
  }
  for (size_t k = 0; k < shared.size(); ++k)
    if (std::find(gone.begin(), gone.end(), k) == gone.end()) out.devices.push_back(std::move(shared[k]));
  for (size_t i = 0; i < ss.size(); ++i)
    if (was[i] >= 0 && where[i] >= 0 && was[i] != where[i]) ++out.moved;
  std::sort(out.devices.begin(), out.devices.end(),
            [](const device_plan& a, const device_plan& b) { return a.id < b.id; });
  return out;
}

plan batch_oblivious_planner::make_impl(const std::vector<session>& ss, const device_caps& caps, const plan*,
                                        const std::vector<session>*) const {
  plan out;
  struct item {
    size_t s;
    int batch;
    double share;  // of one device
    double T;
  };
  std::vector<item> items;
  int next_id = 0;
  for (size_t i = 0; i < ss.size(); ++i) {
    if (ss[i].rate <= 0) continue;
    int B = saturating_batch(*ss[i].model, ss[i].slo_ms);
    if (!B) {
      out.infeasible.push_back(i);
      continue;
    }
    double T = B / l_ms(ss[i], B) * 1000;
    double share = ss[i].rate / T;
    while (share >= 1 - eps) {
      auto d = dedicated_device(ss, i, B, T);
      d.id = next_id++;
      out.devices.push_back(std::move(d));
      share -= 1;
    }
    if (share > 1e-6) items.push_back({i, B, share, T});
  }
  std::sort(items.begin(), items.end(), [](const item& a, const item& b) { return a.share > b.share; });
  std::vector<device_plan> bins;
  for (auto& it : items) {
    bool done = false;
    for (auto& bin : bins) {
      if (bin.occupancy + it.share > 1 + eps) continue;
      auto as = bin.sessions;
      as.push_back({it.s, it.batch, it.share * it.T});
      double mem = memory_of(as, ss);
      if (caps.memory_mb > 0 && mem > caps.memory_mb + eps) continue;
      bin.sessions = std::move(as);
      bin.memory_mb = mem;
      bin.occupancy += it.share;
      done = true;
      break;
    }
    if (done) continue;
    device_plan bin;
    bin.sessions.push_back({it.s, it.batch, it.share * it.T});
    bin.occupancy = it.share;
    bin.memory_mb = memory_of(bin.sessions, ss);
    bins.push_back(std::move(bin));
  }
  for (auto& b : bins) {
    b.id = next_id++;
    // Each session runs its own best batch; the cycle is their sum.
    for (auto& a : b.sessions) b.duty_cycle_ms += l_ms(ss[a.session], a.batch);
    out.devices.push_back(std::move(b));
  }
  return out;
}

std::unique_ptr<planner> make_planner(scheduler_policy policy) {
  switch (policy) {
    case scheduler_policy::batch_oblivious:
      return std::make_unique<batch_oblivious_planner>();
    case scheduler_policy::nexus:
    case scheduler_policy::static_plan:
      break;  // static plans are made by placement; epochs pack as nexus
  }
  return std::make_unique<nexus_planner>();
}

std::vector<std::string> check_plan(const plan& p, const std::vector<session>& ss, const device_caps& caps) {
  std::vector<std::string> bad;
  std::vector<double> covered(ss.size(), 0);
  auto where = [&](const device_plan& d) { return "device " + std::to_string(d.id); };
  for (auto& d : p.devices) {
    double busy = 0;
    for (auto& a : d.sessions) {
      auto& s = ss[a.session];
      double l = l_ms(s, a.batch);
      covered[a.session] += a.rate;
      if (a.batch > s.model->batch_limit())
        bad.push_back(where(d) + ": " + s.model->name + " batch " + std::to_string(a.batch) + " over its limit");
      if (d.dedicated) {
        if (2 * l > s.slo_ms + eps) bad.push_back(where(d) + ": " + s.model->name + " worst case 2·l(B) over its SLO");
        if (a.rate > a.batch / l * 1000 + 1e-6)
          bad.push_back(where(d) + ": " + s.model->name + " rate over its throughput");
        continue;
      }
      busy += l;
      if (l + d.duty_cycle_ms > s.slo_ms + eps)
        bad.push_back(where(d) + ": " + s.model->name + " worst case duty cycle + l(b) over its SLO");
      if (a.batch + 1e-6 < d.duty_cycle_ms * a.rate / 1000)
        bad.push_back(where(d) + ": " + s.model->name + " batch too small for its rate in one cycle");
    }
    if (!d.dedicated && busy > d.duty_cycle_ms + eps) bad.push_back(where(d) + ": batches overrun the duty cycle");
    if (caps.memory_mb > 0 && memory_of(d.sessions, ss) > caps.memory_mb + eps)
      bad.push_back(where(d) + ": over memory");
  }
  for (size_t i = 0; i < ss.size(); ++i) {
    if (std::find(p.infeasible.begin(), p.infeasible.end(), i) != p.infeasible.end()) continue;
    if (covered[i] + 1e-6 < ss[i].rate)
      bad.push_back("session " + ss[i].model->name + " has " + std::to_string(covered[i]) + " of " +
                    std::to_string(ss[i].rate) + " req/s placed");
  }
  return bad;
}

}  // namespace sloserve::sched
