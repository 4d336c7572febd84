#include "scheduling/epoch.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <tuple>

namespace sloserve::sched {

namespace {

bool slot_fits(const device_slot& slot, const device_plan& d, const std::vector<session>& ss) {
  for (auto& a : d.sessions) {
    auto& name = ss[a.session].model->name;
    if (!slot.models.empty() && std::find(slot.models.begin(), slot.models.end(), name) == slot.models.end())
      return false;
  }
  return slot.memory_mb <= 0 || d.memory_mb <= slot.memory_mb + 1e-9;
}

}  // namespace

namespace {

// Sessions from the splits. Budgets are rounded to 0.1 ms so that stages that share a model and
// an SLO become one session, and so do variants that share a prefix and an SLO.
void collect_sessions(const epoch_input& in, const std::vector<std::vector<double>>& rates, epoch_result& out) {
  auto& pipes = *in.pipelines;
  auto& models = *in.models;
  out.sessions.clear();
  out.members.clear();
  out.models_of.clear();
  std::map<std::pair<std::string, long>, size_t> session_of;
  for (size_t pi = 0; pi < pipes.size(); ++pi) {
    auto& p = pipes[pi];
    for (size_t s = 0; s < p.stages.size(); ++s) {
      auto budget = std::floor(out.splits[pi].budget_ms[s] * 10) / 10;
      auto& model = models[p.stages[s].model_index];
      auto key = std::make_pair(model.is_variant() ? "prefix:" + model.prefix : model.name,
                                static_cast<long>(std::lround(budget * 10)));
      auto it = session_of.find(key);
      if (it == session_of.end()) {
        it = session_of.emplace(key, out.sessions.size()).first;
        // A merged family plans with its first variant's profile: the suffixes are small.
        out.sessions.push_back({&model, budget, 0});
        out.members.emplace_back();
        out.models_of.emplace_back();
      }
      out.sessions[it->second].rate += rates[pi][s];
      out.members[it->second].emplace_back(pi, s);
      auto& mo = out.models_of[it->second];
      auto m = std::find_if(mo.begin(), mo.end(), [&](auto& x) { return x.first == &model; });
      if (m == mo.end())
        mo.emplace_back(&model, rates[pi][s]);
      else
        m->second += rates[pi][s];
    }
  }
}

// Places out.sessions and binds the placed devices to slots: a device keeps the previous slot of
// its id where it still fits. Slots are matched by (node, device): the set of live slots may
// differ between epochs.
void place(const epoch_input& in, const planner& planner, const epoch_result* previous, epoch_result& out) {
  device_caps caps;  // per-slot memory is checked when binding to slots
  out.placement = previous ? planner.make(out.sessions, caps, &previous->placement, &previous->sessions)
                           : planner.make(out.sessions, caps);
  out.slots = in.slots;
  out.slot_of.assign(out.placement.devices.size(), -1);
  out.devices_missing = 0;
  std::vector<bool> taken(in.slots.size(), false);
  auto slot_index = [&](const device_slot& x) -> int {
    for (size_t s = 0; s < in.slots.size(); ++s)
      if (in.slots[s].node == x.node && in.slots[s].device == x.device) return static_cast<int>(s);
    return -1;
  };
  if (previous)
    for (size_t k = 0; k < out.placement.devices.size(); ++k)
      for (size_t j = 0; j < previous->placement.devices.size(); ++j)
        if (previous->placement.devices[j].id == out.placement.devices[k].id) {
          int ps = j < previous->slot_of.size() ? previous->slot_of[j] : -1;
          int s = ps >= 0 ? slot_index(previous->slots[static_cast<size_t>(ps)]) : -1;
          if (s >= 0 && !taken[s] && slot_fits(in.slots[s], out.placement.devices[k], out.sessions))
            out.slot_of[k] = s, taken[s] = true;
        }
  for (size_t k = 0; k < out.placement.devices.size(); ++k) {
    if (out.slot_of[k] >= 0) continue;
    for (size_t s = 0; s < in.slots.size(); ++s)
      if (!taken[s] && slot_fits(in.slots[s], out.placement.devices[k], out.sessions)) {
        out.slot_of[k] = static_cast<int>(s);
        taken[s] = true;
        break;
      }
    if (out.slot_of[k] < 0) ++out.devices_missing;
  }
}

// What a plan costs, compared lexicographically: sessions it cannot serve, devices it lacks,
// devices it uses.
std::tuple<size_t, size_t, size_t> plan_cost(const epoch_result& r) {
  return {r.placement.infeasible.size(), r.devices_missing, r.placement.devices.size()};
}

}  // namespace

expected<epoch_result> plan_epoch(const epoch_input& in, const epoch_result* previous) {
  auto& pipes = *in.pipelines;
  auto& models = *in.models;
  if (in.rates.size() != pipes.size()) return fail("need one rate per pipeline");
  auto planner = make_planner(in.policy);
  epoch_result out;
  std::vector<std::vector<double>> rates;
  std::vector<throughput_fn> T;
  for (size_t pi = 0; pi < pipes.size(); ++pi) {
    auto& p = pipes[pi];
    auto fan = pi < in.fanouts.size() && !in.fanouts[pi].empty() ? in.fanouts[pi] : declared_fanout(p);
    rates.push_back(stage_rates(p, in.rates[pi], fan));
    T.push_back([&models, &p](size_t s, double L) { return max_throughput(models[p.stages[s].model_index], L); });
    out.splits.push_back(in.split == split_policy::dp ? dp_split(p, rates[pi], T[pi], in.steps) : even_split(p));
  }
  collect_sessions(in, rates, out);
  place(in, *planner, previous, out);
  if (in.split != split_policy::dp || in.neighbours <= 0) return out;
  // The DP counts devices fractionally, sum of rate / T; they come whole, and the packing merges
  // only residues whose duty cycles fit together. So the DP's split is compared with its
  // neighbours: the DP re-run with one stage held at a batch within `neighbours` of the one it
  // got. One that packs into fewer devices (serving every session) replaces it; one pass over
  // the stages in order.
  for (size_t pi = 0; pi < pipes.size(); ++pi) {
    auto& p = pipes[pi];
    for (size_t s = 0; s < p.stages.size(); ++s) {
      if (rates[pi][s] <= 0) continue;
      auto& m = models[p.stages[s].model_index];
      int got = saturating_batch(m, out.splits[pi].budget_ms[s]);
      for (int b : m.profile.plannable_batches(m.max_batch)) {
        if (b == got || std::abs(b - got) > in.neighbours) continue;
        double l = m.profile.latency_ms_at(b);
        if (l <= 0) continue;
        throughput_fn held = [&, s, b, l](size_t k, double L) {
          if (k != s) return T[pi](k, L);
          return 2 * l <= L ? b / l * 1000.0 : 0.0;
        };
        auto split = dp_split(p, rates[pi], held, in.steps);
        // dp_split falls back to the even split when nothing fits: no neighbour then.
        if (!std::isfinite(split_cost(p, rates[pi], split.budget_ms, held))) continue;
        epoch_result trial;
        trial.splits = out.splits;
        trial.splits[pi] = std::move(split);
        collect_sessions(in, rates, trial);
        place(in, *planner, previous, trial);
        if (plan_cost(trial) < plan_cost(out)) out = std::move(trial);
      }
    }
  }
  return out;
}

namespace {

// Bisects `steps` times for the largest scale in [lo, hi] at which the rates of `in`, scaled,
// plan so that `fits`. On success `res` holds that plan and `in.rates` its rates; otherwise
// both are left as they were. Returns the scale found (`lo` when none fit).
template <class Fits>
double fit_scale(epoch_input& in, const epoch_result* prev, double lo, double hi, int steps, epoch_result& res,
                 Fits fits) {
  auto base = in.rates;
  std::optional<double> best;
  for (int i = 0; i < steps; ++i) {
    double mid = lo + (hi - lo) / 2;
    for (size_t k = 0; k < base.size(); ++k) in.rates[k] = base[k] * mid;
    auto trial = plan_epoch(in, prev);
    if (trial && fits(*trial))
      lo = mid, best = mid, res = std::move(*trial);
    else
      hi = mid;
  }
  for (size_t k = 0; k < base.size(); ++k) in.rates[k] = base[k] * best.value_or(1);
  return lo;
}

}  // namespace

expected<scaled_epoch> plan_scaled_epoch(epoch_input& in, const epoch_result* previous) {
  auto planned = plan_epoch(in, previous);
  if (!planned) return fail(planned.error());
  scaled_epoch out{std::move(*planned), 1};
  auto& r = out.result;
  if (r.devices_missing == 0 && r.placement.devices.size() < in.slots.size())
    out.scale = fit_scale(in, previous, 1, 4, 8, r, [](const epoch_result& x) {
      return x.devices_missing == 0 && x.placement.infeasible.empty();
    });
  else if (r.devices_missing > 0)
    out.scale = fit_scale(in, previous, 0, 1, 12, r, [](const epoch_result& x) { return x.devices_missing == 0; });
  return out;
}

}  // namespace sloserve::sched
