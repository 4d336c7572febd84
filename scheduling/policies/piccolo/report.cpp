#include "scheduling/policies/piccolo/report.hpp"

#include <fmt/format.h>
#include <fmt/printf.h>

#include <algorithm>
#include <chrono>
#include <nlohmann/json.hpp>

#include "scheduling/policies/piccolo/epoch.hpp"

namespace sloserve::sched {

namespace {

// The report's text for a terminal, from its JSON.
std::string piccolo_text(const nlohmann::json& j) {
  std::string text;
  for (auto& p : j["pipelines"]) {
    text += fmt::sprintf("pipeline %s  SLO %.1f ms  rate %.1f/s  cost %.3f  dummies %.1f/s\n",
                         p["name"].get<std::string>(), p["slo_ms"].get<double>(), p["rate"].get<double>(),
                         p["cost"].get<double>(), p["dummy_rate"].get<double>());
    for (auto& s : p["stages"]) {
      auto model = s["model"].get<std::string>();
      if (s.contains("version")) model += " v" + std::to_string(s["version"].get<int>());
      text +=
          fmt::sprintf("  %-16s %-20s budget %7.1f ms  worst case %7.1f ms  cost %.3f\n", s["name"].get<std::string>(),
                       model, s["budget_ms"].get<double>(), s["worst_case_ms"].get<double>(), s["cost"].get<double>());
      for (auto& m : s["machines"])
        text += fmt::sprintf("    %-10s batch %4d  %8.1f req/s  occupancy %.2f  worst case %.1f ms\n",
                             m["label"].get<std::string>(), m["batch"].get<int>(), m["rate"].get<double>(),
                             m["occupancy"].get<double>(), m["worst_case_ms"].get<double>());
    }
  }
  text += fmt::sprintf("\n");
  for (auto& d : j["devices"])
    text += fmt::sprintf("%-10s price %.2f: %zu needed of %zu\n", d["label"].get<std::string>(),
                         d["price"].get<double>(), d["needed"].get<size_t>(), d["available"].get<size_t>());
  text += fmt::sprintf("cost %.3f (price x occupancy)  planned in %.1f ms\n", j["cost"].get<double>(),
                       j["planning_ms"].get<double>());
  return text;
}

}  // namespace

expected<plan_report> piccolo_report(const cluster_config& cfg, const epoch_input& in) {
  auto t0 = std::chrono::steady_clock::now();
  auto planned = plan_piccolo(in);
  auto& types = planned.types;
  nlohmann::json j;
  j["policy"] = "piccolo";
  j["pipelines"] = nlohmann::json::array();
  double cost = 0, dummy = 0;
  for (size_t pi = 0; pi < cfg.pipelines.size(); ++pi) {
    auto& p = cfg.pipelines[pi];
    auto& pp = planned.pipelines[pi];
    if (pp.rates.empty()) continue;
    if (!pp.plan.feasible) {
      return fail(fmt::format("pipeline '{}': no configurations of its stages fit its {} ms SLO at {} queries/s",
                              p.name, p.slo_ms, in.rates[pi]));
    }
    nlohmann::json stages = nlohmann::json::array();
    for (size_t k = 0; k < pp.of.size(); ++k) {
      auto s = pp.of[k].stage;
      auto& model = cfg.models[pp.of[k].model];
      auto& sorted = pp.configs[k];
      auto& mp = pp.plan.modules[k];
      auto wc = piccolo::worst_cases(sorted, mp.machines);
      nlohmann::json machines = nlohmann::json::array();
      for (size_t k = 0; k < mp.machines.size(); ++k) {
        auto& c = sorted[mp.machines[k].config];
        machines.push_back({{"type", types.names[c.type]},
                            {"share", types.share[c.type]},
                            {"label", types.label(c.type)},
                            {"batch", c.batch},
                            {"rate", mp.machines[k].rate},
                            {"occupancy", mp.machines[k].rate / c.throughput()},
                            {"worst_case_ms", 1e3 * wc[k]}});
      }
      nlohmann::json stage = {{"name", p.stages[s].name},
                              {"model", p.stages[s].model},
                              {"rate", pp.rates[s] * pp.of[k].share},
                              {"budget_ms", 1e3 * pp.plan.budget_s[k]},
                              {"worst_case_ms", 1e3 * mp.worst_case_s},
                              {"dummy_rate", mp.dummy},
                              {"cost", pp.cost[k]},
                              {"machines", machines}};
      if (!p.stages[s].versions.empty()) stage["version"] = model.version;
      stages.push_back(std::move(stage));
    }
    cost += pp.total;
    dummy += pp.plan.dummy;
    j["pipelines"].push_back({{"name", p.name},
                              {"slo_ms", p.slo_ms},
                              {"rate", in.rates[pi]},
                              {"cost", pp.total},
                              {"dummy_rate", pp.plan.dummy},
                              {"stages", stages}});
  }
  j["devices"] = nlohmann::json::array();
  for (size_t t = 0; t < types.names.size(); ++t)
    j["devices"].push_back({{"type", types.names[t]},
                            {"share", types.share[t]},
                            {"label", types.label(t)},
                            {"price", types.price[t]},
                            {"needed", planned.needed[t]},
                            {"available", types.available[t]}});
  j["cost"] = cost;
  j["dummy_rate"] = dummy;
  j["planning_ms"] = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return plan_report{j.dump(2), piccolo_text(j)};
}

}  // namespace sloserve::sched
