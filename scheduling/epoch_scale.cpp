// Epochs at a scale: the largest multiple of the load a cluster of fixed size carries, the plan
// for what the devices hold before there is load, the variants memory allows, and the policy's dispatch.

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "scheduling/catalogue.hpp"
#include "scheduling/epoch.hpp"
#include "scheduling/policies/policy.hpp"

namespace sloserve::sched {

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

namespace {

// Fits: every session served, no device missing.
bool fits_cluster(const epoch_result& r) {
  return r.devices_missing == 0 && r.placement.infeasible.empty();
}

// Short of devices, with pipelines of several priorities: each priority, from the highest, keeps
// the largest share of its load that fits beside what the higher ones kept (the lower ones at
// nothing meanwhile); the lowest are shed first. `res` holds the plan and `in.rates` its rates;
// returns the smallest share kept.
double fit_by_priority(epoch_input& in, const epoch_result* prev, epoch_result& res) {
  auto& pipes = *in.pipelines;
  auto base = in.rates;
  std::vector<int> levels;
  for (auto& p : pipes) levels.push_back(p.priority);
  std::sort(levels.rbegin(), levels.rend());
  levels.erase(std::unique(levels.begin(), levels.end()), levels.end());
  std::vector<double> kept(base.size(), 0);
  auto fits = [](const epoch_result& x) { return x.devices_missing == 0; };
  for (int level : levels) {
    auto at = [&](double share) {
      for (size_t k = 0; k < base.size(); ++k)
        in.rates[k] = base[k] * (pipes[k].priority == level ? share : pipes[k].priority > level ? kept[k] : 0);
      auto trial = plan_epoch(in, prev);
      bool ok = trial && fits(*trial);
      if (ok) res = std::move(*trial);
      return ok;
    };
    double lo = 0, hi = 1;
    if (at(1)) {
      lo = 1;
    } else {
      for (int i = 0; i < 12; ++i) {
        double mid = lo + (hi - lo) / 2;
        (at(mid) ? lo : hi) = mid;
      }
    }
    for (size_t k = 0; k < base.size(); ++k)
      if (pipes[k].priority == level) kept[k] = lo;
  }
  for (size_t k = 0; k < base.size(); ++k) in.rates[k] = base[k] * kept[k];
  if (auto final_plan = plan_epoch(in, prev); final_plan && fits(*final_plan)) res = std::move(*final_plan);
  return *std::min_element(kept.begin(), kept.end());
}

// MCDNN's per-request budgets (scheduling/mcdnn_budget.hpp): each stage with variants keeps
// those within its budget (the cheapest where none is), so that the catalogue below picks the
// most accurate of them that fits. Returns what each stage gave up for the budget.
std::vector<std::string> keep_within_budget(const epoch_input& in, const std::vector<std::vector<double>>& rates,
                                            std::vector<pipeline>& pipes) {
  std::vector<std::string> degraded;
  auto& models = *in.models;
  double price = mean_price(in.slots);
  std::vector<std::pair<size_t, size_t>> stages;
  std::vector<budget_use> uses;
  for (size_t pi = 0; pi < pipes.size(); ++pi)
    for (size_t s = 0; s < pipes[pi].stages.size(); ++s) {
      auto& st = pipes[pi].stages[s];
      if (st.variant_indices.size() < 2) continue;
      budget_use u;
      u.frequency = rates[pi][s];
      u.load_cost = load_cost(models[st.model_index], price);
      if (auto it = in.budget->since_load_s.find({pi, s}); it != in.budget->since_load_s.end())
        u.since_load_s = it->second;
      stages.emplace_back(pi, s);
      uses.push_back(u);
    }
  auto budgets = per_request_budgets(in.budget->remaining, in.budget->remaining_s, uses);
  for (size_t k = 0; k < stages.size(); ++k) {
    auto& p = pipes[stages[k].first];
    auto& st = p.stages[stages[k].second];
    std::vector<double> costs;
    for (auto m : st.variant_indices) costs.push_back(cost_per_request(models[m], p.slo_ms, price));
    auto pick = variant_within(st.variant_indices, costs, models, budgets[k]);
    auto at = std::find(st.variant_indices.begin(), st.variant_indices.end(), pick) - st.variant_indices.begin();
    double limit = std::max(budgets[k], costs[static_cast<size_t>(at)]);
    std::vector<size_t> kept;
    for (size_t j = 0; j < costs.size(); ++j)
      if (costs[j] <= limit) kept.push_back(st.variant_indices[j]);
    if (kept.size() == st.variant_indices.size()) continue;
    char each[32];
    std::snprintf(each, sizeof each, "%.3g", budgets[k]);
    degraded.push_back("pipeline '" + p.name + "' stage '" + st.name + "': " + models[pick].name +
                       " within its budget of " + each + " a request");
    st.variant_indices = std::move(kept);
    st.model_index = pick;
    st.model = models[pick].name;
  }
  return degraded;
}

}  // namespace

catalogue_choice choose_epoch_variants(epoch_input& in, const epoch_result* previous) {
  auto pipes = *in.pipelines;
  std::vector<std::vector<double>> rates;
  for (size_t pi = 0; pi < pipes.size(); ++pi) {
    auto& p = pipes[pi];
    auto fan = pi < in.fanouts.size() && !in.fanouts[pi].empty() ? in.fanouts[pi] : declared_fanout(p);
    rates.push_back(stage_rates(p, pi < in.rates.size() ? in.rates[pi] : 0, fan));
  }
  std::vector<std::string> for_budget;
  if (in.budget) for_budget = keep_within_budget(in, rates, pipes);
  auto choice = choose_variants(pipes, *in.models, rates, [&](const std::vector<pipeline>& candidate) {
    auto trial = in;
    trial.pipelines = &candidate;
    auto r = plan_epoch(trial, previous);
    return r && fits_cluster(*r);
  });
  // The stages keep every variant they may run: the budget narrowed this epoch's choice only.
  for (size_t pi = 0; pi < pipes.size(); ++pi)
    for (size_t s = 0; s < pipes[pi].stages.size(); ++s)
      choice.pipelines[pi].stages[s].variant_indices = (*in.pipelines)[pi].stages[s].variant_indices;
  choice.degraded.insert(choice.degraded.begin(), for_budget.begin(), for_budget.end());
  in.chosen = std::make_shared<const std::vector<pipeline>>(choice.pipelines);
  in.pipelines = in.chosen.get();
  return choice;
}

bool priorities_differ(const std::vector<pipeline>& pipes) {
  return std::any_of(pipes.begin(), pipes.end(), [&](auto& p) { return p.priority != pipes.front().priority; });
}

expected<scaled_epoch> plan_scaled_epoch(epoch_input& in, const epoch_result* previous) {
  std::optional<catalogue_choice> variants;
  if (in.rates.size() == in.pipelines->size() && has_variants(*in.pipelines))
    variants = choose_epoch_variants(in, previous);
  auto planned = plan_epoch(in, previous);
  if (!planned) return fail(planned.error());
  scaled_epoch out{std::move(*planned), 1};
  if (variants) out.degraded = variants->degraded, out.variants_fit = variants->fits;
  auto& r = out.result;
  // Piccolo and Graft plan for the cost of the load as measured (with the configured headroom):
  // spare devices stay off.
  if (!plans_least_cost(in.policy) && r.devices_missing == 0 && r.placement.devices.size() < in.slots.size())
    out.scale = fit_scale(in, previous, 1, 4, 8, r, fits_cluster);
  else if (r.devices_missing > 0 && priorities_differ(*in.pipelines))
    out.scale = fit_by_priority(in, previous, r);
  else if (r.devices_missing > 0)
    out.scale = fit_scale(in, previous, 0, 1, 12, r, [](const epoch_result& x) { return x.devices_missing == 0; });
  return out;
}

expected<scaled_epoch> plan_capacity_epoch(epoch_input& in, const epoch_result* previous) {
  in.rates.assign(in.pipelines->size(), 1.0);
  in.fanouts.clear();
  in.fallthroughs.clear();
  auto planned = plan_epoch(in, previous);
  if (!planned) return fail(planned.error());
  scaled_epoch out{std::move(*planned), 1};
  if (!fits_cluster(out.result)) {
    out.scale = fit_scale(in, previous, 0, 1, 12, out.result, fits_cluster);
    return out;
  }
  // Doubling until the plan no longer fits, then bisecting between the last two.
  double lo = 1, hi = 2;
  for (; hi < 1e7; lo = hi, hi *= 2) {
    for (auto& r : in.rates) r = hi;
    auto trial = plan_epoch(in, previous);
    if (!trial || !fits_cluster(*trial)) break;
    out.result = std::move(*trial);
  }
  for (auto& r : in.rates) r = 1;
  out.scale = fit_scale(in, previous, lo, hi, 6, out.result, fits_cluster);
  if (out.scale == lo)  // no bisection step fitted: the result holds the plan at lo
    for (auto& r : in.rates) r = lo;
  return out;
}

expected<load_epoch> plan_for_load(epoch_input& in, const epoch_result* previous, bool capacity,
                                   std::vector<double> planning) {
  auto planned = capacity ? plan_capacity_epoch(in, previous) : plan_scaled_epoch(in, previous);
  if (!planned) return fail(planned.error());
  load_epoch out{std::move(*planned), {std::move(planning), {}, {}}};
  bool short_of_devices = !capacity && out.plan.scale < 1;
  constexpr double unbounded = std::numeric_limits<double>::infinity();
  for (size_t pi = 0; pi < in.rates.size(); ++pi) {
    out.planned.carried.push_back(short_of_devices ? unbounded : in.rates[pi]);
    auto& p = (*in.pipelines)[pi];
    auto fan = pi < in.fanouts.size() && !in.fanouts[pi].empty() ? in.fanouts[pi] : declared_fanout(p);
    out.planned.stage_carried.push_back(short_of_devices ? std::vector<double>(p.stages.size(), unbounded)
                                                         : stage_rates(p, in.rates[pi], fan));
  }
  return out;
}

expected<epoch_result> plan_epoch(const epoch_input& in, const epoch_result* previous) {
  if (in.policy) return in.policy->plan(in, previous);
  return plan_packed_epoch(in, previous, nexus_planner{}, true);
}

bool plans_least_cost(const scheduling_policy* p) {
  return p && p->plans_least_cost();
}

}  // namespace sloserve::sched
