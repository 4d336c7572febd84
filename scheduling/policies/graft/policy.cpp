#include "scheduling/policies/graft/policy.hpp"

#include <fmt/printf.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>

#include "scheduling/policies/graft/epoch.hpp"
#include "scheduling/policies/report.hpp"

namespace sloserve::sched {

namespace {
class graft_policy final : public scheduling_policy {
 public:
  bool plans_least_cost() const override { return true; }
  expected<epoch_result> plan(const epoch_input& in, const epoch_result* previous) const override {
    return plan_graft_epoch(in, previous);
  }
  // A fragment (start layer, SLO) with a twentieth of its pipeline's queries that the plan has
  // no route for: its queries run the model's rest from where they start meanwhile.
  bool plan_outdated(const pipeline_rates& measured, const epoch_result& planned) const override {
    auto& routes = planned.fragment_routes;
    for (size_t pi = 0; pi < measured.pipelines.size(); ++pi)
      for (auto& f : measured.pipelines[pi].fragments) {
        if (f.share < 0.05) continue;
        if (std::none_of(routes.begin(), routes.end(), [&](auto& r) {
              return r.pipeline == pi && r.start == f.start && std::abs(r.slo_ms - f.slo_ms) < 1e-6;
            }))
          return true;
      }
    return false;
  }
  std::string plan_news(const epoch_result& plan) const override {
    auto& fr = plan.fragment_routes;
    if (fr.empty()) return {};
    std::vector<std::string> routes;
    for (auto& f : fr) routes.push_back(fmt::format("{}@{:g}ms {}", f.start, f.slo_ms, fmt::join(f.models, "+")));
    return fmt::format("graft: {} fragments on {:.2f} GPU shares: {}", fr.size(), plan.resources,
                       fmt::join(routes, ", "));
  }
  // The packed report, with each fragment's route: its layer ranges in turn, each with its budget,
  // and the GPU share the plan takes.
  expected<plan_report> report(const cluster_config& cfg, const epoch_input& in) const override {
    auto r = report_packed(*this, cfg, in);
    if (!r) return fail(r.error());
    auto& j = r->json;
    j["gpu_share"] = r->result.resources;
    j["fragments"] = nlohmann::json::array();
    std::string text = packed_text(j);
    text +=
        fmt::sprintf("\n%-10s %5s %8s %8s  %s\n", "pipeline", "start", "slo_ms", "rate", "ranges in turn (budget ms)");
    for (auto& f : r->result.fragment_routes) {
      auto& name = cfg.pipelines[f.pipeline].name;
      j["fragments"].push_back({{"pipeline", name},
                                {"start", f.start},
                                {"slo_ms", f.slo_ms},
                                {"rate", f.rate},
                                {"models", f.models},
                                {"budget_ms", f.budget_ms}});
      std::string ranges;
      for (size_t k = 0; k < f.models.size(); ++k)
        ranges += fmt::sprintf("%s%s (%d)", k ? " + " : "", f.models[k], static_cast<int>(f.budget_ms[k] + 0.5));
      text += fmt::sprintf("%-10s %5d %8.1f %8.1f  %s\n", name, f.start, f.slo_ms, f.rate, ranges);
    }
    text += fmt::sprintf("GPU share (share x instances) %.2f\n", r->result.resources);
    return plan_report{j.dump(2), text};
  }
};
}  // namespace

std::shared_ptr<const scheduling_policy> make_graft_policy() {
  return std::make_shared<graft_policy>();
}

}  // namespace sloserve::sched
