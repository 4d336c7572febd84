#pragma once
// Where a routed instance is busy: the outstanding invocations at which one more would not finish
// within its model's tightest budget (frontends then spill to spares). Used by the placements
// (scheduling/placement.hpp) to fill in every route instance's spill point.

#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "config/cluster_config.hpp"
#include "messages/types.hpp"
#include "scheduling/epoch.hpp"
#include "scheduling/placement.hpp"

namespace sloserve {

// The tightest budget of each model the table budgets: its stages', and its shares of Graft's
// fragment routes (in proportion to the time a route has).
std::map<std::string, double> tightest_budgets(const msg::routing_table& t);

// Spill points of the instances of a placement: where each device is (its type and share set
// what l(b) takes there), and each model's tightest budget. Looked up once per route and once per
// node, not per instance: a placement of every model on every device of a large fleet has
// millions of instances.
class spill_points {
 public:
  // `models`: the planner's (a refreshed profile's latencies scaled), else the file's.
  spill_points(const cluster_config& cfg, const msg::routing_table& t, const std::vector<model_spec>* models = nullptr)
      : cfg_(cfg) {
    for (auto& [model, ms] : tightest_budgets(t)) budget_.emplace(model, ms);
    for (auto& s : device_slots(cfg)) {
      auto& on = slots_[s.node];
      if (on.size() <= s.device) on.resize(s.device + 1);
      on[s.device] = s;
    }
    for (auto& m : models ? *models : cfg.models) models_.emplace(m.name, &m);
  }

  // What a model's instances are judged by: its profile and its tightest budget (null, or no
  // budget, where unknown: never busy).
  struct model_point {
    const model_spec* spec = nullptr;
    std::optional<double> budget;
  };
  model_point model(const std::string& name) const {
    auto it = models_.find(name);
    auto budget = budget_.find(name);
    return {it == models_.end() ? cfg_.find_model(name) : it->second,  // fragments: the file's
            budget == budget_.end() ? std::nullopt : std::optional<double>(budget->second)};
  }
  // The devices of worker `node`, by index; null for none.
  const std::vector<sched::device_slot>* devices(const std::string& node) const {
    auto it = slots_.find(node);
    return it == slots_.end() ? nullptr : &it->second;
  }

  // Outstanding invocations at which an instance of `m` on device `s`, run in batches of `b`, is
  // busy: one more would not finish within the model's budget (a batch running, then its own
  // among those queued, each taking l(b)): b per l(b) of the budget beyond the running batch's.
  // 0 (never busy) where the model or its budget is unknown.
  static uint32_t of(const model_point& m, const sched::device_slot& s, uint32_t b) {
    if (!m.spec || !m.budget || b == 0) return 0;
    double l = m.spec->profile_for(s.type).latency_ms_at(static_cast<int>(b)) * m.spec->share_slowdown(s.share);
    if (!(l > 0) || !(*m.budget > 0)) return 2 * b;
    return static_cast<uint32_t>(std::max(1.0, std::floor(b * (*m.budget / l - 1))));
  }
  // The same for instance `i` of model `name`, each looked up.
  uint32_t of(const std::string& name, const msg::route_instance& i, uint32_t b) const {
    auto* on = devices(i.node);
    return on && i.device < on->size() ? of(model(name), (*on)[i.device], b) : 0;
  }

 private:
  const cluster_config& cfg_;
  std::unordered_map<std::string, const model_spec*> models_;
  std::unordered_map<std::string, double> budget_;
  std::unordered_map<std::string, std::vector<sched::device_slot>> slots_;  // by node, by device
};

}  // namespace sloserve
