// A pipeline's paths: how fast they can finish, their own SLOs, its depth, and SLO splits as
// each stage's budget and finish offset.

#include <algorithm>
#include <limits>

#include "pipelines/pipeline.hpp"

namespace sloserve {

std::vector<double> fastest_finish_ms(const pipeline& p, const std::vector<model_spec>& models) {
  std::vector<double> finish(p.stages.size(), 0);
  for (auto v : p.topo) {
    double start = 0;
    for (auto u : p.stages[v].parents) start = std::max(start, finish[u]);
    double fastest = models[p.stages[v].model_index].profile.latency_ms_at(1);
    for (auto m : p.stages[v].variant_indices) fastest = std::min(fastest, models[m].profile.latency_ms_at(1));
    // A cascade's slow path runs both of its models.
    if (auto& c = p.stages[v].cascade) fastest += models[c->second_index].profile.latency_ms_at(1);
    finish[v] = start + fastest;
  }
  return finish;
}

double fastest_path_ms(const pipeline& p, const std::vector<model_spec>& models) {
  auto finish = fastest_finish_ms(p, models);
  return finish.empty() ? 0 : *std::max_element(finish.begin(), finish.end());
}

double path_slo_ms(const pipeline& p, size_t stage) {
  auto& s = p.stages[stage].slo_ms;
  return s ? std::min(*s, p.slo_ms) : p.slo_ms;
}

bool has_path_slos(const pipeline& p) {
  for (size_t s = 0; s < p.stages.size(); ++s)
    if (p.stages[s].children.empty() && path_slo_ms(p, s) < p.slo_ms) return true;
  return false;
}

size_t depth(const pipeline& p) {
  std::vector<size_t> d(p.stages.size(), 1);
  size_t best = 0;
  for (auto v : p.topo) {
    for (auto u : p.stages[v].parents) d[v] = std::max(d[v], d[u] + 1);
    best = std::max(best, d[v]);
  }
  return best;
}

namespace {

// Finish offsets: the largest sum of budgets over the paths that end at each stage.
std::vector<double> finish_offsets(const pipeline& p, const std::vector<double>& budget_ms) {
  std::vector<double> finish(p.stages.size(), 0);
  for (auto v : p.topo) {
    double start = 0;
    for (auto u : p.stages[v].parents) start = std::max(start, finish[u]);
    finish[v] = start + budget_ms[v];
  }
  return finish;
}

// Per stage, the least SLO of the leaves it leads to (itself included).
std::vector<double> least_slo_below(const pipeline& p) {
  std::vector<double> least(p.stages.size(), p.slo_ms);
  for (auto it = p.topo.rbegin(); it != p.topo.rend(); ++it) {
    auto v = *it;
    if (p.stages[v].children.empty()) least[v] = path_slo_ms(p, v);
    for (auto c : p.stages[v].children) least[v] = std::min(least[v], least[c]);
  }
  return least;
}

}  // namespace

slo_split offsets_from_budgets(const pipeline& p, std::vector<double> budget_ms) {
  auto finish = finish_offsets(p, budget_ms);
  if (has_path_slos(p)) {
    // Each leaf late for its own SLO scales down the budgets of the stages that lead to it.
    std::vector<double> factor(p.stages.size(), 1);
    for (size_t leaf = 0; leaf < p.stages.size(); ++leaf) {
      if (!p.stages[leaf].children.empty() || !p.stages[leaf].slo_ms || finish[leaf] <= path_slo_ms(p, leaf)) continue;
      double f = path_slo_ms(p, leaf) / finish[leaf];
      std::vector<size_t> up{leaf};
      std::vector<uint8_t> seen(p.stages.size(), 0);
      while (!up.empty()) {
        auto v = up.back();
        up.pop_back();
        if (seen[v]) continue;
        seen[v] = 1;
        factor[v] = std::min(factor[v], f);
        for (auto u : p.stages[v].parents) up.push_back(u);
      }
    }
    for (size_t v = 0; v < budget_ms.size(); ++v) budget_ms[v] *= factor[v];
    finish = finish_offsets(p, budget_ms);
  }
  return {std::move(budget_ms), std::move(finish)};
}

slo_split even_split(const pipeline& p) {
  auto d = static_cast<double>(std::max<size_t>(1, depth(p)));
  auto least = least_slo_below(p);
  std::vector<double> budget(p.stages.size());
  for (size_t v = 0; v < p.stages.size(); ++v) budget[v] = least[v] / d;
  return offsets_from_budgets(p, std::move(budget));
}

}  // namespace sloserve
