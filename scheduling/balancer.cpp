#include "scheduling/balancer.hpp"

#include <algorithm>
#include <vector>

namespace sloserve::sched {

namespace {
bool planned(const backend_load& b) {
  return b.live && !b.spare;
}
}  // namespace

uint32_t spill_threshold(uint32_t spill_at, uint32_t frontends) {
  if (spill_at == 0) return 0;
  auto f = std::max(frontends, 1u);
  return std::max(1u, (spill_at + f - 1) / f);
}

std::optional<size_t> balancer::route(const std::vector<backend_load>& b, std::mt19937_64& rng) const {
  auto k = pick(b, rng);
  if (k && !b[*k].busy()) return k;
  // The spare with the most room (share of its threshold left), else, with no planned backend
  // live, the one with the least outstanding.
  std::optional<size_t> best;
  double best_room = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    if (!b[i].live || !b[i].spare) continue;
    double room =
        b[i].spill_at ? 1 - static_cast<double>(b[i].outstanding) / b[i].spill_at : 1 / (1.0 + b[i].outstanding);
    if (k && room <= 0) continue;
    if (!best || room > best_room) best = i, best_room = room;
  }
  return best ? best : k;
}

std::optional<size_t> p2c_balancer::pick(const std::vector<backend_load>& b, std::mt19937_64& rng) const {
  if (b.empty()) return std::nullopt;
  if (b.size() == 1) return planned(b[0]) ? std::optional<size_t>(0) : std::nullopt;
  // Two distinct planned backends, each drawn uniformly by rejection. A route of thousands of
  // instances (a large fleet) is not scanned per pick: only when draws keep missing (few planned
  // among many, or fewer than two) does a scan settle it.
  std::uniform_int_distribution<size_t> d(0, b.size() - 1);
  auto draw = [&](size_t other) -> std::optional<size_t> {
    for (int tries = 0; tries < 32; ++tries)
      if (auto i = d(rng); planned(b[i]) && i != other) return i;
    return std::nullopt;
  };
  auto x = draw(b.size());
  auto y = x ? draw(*x) : std::nullopt;
  if (!x || !y) {
    // Reused: on a large fleet this scan runs for nearly every pick of a model planned on few
    // of the devices that hold it.
    thread_local std::vector<size_t> live;
    live.clear();
    for (size_t i = 0; i < b.size(); ++i)
      if (planned(b[i])) live.push_back(i);
    if (live.empty()) return std::nullopt;
    if (live.size() == 1) return live[0];
    if (!x) x = live[std::uniform_int_distribution<size_t>(0, live.size() - 1)(rng)];
    std::erase(live, *x);
    y = live[std::uniform_int_distribution<size_t>(0, live.size() - 1)(rng)];
  }
  auto cost = [&](size_t i) { return (b[i].outstanding + 1) / std::max(b[i].weight, 1e-9); };
  return cost(*y) < cost(*x) ? *y : *x;
}

std::optional<size_t> weighted_random_balancer::pick(const std::vector<backend_load>& b, std::mt19937_64& rng) const {
  double total = 0;
  for (auto& x : b)
    if (planned(x)) total += std::max(x.weight, 0.0);
  if (total <= 0) {
    for (size_t i = 0; i < b.size(); ++i)
      if (planned(b[i])) return i;
    return std::nullopt;
  }
  double u = std::uniform_real_distribution<double>(0, total)(rng);
  std::optional<size_t> last;
  for (size_t i = 0; i < b.size(); ++i) {
    if (!planned(b[i])) continue;
    last = i;
    u -= std::max(b[i].weight, 0.0);
    if (u < 0) return i;
  }
  return last;
}

std::optional<size_t> fill_balancer::pick(const std::vector<backend_load>& b, std::mt19937_64&) const {
  std::optional<size_t> least;
  double least_load = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    if (!planned(b[i])) continue;
    if (!b[i].busy()) return i;
    double load = static_cast<double>(b[i].outstanding) / b[i].spill_at;
    if (!least || load < least_load) least = i, least_load = load;
  }
  return least;
}

namespace {

// The batch the request before filled: is its backend still running an earlier one (more
// outstanding than that batch)? Judged once, at the next request or dummy.
void judge_filled(const std::vector<backend_load>& b, dispatch_state& s) {
  if (s.filled && *s.filled < b.size()) s.lagging = b[*s.filled].outstanding > b[*s.filled].batch;
  s.filled.reset();
}

bool in_turn(const backend_load& l) {
  return planned(l) && l.batch > 0;
}

// The stream's planned rate (requests and dummies) over the backends in turn.
double stream_rate(const std::vector<backend_load>& b) {
  double w = 0;
  for (auto& l : b)
    if (in_turn(l)) w += l.weight + l.padding;
  return std::max(w, 1e-9);
}

// The stream's planned dummies/s over the backends in turn.
double padding_rate(const std::vector<backend_load>& b) {
  double p = 0;
  for (auto& l : b)
    if (in_turn(l)) p += l.padding;
  return p;
}

// The dummies the stream owes the open batch: the padding rate (this owner's share) over the
// time it has been open so far, less those it took; by the clock.
void accrue(const std::vector<backend_load>& b, dispatch_state& s) {
  if (s.clock >= 0 && s.opened >= 0 && s.current && *s.current < b.size()) {
    double from = std::max(s.accrued_at, s.opened);
    if (s.clock > from) s.owed += padding_rate(b) / std::max(s.frontends, 1u) * (s.clock - from);
    s.owed = std::min(s.owed, static_cast<double>(b[*s.current].batch));
  }
  s.accrued_at = s.clock;
}

// How long backend k's batch takes to fill at the stream's planned rate, from its first request
// (this owner's share of the batch at its share of the stream).
double fill_s(const std::vector<backend_load>& b, const dispatch_state& s, size_t k) {
  return b[k].batch * static_cast<double>(std::max(s.frontends, 1u)) / stream_rate(b);
}

}  // namespace

