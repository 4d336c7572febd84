#include "scheduling/policies/ipa/report.hpp"

#include <fmt/format.h>
#include <fmt/printf.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "control/provisioner.hpp"
#include "control/scaler_core.hpp"
#include "scheduling/policies/ipa/config.hpp"

namespace sloserve::sched {

namespace {

// The report's text for a terminal, from its JSON.
std::string ipa_text(const nlohmann::json& j) {
  std::string text;
  for (auto& p : j["pipelines"]) {
    text += fmt::sprintf("pipeline %s  SLO %.1f ms  rate %.1f/s  accuracy %.2f%%  cost %.1f cores  path %.1f ms\n",
                         p["name"].get<std::string>(), p["slo_ms"].get<double>(), p["rate"].get<double>(),
                         100 * p["accuracy"].get<double>(), p["cost"].get<double>(), p["latency_ms"].get<double>());
    for (auto& s : p["stages"]) {
      text += fmt::sprintf("  %-16s %-20s batch %3d  replicas %3d  cores %3d  budget %7.1f ms\n",
                           s["name"].get<std::string>(), s["variant"].get<std::string>(), s["batch"].get<int>(),
                           s["replicas"].get<int>(), s["cores"].get<int>(), s["budget_ms"].get<double>());
      if (auto c = s.find("cascade"); c != s.end())
        text += fmt::sprintf("  %-16s then %-15s batch %3d  replicas %3d  on %.0f%% of requests\n", "",
                             (*c)["second"].get<std::string>(), (*c)["batch"].get<int>(), (*c)["replicas"].get<int>(),
                             100 * (*c)["fallthrough"].get<double>());
    }
  }
  text +=
      fmt::sprintf("\n%zu instances placed on devices costing %.2f", j["instances"].size(), j["cost"].get<double>());
  for (auto& [m, n] : j["unplaced"].items()) text += fmt::sprintf("; %d of '%s' found no device slot", n.get<int>(), m);
  text += fmt::sprintf("\nplanned in %.1f ms\n", j["planning_ms"].get<double>());
  return text;
}

}  // namespace

expected<plan_report> ipa_report(const cluster_config& cfg, const std::vector<double>& rates) {
  auto t0 = std::chrono::steady_clock::now();
  auto& w = cfg.scheduler.section_as<ipa::options>();
  auto models = cfg.models;  // with the base allocations, as the scaler plans
  if (w.base_rps > 0) apply_base_allocation(models, cfg.pipelines, w.base_rps, cfg.scaler.max_cores);
  local_provisioner prov(cfg, [](deployment) {});
  std::vector<std::string> workers;
  for (auto* n : cfg.with_role(role::worker)) workers.push_back(n->name);
  prov.set_workers_up(workers);
  nlohmann::json j;
  j["policy"] = "ipa";
  j["weights"] = {{"alpha", w.alpha}, {"beta", w.beta}, {"delta", w.delta}};
  j["pipelines"] = nlohmann::json::array();
  std::map<std::string, int> unplaced;
  double total_cost = 0;
  for (size_t pi = 0; pi < cfg.pipelines.size(); ++pi) {
    auto& p = cfg.pipelines[pi];
    auto per_stage = stage_rates(p, rates[pi], declared_fanout(p));
    for (auto& r : per_stage) r = std::max(r, 1.0);  // as the scaler plans: at least one request a second
    auto in = ipa_problem(models, p, per_stage);
    auto solved = solve_ipa(in, p.slo_ms, {w.alpha, w.beta, w.delta});
    if (!solved) {
      return fail("pipeline '" + p.name + "': " + solved.error());
    }
    auto budgets = ipa_stage_budgets(p, solved->stages);
    nlohmann::json stages = nlohmann::json::array();
    for (size_t k = 0; k < p.stages.size(); ++k) {
      auto& c = solved->stages[k];
      auto& m = *in[k].variants[c.variant].model;
      int cores = replica_cores(m);
      nlohmann::json stage = {{"name", p.stages[k].name},
                              {"variant", m.name},
                              {"accuracy", in[k].variants[c.variant].served_accuracy()},
                              {"batch", c.batch},
                              {"replicas", c.replicas},
                              {"cores", c.replicas * cores},
                              {"rate", per_stage[k]},
                              {"latency_ms", c.latency_ms},
                              {"budget_ms", budgets[k]}};
      for (int r = 0; r < c.replicas; ++r)
        if (!prov.start(m.name, cores, c.batch)) ++unplaced[m.name];
      // A cascade: its second model on what falls through, after the first.
      if (auto& then = in[k].variants[c.variant].then) {
        auto& second = *then->model;
        int cores2 = replica_cores(second);
        stage["cores"] = c.replicas * cores + c.replicas2 * cores2;
        stage["cascade"] = {{"second", second.name},
                            {"fallthrough", then->fallthrough},
                            {"batch", c.batch2},
                            {"replicas", c.replicas2},
                            {"cores", c.replicas2 * cores2},
                            {"first_share", ipa_first_share(c, budgets[k])}};
        for (int r = 0; r < c.replicas2; ++r)
          if (!prov.start(second.name, cores2, c.batch2)) ++unplaced[second.name];
      }
      stages.push_back(std::move(stage));
    }
    total_cost += solved->cost;
    j["pipelines"].push_back({{"name", p.name},
                              {"slo_ms", p.slo_ms},
                              {"rate", rates[pi]},
                              {"accuracy", solved->accuracy},
                              {"cost", solved->cost},
                              {"objective", solved->objective},
                              {"latency_ms", solved->latency_ms},
                              {"stages", stages}});
  }
  j["instances"] = nlohmann::json::array();
  for (auto& i : prov.instances())
    j["instances"].push_back(
        {{"node", i.node}, {"device", i.device}, {"model", i.model}, {"cores", i.cores}, {"batch", i.batch}});
  j["unplaced"] = unplaced;
  j["cores"] = total_cost;
  // Replicas hold their devices: each device holding one costs its type's price.
  std::set<std::pair<std::string, uint32_t>> held;
  for (auto& i : prov.instances()) held.insert({i.node, i.device});
  double cost = 0;
  for (auto& s : device_slots(cfg))
    if (held.count({s.node, s.device})) cost += s.price;
  j["cost"] = cost;
  j["planning_ms"] = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return plan_report{j.dump(2), ipa_text(j)};
}

}  // namespace sloserve::sched
