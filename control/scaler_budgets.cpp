// The scaler's stage budgets: each pipeline's SLO split by the query analyzer (sponge, biscale),
// and IPA's joint choice of every stage's variant, batch and replicas.

#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <cmath>

#include "control/scaler_core.hpp"
#include "scheduling/ipa.hpp"
#include "scheduling/policies/ipa/config.hpp"
#include "scheduling/query_analyzer.hpp"

namespace sloserve {

std::vector<scaler_core::stage_info*> scaler_core::stages_of(size_t pi) {
  std::vector<stage_info*> out(cfg_->pipelines[pi].stages.size(), nullptr);
  for (auto& s : stages_)
    if (s.pipeline == pi && s.primary) out[s.stage] = &s;
  return out;
}

std::vector<scaler_core::stage_info*> scaler_core::entries_of(const stage_info& s) {
  std::vector<stage_info*> out;
  for (auto& x : stages_)
    if (x.pipeline == s.pipeline && x.stage == s.stage) out.push_back(&x);
  return out;
}

sched::scale_stage scaler_core::whole_stage(const stage_info& s) const {
  auto out = s.last;
  for (auto& x : stages_)
    if (&x != &s && x.pipeline == s.pipeline && x.stage == s.stage) {
      out.rate += x.last.rate;
      out.predicted += x.last.predicted;
    }
  return out;
}

// Sponge and biscale: each pipeline's SLO split by the query analyzer (pipelines/) so that the
// one-core instances it needs, sum of rate_i / T_i(budget_i), are fewest, at the stages'
// measured rates (1 each before any). The budgets go to the routing table with the next
// deployment; they change only when a stage's moves by more than 2% of the SLO.
void scaler_core::split_budgets() {
  bool changed = false;
  for (size_t pi = 0; pi < cfg_->pipelines.size(); ++pi) {
    auto& p = cfg_->pipelines[pi];
    auto by_stage = stages_of(pi);
    std::vector<double> rates;
    for (auto* s : by_stage) rates.push_back(s && whole_stage(*s).rate > 0 ? whole_stage(*s).rate : 1.0);
    auto split = dp_split(p, rates, [&](size_t k, double budget) {
      auto* s = by_stage[k];
      return s ? sched::one_core_throughput(s->l, budget, s->model->batch_limit()) : 0.0;
    });
    for (size_t k = 0; k < by_stage.size(); ++k) {
      if (!by_stage[k] || !(split.budget_ms[k] > 0)) continue;
      if (std::abs(split.budget_ms[k] - by_stage[k]->split_budget_ms) <= 0.02 * p.slo_ms) continue;
      for (auto* e : entries_of(*by_stage[k])) e->split_budget_ms = split.budget_ms[k];  // its versions too
      changed = true;
    }
  }
  if (changed) route_budgets([](const stage_info& s) { return s.split_budget_ms; });
}

// IPA every interval (and on a surge): per pipeline, the variant, batch and replicas of every stage that
// maximise alpha * accuracy - beta * cores - delta * sum of batches at the predicted rates
// (headroom included), each replica at its variant's base cores. Stage budgets are IPA's
// latencies stretched so that the longest path takes the whole SLO. A pipeline no choice serves
// within its SLO runs its fastest variants at batch 1, enough of them for the rate.
void scaler_core::ipa_shapes() {
  auto& w = cfg_->scheduler.section_as<sched::ipa::options>();
  for (size_t pi = 0; pi < cfg_->pipelines.size(); ++pi) {
    auto& p = cfg_->pipelines[pi];
    auto by_stage = stages_of(pi);
    // No traffic yet: planned for one request a second, so that every stage has a replica.
    std::vector<double> rates;
    for (auto* s : by_stage) rates.push_back(std::max({s->last.predicted, s->last.rate, 1.0}));
    std::vector<double> fallthrough;
    for (auto* s : by_stage) fallthrough.push_back(s->fallthrough);
    auto in = ipa_problem(models_, p, rates, fallthrough);
    auto solved = sched::solve_ipa(in, p.slo_ms, {w.alpha, w.beta, w.delta});
    std::vector<sched::ipa_choice> choices;
    if (solved) {
      choices = solved->stages;
    } else {
      // The fastest variant of each stage at batch 1 (a cascade takes both of its models).
      auto slowest_path = [](const sched::ipa_variant& v) { return v.at(1) + (v.then ? v.then->at(1) : 0); };
      for (size_t k = 0; k < p.stages.size(); ++k) {
        size_t fastest = 0;
        for (size_t v = 1; v < in[k].variants.size(); ++v)
          if (slowest_path(in[k].variants[v]) < slowest_path(in[k].variants[fastest])) fastest = v;
        choices.push_back({fastest, 1, 1, 0});
      }
      auto fallback = sched::evaluate_ipa(in, choices, {w.alpha, w.beta, w.delta});
      choices = fallback.stages;
      spdlog::warn("{}: scaler ipa: pipeline '{}': {}; running its fastest variants at batch 1", name_, p.name,
                   solved.error());
    }
    auto budgets = ipa_stage_budgets(p, choices);
    for (size_t k = 0; k < p.stages.size(); ++k) {
      auto& s = *by_stage[k];
      auto& c = choices[k];
      auto& v = in[k].variants[c.variant];
      int r = replica_cores(*v.model);
      auto runs = [](const model_spec* m, bool cascade, const model_spec* second) {
        return cascade ? m->name + " then " + second->name : m->name;
      };
      if (s.model != v.model || s.cascading != v.then.has_value())
        spdlog::info("{}: scaler ipa: {}.{}: {} -> {} at {:.1f} requests/s", name_, p.name, p.stages[k].name,
                     runs(s.model, s.cascading, s.second), runs(v.model, v.then.has_value(), s.second), in[k].rate);
      s.model = v.model;
      s.cascading = v.then.has_value();
      if (v.then) {
        s.second_shape = {};
        s.second_shape.instances = s.second_shape.base_instances = c.replicas2;
        s.second_shape.cores = s.second_shape.horizontal_cores = replica_cores(*v.then->model);
        s.second_shape.batch = s.second_shape.horizontal_batch = c.batch2;
        s.first_share = ipa_first_share(c, budgets[k]);
      }
      s.l = latency_of(*s.model);
      s.shape = {};
      s.shape.instances = c.replicas;
      s.shape.cores = s.shape.horizontal_cores = r;
      s.shape.batch = s.shape.horizontal_batch = c.batch;
      s.shape.base_instances = c.replicas;
      s.shape.budget_ms = budgets[k];
    }
  }
  route_budgets([](const stage_info& s) { return s.shape.budget_ms; });
}

// FA2 every horizontal period (and at once for a surge): each pipeline's DAG planned at once at
// its stages' whole rates; a stage over versions then sizes each version alone for its own rate
// within the stage's budget. The budgets are routed, and with a central queue each stage's
// planned batch and the time it fills.
void scaler_core::fa2_plan() {
  // FA2 plans each pipeline's DAG at once; stage k of pipeline p is stages_' entry with it.
  for (size_t pi = 0; pi < cfg_->pipelines.size(); ++pi) {
    std::vector<size_t> idx(cfg_->pipelines[pi].stages.size(), SIZE_MAX);
    for (size_t k = 0; k < stages_.size(); ++k)
      if (stages_[k].pipeline == pi && stages_[k].primary) idx[stages_[k].stage] = k;
    std::vector<sched::scale_stage> in;
    for (auto k : idx) in.push_back(whole_stage(stages_[k]));
    auto shapes = sched::fa2_shapes(in, cfg_->pipelines[pi].slo_ms);
    for (size_t j = 0; j < idx.size(); ++j) {
      auto entries = entries_of(stages_[idx[j]]);
      if (entries.size() == 1) {
        stages_[idx[j]].shape = shapes[j];
        continue;
      }
      // A stage over versions: each version sized alone for its own rate within the stage's budget.
      for (auto* e : entries) {
        auto alone = e->last;
        alone.children.clear();
        alone.slo_ms = 0;
        e->shape = sched::fa2_shapes({alone}, shapes[j].budget_ms).front();
        e->shape.budget_ms = shapes[j].budget_ms;
      }
    }
  }
  route_budgets([](const stage_info& s) { return s.shape.budget_ms; });
  // FA2's central queue: each stage's planned batches go whole to its instances in turn,
  // each filling in b/λ at the stage's planned rate.
  if (cfg_->scaler.central_queue) {
    std::map<std::string, batch_in_turn> in_turn;
    for (auto& s : stages_) {
      double rate = std::max(s.last.predicted, s.last.rate);
      auto b = std::max(1, s.shape.planned_batch);
      if (rate > 0) in_turn[s.model->name] = {static_cast<uint32_t>(b), b * 1000.0 / rate};
    }
    prov_->set_in_turn(std::move(in_turn));
  }
}

}  // namespace sloserve