std::optional<size_t> fill_balancer::dispatch(const std::vector<backend_load>& b, dispatch_state& s,
                                              std::mt19937_64& rng) const {
  return place(b, s, rng, false);
}

std::optional<size_t> fill_balancer::place(const std::vector<backend_load>& b, dispatch_state& s, std::mt19937_64& rng,
                                           bool dummy) const {
  auto in_turn = [&](size_t i) { return sched::in_turn(b[i]); };
  bool any = false;
  for (size_t i = 0; i < b.size() && !any; ++i) any = in_turn(i);
  if (!any) return route(b, rng);
  if (s.due.size() != b.size()) {
    dispatch_state fresh;
    fresh.clock = s.clock, fresh.frontends = s.frontends;
    s = std::move(fresh);
    s.due.assign(b.size(), 0);
  }
  judge_filled(b, s);
  if (s.free_at.size() != b.size()) s.free_at.assign(b.size(), -1e300);
  accrue(b, s);
  auto filled = [&](size_t k) {
    if (dummy) s.owed = std::max(0.0, s.owed - 1);  // a dummy pays one owed
    s.last = s.clock;
    if (s.sent != b[k].batch) return;
    s.filled = k;
    if (s.clock >= 0) s.free_at[k] = std::max(s.free_at[k], s.clock) + b[k].duration_s;
  };
  // Beyond its spill point and a batch running with the next collecting, a backend is over
  // what the turn can serve (load above the plan): the request goes as fill routes it.
  auto overfull = [&](size_t k) {
    return b[k].spill_at > 0 && b[k].outstanding >= std::max(b[k].spill_at, 3 * b[k].batch);
  };
  if (s.current && *s.current < b.size() && in_turn(*s.current) && s.sent < b[*s.current].batch) {
    if (overfull(*s.current)) return route(b, rng);
    ++s.sent;
    filled(*s.current);
    return s.current;
  }
  // With a clock: only a backend free by the time its batch would fill at the stream's rate
  // takes the next batch (else the one free soonest).
  double stream = stream_rate(b);
  double gap = std::max(s.frontends, 1u) / stream;  // between this owner's requests, as planned
  auto ready = [&](size_t i) { return s.clock < 0 || s.free_at[i] <= s.clock + fill_s(b, s, i) - gap + 1e-9; };
  std::optional<size_t> next, soonest;
  for (size_t i = 0; i < b.size(); ++i) {
    if (!in_turn(i)) continue;
    s.due[i] = std::max(s.due[i], s.now);
    if (!soonest || s.free_at[i] < s.free_at[*soonest]) soonest = i;
    if (ready(i) && (!next || s.due[i] < s.due[*next])) next = i;
  }
  if (!next) next = soonest;
  if (overfull(*next)) return route(b, rng);
  s.now = s.due[*next];
  s.due[*next] += b[*next].batch / std::max(b[*next].weight + b[*next].padding, 1e-9);
  s.current = next;
  s.sent = 1;
  s.opened = s.clock;
  filled(*next);
  return next;
}

std::optional<size_t> fill_balancer::dispatch_padding(const std::vector<backend_load>& b, dispatch_state& s,
                                                      std::mt19937_64& rng) const {
  judge_filled(b, s);
  if (s.lagging && s.due.size() == b.size()) return std::nullopt;
  return place(b, s, rng, true);
}

std::optional<double> fill_balancer::padding_deadline(const std::vector<backend_load>& b,
                                                      const dispatch_state& s) const {
  if (!s.current || *s.current >= b.size() || s.due.size() != b.size() || s.opened < 0) return std::nullopt;
  auto& l = b[*s.current];
  if (!in_turn(l) || s.sent >= l.batch) return std::nullopt;
  // Not before its backend is free: dummies on a busy machine would only keep it behind.
  double free = *s.current < s.free_at.size() ? s.free_at[*s.current] : -1e300;
  return std::max(s.opened + fill_s(b, s, *s.current), free);
}

uint32_t fill_balancer::padding_due(const std::vector<backend_load>& b, dispatch_state& s) const {
  if (!s.current || *s.current >= b.size() || s.due.size() != b.size()) return 0;
  auto& l = b[*s.current];
  if (!in_turn(l) || s.sent >= l.batch) return 0;
  uint32_t lack = l.batch - s.sent;
  // Owed by the time the batch has been open, or due by the clock while the stream flows.
  accrue(b, s);
  bool owed = s.owed + 1e-6 >= lack;
  auto deadline = padding_deadline(b, s);
  bool late = deadline && s.clock + 1e-9 >= *deadline && s.clock - s.last <= fill_s(b, s, *s.current) / 10 + 1e-9;
  if (!owed && !late) return 0;
  judge_filled(b, s);
  if (!s.lagging) return lack;
  s.owed = std::max(0.0, s.owed - lack);  // forgiven: requests fill the batch
  return 0;
}

std::unique_ptr<balancer> make_balancer(balancer_kind kind) {
  if (kind == balancer_kind::weighted_random) return std::make_unique<weighted_random_balancer>();
  return std::make_unique<p2c_balancer>();
}

}  // namespace sloserve::sched
