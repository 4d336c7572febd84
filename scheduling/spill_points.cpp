#include "scheduling/spill_points.hpp"

#include <algorithm>
#include <cmath>
#include <string_view>

namespace sloserve {

// The tightest budget of each model the table budgets: its stages', and its shares of Graft's
// fragment routes (in proportion to the time a route has).
std::map<std::string, double> tightest_budgets(const msg::routing_table& t) {
  std::map<std::string, double> out;
  auto add = [&](const std::string& model, double ms) {
    auto [it, fresh] = out.emplace(model, ms);
    if (!fresh) it->second = std::min(it->second, ms);
  };
  for (auto& b : t.budgets) add(b.model, b.budget_ms);
  for (auto& f : t.fragments) {
    double total = 0;
    for (auto b : f.budgets_ms) total += b;
    for (size_t k = 0; k < f.models.size() && k < f.budgets_ms.size() && total > 0; ++k)
      add(f.models[k], f.slo_ms * f.budgets_ms[k] / total);
  }
  return out;
}

void set_spill_points(const cluster_config& cfg, cluster_placement& pl, const std::vector<model_spec>* models) {
  spill_points spill(cfg, pl.table, models);
  // Each device's batch per model (by a number given each model name once), made when an
  // instance first asks: scanning a device's sessions for each instance would cost their square,
  // and comparing names, their length.
  std::unordered_map<std::string_view, uint32_t> model_id;
  constexpr uint32_t none = UINT32_MAX;
  std::unordered_map<const void*, std::vector<uint32_t>> batches;
  auto batch_of = [&](const auto& device, uint32_t id) -> std::optional<uint32_t> {
    auto& v = batches[&device];
    if (v.empty()) {
      v.assign(model_id.size(), none);
      for (auto& ss : device.sessions)  // the last session of a model wins
        if (auto it = model_id.find(ss.model); it != model_id.end()) v[it->second] = ss.batch;
    }
    return v[id] == none ? std::nullopt : std::optional<uint32_t>(v[id]);
  };
  for (auto& r : pl.table.routes) model_id.emplace(r.model, static_cast<uint32_t>(model_id.size()));
  for (auto& r : pl.table.routes) {
    auto m = spill.model(r.model);
    auto id = model_id.at(r.model);
    // A route's instances come node by node: the node's schedule and devices are looked up when
    // it changes.
    const std::string* node = nullptr;
    const msg::schedule* schedule = nullptr;
    const std::vector<sched::device_slot>* slots = nullptr;
    for (auto& i : r.instances) {
      if (i.spill_at) continue;
      if (!node || *node != i.node) {
        node = &i.node;
        auto s = pl.schedules.find(i.node);
        schedule = s == pl.schedules.end() ? nullptr : &s->second;
        slots = spill.devices(i.node);
      }
      if (!schedule || i.device >= schedule->devices.size()) continue;
      auto b = batch_of(schedule->devices[i.device], id);
      if (!b) continue;
      i.spill_at = slots && i.device < slots->size() ? spill_points::of(m, (*slots)[i.device], std::max(1u, *b)) : 0;
    }
  }
}

}  // namespace sloserve
