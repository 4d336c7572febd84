#include "scheduling/policies/piccolo/epoch.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "scheduling/packing.hpp"
#include "scheduling/placement.hpp"
#include "scheduling/query_analyzer.hpp"

namespace sloserve::sched {

piccolo::types piccolo_types(const std::vector<device_slot>& slots) {
  piccolo::types out;
  for (auto& s : slots) {
    size_t at = 0;
    while (at < out.names.size() && (out.names[at] != s.type || std::abs(out.share[at] - s.share) > 1e-9)) ++at;
    if (at == out.names.size()) {
      out.names.push_back(s.type);
      out.share.push_back(s.share);
      out.price.push_back(s.price);
      out.available.push_back(0);
    }
    ++out.available[at];
  }
  return out;
}

std::string piccolo::types::label(size_t t) const {
  std::string out = names[t].empty() ? "(untyped)" : names[t];
  if (share[t] < 1) out += "@" + std::to_string(share[t]).substr(0, 4);
  return out;
}

std::vector<int> piccolo_batches(const latency_profile& profile, int max_batch) {
  std::vector<int> out;
  if (profile.tabular()) {
    for (int b : profile.batch)
      if (b <= max_batch) out.push_back(b);
  } else {
    for (int b = 1; b < max_batch; b *= 2) {
      out.push_back(b);
      if (b >= 2 && b + b / 2 < max_batch) out.push_back(b + b / 2);
    }
  }
  if (out.empty() || out.back() < max_batch) out.push_back(max_batch);
  if (profile.tabular() && max_batch > profile.batch.back()) out.pop_back();  // beyond what was measured
  return out;
}

std::vector<stage_module> stage_modules(const pipeline& p) {
  std::vector<stage_module> out;
  for (size_t s = 0; s < p.stages.size(); ++s) {
    auto& st = p.stages[s];
    double total = 0;
    for (auto& v : st.versions) total += v.weight;
    if (total <= 0) {
      out.push_back({s, st.model_index, 1});
      continue;
    }
    for (auto& v : st.versions)
      if (v.weight > 0) out.push_back({s, v.model_index, v.weight / total});
  }
  return out;
}

piccolo::app piccolo_app(const std::vector<model_spec>& models, const piccolo::types& types,
                         const std::vector<device_slot>& slots, const pipeline& p,
                         const std::vector<double>& stage_rates) {
  piccolo::app app;
  app.slo_s = p.slo_ms / 1e3;
  auto of = stage_modules(p);
  for (auto& sm : of) {
    auto& st = p.stages[sm.stage];
    auto& m = models[sm.model];
    piccolo::app_module mod;
    mod.rate = stage_rates[sm.stage] * sm.share;
    for (size_t k = 0; k < of.size(); ++k)
      if (std::find(st.children.begin(), st.children.end(), of[k].stage) != st.children.end()) mod.next.push_back(k);
    for (size_t t = 0; t < types.names.size(); ++t) {
      bool serves = std::any_of(slots.begin(), slots.end(), [&](const device_slot& x) {
        return x.type == types.names[t] && std::abs(x.share - types.share[t]) < 1e-9 && x.serves(m.name);
      });
      if (!serves) continue;
      auto& profile = m.profile_for(types.names[t]);
      double slow = m.share_slowdown(types.share[t]);
      auto batches = piccolo_batches(profile, m.max_batch);
      if (!profile.tabular() && mod.rate > 0) {
        // And the largest batches the whole SLO allows at the stage's rate, collected (d + b/w)
        // or waited out by a whole machine (2d): where a one-stage pipeline's best size lies.
        int collected = 0, waited = 0;
        for (int b = 1; b <= m.max_batch; ++b) {
          double d = profile.latency_ms_at(b) * slow;
          if (d + (b > 1 ? 1e3 * b / mod.rate : 0) <= p.slo_ms) collected = b;
          if (2 * d <= p.slo_ms) waited = b;
        }
        for (int b : {collected, waited})
          if (b > 0 && std::find(batches.begin(), batches.end(), b) == batches.end()) batches.push_back(b);
      }
      for (int b : batches)
        if (double d = profile.latency_ms_at(b) * slow / 1e3; d > 0) mod.configs.push_back({t, b, d, types.price[t]});
    }
    app.modules.push_back(std::move(mod));
  }
  return app;
}

namespace {

// Whether `pp`'s sets hold a machine of a type `marked`.
bool uses(const piccolo::pipeline_plan& pp, const std::vector<bool>& marked) {
  if (!pp.plan.feasible) return false;
  for (size_t s = 0; s < pp.plan.modules.size(); ++s)
    for (auto& m : pp.plan.modules[s].machines)
      if (marked[pp.configs[s][m.config].type]) return true;
  return false;
}

// Every pipeline planned with `price` per type; pipelines without traffic are left empty. With
// `before`, a pipeline whose sets hold no machine of a `raised` type keeps its plan (a dearer
// type it does not use changes nothing for it).
std::vector<piccolo::pipeline_plan> plan_all(const epoch_input& in, piccolo::types types,
                                             const std::vector<double>& price,
                                             const std::vector<piccolo::pipeline_plan>* before = nullptr,
                                             const std::vector<bool>* raised = nullptr) {
  auto real = types.price;
  types.price = price;
  auto& pipes = *in.pipelines;
  std::vector<piccolo::pipeline_plan> out(pipes.size());
  for (size_t pi = 0; pi < pipes.size(); ++pi) {
    if (in.rates[pi] <= 0) continue;
    if (before && raised && !uses((*before)[pi], *raised) && (*before)[pi].plan.feasible) {
      out[pi] = (*before)[pi];
      continue;
    }
    auto& p = pipes[pi];
    auto& pp = out[pi];
    auto fan = pi < in.fanouts.size() && !in.fanouts[pi].empty() ? in.fanouts[pi] : declared_fanout(p);
    pp.rates = stage_rates(p, in.rates[pi], fan);
    pp.of = stage_modules(p);
    pp.app = piccolo_app(*in.models, types, in.slots, p, pp.rates);
    pp.plan = plan_app(pp.app);
    for (size_t s = 0; s < pp.app.modules.size(); ++s) {
      auto sorted = by_ratio(pp.app.modules[s].configs);
      for (auto& c : sorted) c.price = real[c.type];
      pp.cost.push_back(pp.plan.feasible ? cost_of(sorted, pp.plan.modules[s].machines) : 0);
      pp.total += pp.cost.back();
      pp.configs.push_back(std::move(sorted));
    }
  }
  return out;
}

std::vector<size_t> needed(const std::vector<piccolo::pipeline_plan>& plans, size_t types) {
  std::vector<size_t> n(types, 0);
  for (auto& pp : plans) {
    if (!pp.plan.feasible) continue;
    for (size_t s = 0; s < pp.plan.modules.size(); ++s)
      for (auto& m : pp.plan.modules[s].machines) ++n[pp.configs[s][m.config].type];
  }
  return n;
}

size_t shortfall(const std::vector<size_t>& need, const piccolo::types& types) {
  size_t missing = 0;
  for (size_t t = 0; t < need.size(); ++t) missing += need[t] > types.available[t] ? need[t] - types.available[t] : 0;
  return missing;
}

}  // namespace

piccolo::cluster_plan plan_piccolo(const epoch_input& in) {
  piccolo::cluster_plan out;
  out.types = piccolo_types(in.slots);
  auto& types = out.types;
  // Scarce types cost more to the planner until the plans fit the slots there are.
  auto price = types.price;
  out.pipelines = plan_all(in, types, price);
  out.needed = needed(out.pipelines, types.names.size());
  // (Only while the sets need no more machines than there are slots: pricing cannot make up for
  // slots that do not exist.)
  auto machines = [](const std::vector<size_t>& n) { return std::accumulate(n.begin(), n.end(), size_t{0}); };
  size_t slots = machines(types.available);
  // Two rounds in a row that fit no more machines end it.
  for (int round = 0, stale = 0;
       round < 12 && stale < 2 && shortfall(out.needed, types) > 0 && machines(out.needed) <= slots; ++round) {
    std::vector<bool> raised(price.size(), false);
    for (size_t t = 0; t < price.size(); ++t)
      if (out.needed[t] > types.available[t]) price[t] *= 1.5, raised[t] = true;
    auto trial = plan_all(in, types, price, &out.pipelines, &raised);
    auto trial_need = needed(trial, types.names.size());
    if (shortfall(trial_need, types) < shortfall(out.needed, types))
      out.pipelines = std::move(trial), out.needed = std::move(trial_need), stale = 0;
    else
      ++stale;
  }
  return out;
}

expected<epoch_result> plan_piccolo_epoch(const epoch_input& in, const epoch_result* previous) {
  auto& pipes = *in.pipelines;
  auto& models = *in.models;
  if (in.rates.size() != pipes.size()) return fail("need one rate per pipeline");
  auto planned = plan_piccolo(in);
  epoch_result out;
  out.splits.resize(pipes.size());
  int next_id = 0;
  for (size_t pi = 0; pi < pipes.size(); ++pi) {
    auto& p = pipes[pi];
    auto& pp = planned.pipelines[pi];
    if (pp.rates.empty() || !pp.plan.feasible) {
      out.splits[pi] = even_split(p);
    } else {
      // The sets meet Piccolo's budgets; what the critical path leaves of the SLO is slack
      // every stage shares, so that devices drop only what would miss the SLO itself.
      // A stage over versions: the most any of them has (each version's path meets the SLO).
      std::vector<double> budget_ms(p.stages.size(), 0);
      for (size_t k = 0; k < pp.of.size(); ++k)
        budget_ms[pp.of[k].stage] = std::max(budget_ms[pp.of[k].stage], pp.plan.budget_s[k] * 1e3);
      auto split = offsets_from_budgets(p, budget_ms);
      double path = *std::max_element(split.finish_offset_ms.begin(), split.finish_offset_ms.end());
      if (path > 0 && path < p.slo_ms)
        for (auto& b : budget_ms) b *= p.slo_ms / path;
      out.splits[pi] = offsets_from_budgets(p, std::move(budget_ms));
    }
    if (pp.rates.empty()) continue;
    for (size_t k = 0; k < pp.of.size(); ++k) {
      auto s = pp.of[k].stage;
      auto& model = models[pp.of[k].model];
      double rate = pp.rates[s] * pp.of[k].share;
      size_t session = out.sessions.size();
      out.sessions.push_back({&model, std::floor(out.splits[pi].budget_ms[s] * 10) / 10, rate});
      out.members.push_back({{pi, s}});
      out.models_of.push_back({{&model, rate}});
      if (!pp.plan.feasible) {
        if (rate > 0) out.placement.infeasible.push_back(session);
        continue;
      }
      // The module's dummies travel with its requests: each machine carries both in proportion.
      auto& mp = pp.plan.modules[k];
      double carried = 0;
      for (auto& m : mp.machines) carried += m.rate;
      double real = carried > 0 ? std::min(1.0, rate / carried) : 0;
      for (auto& m : mp.machines) {
        auto& c = pp.configs[k][m.config];
        device_plan d;
        d.id = next_id++;
        d.dedicated = true;
        d.duty_cycle_ms = c.duration_s * 1e3;
        d.sessions.push_back({session, c.batch, m.rate * real});
        d.occupancy = m.rate / c.throughput();
        d.memory_mb = memory_of(d.sessions, out.sessions);
        d.type = planned.types.names[c.type];
        d.share = planned.types.share[c.type];
        d.dummy_rate = m.rate * (1 - real);
        // Theorem 1: a batch fills within the module's worst case less this machine's d.
        d.collect_ms = std::max(0.0, mp.worst_case_s - c.duration_s) * 1e3;
        out.placement.devices.push_back(std::move(d));
      }
    }
  }
  bind_slots(in, previous, out);
  return out;
}

piccolo::app piccolo_app(const cluster_config& cfg, const pipeline& p, double rate) {
  auto slots = device_slots(cfg);
  return piccolo_app(cfg.models, piccolo_types(slots), slots, p, stage_rates(p, rate, declared_fanout(p)));
}

}  // namespace sloserve::sched
