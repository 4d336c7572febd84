// How frontends and the simulator read a routing table's budgets (stages_of).

#include <algorithm>

#include "scheduling/placement.hpp"

namespace sloserve {

double tightest_budget_ms(const std::vector<msg::stage_budget>& budgets, const std::string& model) {
  double least = 0;
  for (auto& b : budgets)
    if (b.model == model && b.budget_ms > 0 && (least == 0 || b.budget_ms < least)) least = b.budget_ms;
  return least;
}

table_stages stages_of(const cluster_config& cfg, const pipeline& p, const std::vector<msg::stage_budget>& budgets) {
  table_stages out;
  for (auto& st : p.stages) out.models.push_back(st.model_index);
  std::vector<double> budget(p.stages.size(), -1), share(p.stages.size(), 0);
  for (auto& b : budgets) {
    if (b.pipeline != p.name) continue;
    auto s = p.find_stage(b.stage);
    if (!s) continue;
    budget[*s] = b.budget_ms;
    // A variant, or a cascade's second (run alone).
    auto vs = stage_models(p.stages[*s]);
    auto v = std::find_if(vs.begin(), vs.end(), [&](size_t m) { return cfg.models[m].name == b.model; });
    if (v != vs.end()) out.models[*s] = *v;
    if (p.stages[*s].cascade && b.first_share > 0 && b.first_share < 1) share[*s] = b.first_share;
  }
  if (std::none_of(budget.begin(), budget.end(), [](double b) { return b < 0; })) {
    out.split = offsets_from_budgets(p, std::move(budget));
    if (std::any_of(share.begin(), share.end(), [](double x) { return x > 0; }))
      out.split->first_share = std::move(share);
  }
  return out;
}

}  // namespace sloserve
