#include "scheduling/policies/report.hpp"

#include <fmt/printf.h>

#include <algorithm>
#include <chrono>

#include "scheduling/catalogue.hpp"

namespace sloserve::sched {
namespace {

nlohmann::json pipelines_json(const cluster_config& cfg, const epoch_input& in, const epoch_result& res) {
  auto out = nlohmann::json::array();
  for (size_t pi = 0; pi < cfg.pipelines.size(); ++pi) {
    auto& p = cfg.pipelines[pi];
    nlohmann::json stages = nlohmann::json::array();
    // The model each stage runs: with variants, the one chosen for the cluster's memory.
    auto& planned_stages = (*in.pipelines)[pi].stages;
    for (size_t s = 0; s < p.stages.size(); ++s)
      stages.push_back(
          {{"name", p.stages[s].name}, {"model", planned_stages[s].model}, {"budget_ms", res.splits[pi].budget_ms[s]}});
    out.push_back({{"name", p.name}, {"slo_ms", p.slo_ms}, {"rate", in.rates[pi]}, {"stages", stages}});
  }
  return out;
}

nlohmann::json sessions_json(const epoch_result& res) {
  auto out = nlohmann::json::array();
  for (size_t i = 0; i < res.sessions.size(); ++i) {
    int batch = 0;
    for (auto& d : res.placement.devices)
      for (auto& a : d.sessions)
        if (a.session == i) batch = std::max(batch, a.batch);
    auto& s = res.sessions[i];
    nlohmann::json models = nlohmann::json::array();
    for (auto& [m, w] : res.models_of[i]) models.push_back(m->name);
    out.push_back({{"model", s.model->is_variant() && models.size() > 1 ? "prefix:" + s.model->prefix : s.model->name},
                   {"models", models},
                   {"slo_ms", s.slo_ms},
                   {"rate", s.rate},
                   {"batch", batch}});
  }
  return out;
}

// The devices with their sessions, into j["devices"]; j["cost"]: price x occupancy, where a device
// no slot took costs the dearest slot's price.
void add_devices(const epoch_input& in, const epoch_result& res, nlohmann::json& j) {
  j["devices"] = nlohmann::json::array();
  double cost = 0, dearest = 1;
  for (auto& s : in.slots) dearest = std::max(dearest, s.price);
  for (size_t k = 0; k < res.placement.devices.size(); ++k) {
    auto& d = res.placement.devices[k];
    nlohmann::json sess = nlohmann::json::array();
    for (auto& a : d.sessions)
      for (auto& [m, w] : res.models_of[a.session])
        sess.push_back(
            {{"model", m->name}, {"slo_ms", res.sessions[a.session].slo_ms}, {"batch", a.batch}, {"rate", a.rate}});
    nlohmann::json node = nullptr, device = nullptr;
    double price = dearest;
    if (res.slot_of[k] >= 0) {
      auto& slot = in.slots[static_cast<size_t>(res.slot_of[k])];
      node = slot.node;
      device = slot.device;
      price = slot.price;
    }
    cost += price * std::min(1.0, d.occupancy);
    j["devices"].push_back({{"node", node},
                            {"device", device},
                            {"duty_cycle_ms", d.duty_cycle_ms},
                            {"dedicated", d.dedicated},
                            {"occupancy", d.occupancy},
                            {"sessions", sess}});
  }
  j["cost"] = cost;
}

}  // namespace

expected<packed_report> report_packed(const scheduling_policy& policy, const cluster_config& cfg, epoch_input in) {
  auto t0 = std::chrono::steady_clock::now();
  std::vector<std::string> degraded;
  if (has_variants(cfg.pipelines)) degraded = choose_epoch_variants(in, nullptr).degraded;
  auto planned = policy.plan(in, nullptr);
  double planning_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (!planned) return fail(planned.error());
  packed_report r{std::move(in), std::move(*planned), {}};
  auto& j = r.json;
  auto& res = r.result;
  j["split"] = knob_name(r.in.split);
  j["pipelines"] = pipelines_json(cfg, r.in, res);
  j["sessions"] = sessions_json(res);
  add_devices(r.in, res, j);
  j["devices_used"] = res.placement.devices.size();
  j["devices_available"] = r.in.slots.size();
  j["devices_missing"] = res.devices_missing;
  j["planning_ms"] = planning_ms;
  j["degraded"] = degraded;
  j["infeasible"] = nlohmann::json::array();
  for (auto i : res.placement.infeasible) j["infeasible"].push_back(res.sessions[i].model->name);
  return r;
}

std::string packed_text(const nlohmann::json& j) {
  std::string out;
  for (auto& p : j["pipelines"]) {
    out += fmt::sprintf("pipeline %s  SLO %.1f ms  rate %.1f/s\n", p["name"].get<std::string>(),
                        p["slo_ms"].get<double>(), p["rate"].get<double>());
    for (auto& s : p["stages"])
      out += fmt::sprintf("  %-16s %-20s budget %7.1f ms\n", s["name"].get<std::string>(),
                          s["model"].get<std::string>(), s["budget_ms"].get<double>());
  }
  out += fmt::sprintf("\n%-20s %9s %9s %6s\n", "session", "slo_ms", "rate", "batch");
  for (auto& s : j["sessions"])
    out += fmt::sprintf("%-20s %9.1f %9.1f %6d\n", s["model"].get<std::string>(), s["slo_ms"].get<double>(),
                        s["rate"].get<double>(), s["batch"].get<int>());
  out += fmt::sprintf("\n%-10s %6s %10s %6s  %s\n", "node", "device", "duty_ms", "occ", "sessions (model x batch)");
  for (auto& d : j["devices"]) {
    std::string sess;
    for (auto& s : d["sessions"])
      sess += s["model"].get<std::string>() + "x" + std::to_string(s["batch"].get<int>()) + " ";
    out += fmt::sprintf("%-10s %6s %10.1f %6.2f  %s%s\n", d["node"].is_null() ? "-" : d["node"].get<std::string>(),
                        d["device"].is_null() ? "-" : std::to_string(d["device"].get<int>()),
                        d["duty_cycle_ms"].get<double>(), d["occupancy"].get<double>(), sess,
                        d["dedicated"].get<bool>() ? "(dedicated)" : "");
  }
  out += fmt::sprintf("\ncost %.3f (price x occupancy); devices used %zu of %zu available", j["cost"].get<double>(),
                      j["devices_used"].get<size_t>(), j["devices_available"].get<size_t>());
  if (auto missing = j["devices_missing"].get<size_t>()) out += fmt::sprintf(" (%zu more needed)", missing);
  out += fmt::sprintf("\nplanned in %.1f ms\n", j["planning_ms"].get<double>());
  if (!j["infeasible"].empty()) out += "infeasible sessions: " + j["infeasible"].dump() + "\n";
  for (auto& d : j["degraded"]) out += "for memory: " + d.get<std::string>() + "\n";
  return out;
}

expected<plan_report> scheduling_policy::report(const cluster_config& cfg, const epoch_input& in) const {
  auto r = report_packed(*this, cfg, in);
  if (!r) return fail(r.error());
  return plan_report{r->json.dump(2), packed_text(r->json)};
}

}  // namespace sloserve::sched
