// The models as the scaler sizes them: l(b, c), and IPA's problem over a pipeline's variants.

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <string>

#include "control/scaler_core.hpp"
#include "pipelines/query_walk.hpp"
#include "scheduling/ipa.hpp"

namespace sloserve {

// l(b, c) of a model: its `cores` entry, else its profile as written at any core count.
core_latency latency_of(const model_spec& m) {
  if (m.cores) return *m.cores;
  core_latency l;
  l.table = std::make_shared<const latency_profile>(m.profile);
  return l;
}

int replica_cores(const model_spec& m) {
  return std::max(1, static_cast<int>(std::lround(m.base_cores)));
}

std::vector<std::string> apply_base_allocation(std::vector<model_spec>& models, const std::vector<pipeline>& pipelines,
                                               double threshold_rps, int max_cores) {
  std::map<size_t, int> base;
  for (auto& p : pipelines) {
    // Each stage's weight: the mean l(1, 1) of its variants; the SLO spread over the heaviest path.
    std::vector<double> weight(p.stages.size(), 0), path(p.stages.size(), 0);
    double heaviest = 0;
    for (auto v : p.topo) {
      auto& vi = p.stages[v].variant_indices;
      for (auto m : vi) weight[v] += latency_of(models[m]).at(1, 1) / static_cast<double>(vi.size());
      double before = 0;
      for (auto u : p.stages[v].parents) before = std::max(before, path[u]);
      path[v] = before + weight[v];
      heaviest = std::max(heaviest, path[v]);
    }
    for (size_t k = 0; k < p.stages.size(); ++k) {
      double sla = heaviest > 0 ? p.slo_ms * weight[k] / heaviest : p.slo_ms;
      for (auto m : p.stages[k].variant_indices) {
        auto& spec = models[m];
        if (!spec.cores) continue;
        int r = sched::ipa_base_allocation(*spec.cores, threshold_rps, sla, spec.batch_limit(), max_cores);
        base[m] = std::max(base[m], r ? r : max_cores);
      }
    }
  }
  std::vector<std::string> changed;
  for (auto [m, r] : base) {
    if (models[m].base_cores == r) continue;
    models[m].base_cores = r;
    changed.push_back(models[m].name + ": " + std::to_string(r));
  }
  return changed;
}

namespace {

// One model as IPA times it: with `cores:`, l(b) at the replica's cores; else the profile as
// written (a table is interpolated between its batches, not read as a line through l(1) and l(2)).
sched::ipa_model ipa_model_of(const model_spec& spec) {
  sched::ipa_model v{&spec, spec.accuracy.value_or(100), spec.base_cores};
  if (spec.cores) v.latency_ms = [l = *spec.cores, r = replica_cores(spec)](int b) { return l.at(b, r); };
  return v;
}

}  // namespace

std::vector<sched::ipa_stage> ipa_problem(const std::vector<model_spec>& models, const pipeline& p,
                                          const std::vector<double>& rates, const std::vector<double>& fallthrough) {
  std::vector<sched::ipa_stage> in(p.stages.size());
  for (size_t k = 0; k < p.stages.size(); ++k) {
    in[k].after = p.stages[k].parents;
    in[k].rate = rates[k];
    in[k].slo_ms = p.stages[k].slo_ms.value_or(0);
    for (auto m : p.stages[k].variant_indices) in[k].variants.push_back({ipa_model_of(models[m])});
    // A cascade: its first model, then its second on what falls through; or the second alone.
    if (auto& c = p.stages[k].cascade) {
      auto& second = models[c->second_index];
      double f = k < fallthrough.size() && fallthrough[k] >= 0 ? std::min(1.0, fallthrough[k])
                                                               : declared_fallthrough(models[p.stages[k].model_index]);
      in[k].variants.front().then = sched::ipa_cascade{ipa_model_of(second), f};
      in[k].variants.push_back({ipa_model_of(second)});
    }
  }
  return in;
}

std::vector<double> ipa_stage_budgets(const pipeline& p, const std::vector<sched::ipa_choice>& choices) {
  std::vector<double> finish(p.stages.size(), 0);
  for (auto v : p.topo) {
    double start = 0;
    for (auto u : p.stages[v].parents) start = std::max(start, finish[u]);
    finish[v] = start + choices[v].latency_ms;
  }
  // Each stage stretched by the least room of the paths through it: SLO / planned finish of every
  // leaf it leads to (the leaf's own SLO where it has one), never shrunk.
  std::vector<double> stretch(p.stages.size(), std::numeric_limits<double>::infinity());
  for (auto it = p.topo.rbegin(); it != p.topo.rend(); ++it) {
    auto v = *it;
    for (auto c : p.stages[v].children) stretch[v] = std::min(stretch[v], stretch[c]);
    if (p.stages[v].children.empty()) stretch[v] = finish[v] > 0 ? path_slo_ms(p, v) / finish[v] : 1;
  }
  std::vector<double> out;
  for (size_t v = 0; v < choices.size(); ++v) out.push_back(choices[v].latency_ms * std::max(1.0, stretch[v]));
  return out;
}

double ipa_first_share(const sched::ipa_choice& c, double budget_ms) {
  if (!(budget_ms > 0)) return 0;
  return std::min(1.0, (c.first_ms + std::max(0.0, budget_ms - c.latency_ms) / 2) / budget_ms);
}

}  // namespace sloserve
