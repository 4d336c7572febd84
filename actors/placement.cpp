#include "actors/placement.hpp"

namespace sloserve {

std::vector<sched::device_slot> device_slots(const cluster_config& cfg) {
  std::vector<sched::device_slot> out;
  for (auto& n : cfg.nodes) {
    if (!n.has_role("worker")) continue;
    uint32_t d = 0;
    for (auto& g : n.devices)
      for (int i = 0; i < g.count; ++i) out.push_back({n.name, d++, g.models, g.memory_mb});
  }
  return out;
}

msg::routing_table routing_from(const cluster_config& cfg, const sched::epoch_input& in,
                                const sched::epoch_result& r, uint64_t epoch) {
  msg::routing_table t;
  t.epoch = epoch;
  std::map<std::string, msg::model_route> routes;
  for (auto& m : cfg.models) routes[m.name].model = m.name;
  for (size_t k = 0; k < r.placement.devices.size(); ++k) {
    if (r.slot_of[k] < 0) continue;
    auto& slot = in.slots[static_cast<size_t>(r.slot_of[k])];
    std::map<std::string, double> rate;  // a device may run one model under two SLOs
    for (auto& a : r.placement.devices[k].sessions) {
      // A merged prefix family shares its rate among its variants as their traffic does.
      auto& mo = r.models_of[a.session];
      double total = 0;
      for (auto& [m, w] : mo) total += w;
      for (auto& [m, w] : mo) rate[m->name] += total > 0 ? a.rate * w / total : a.rate / mo.size();
    }
    for (auto& [model, w] : rate) routes[model].instances.push_back({slot.node, slot.device, std::max(w, 1e-3)});
  }
  for (auto& [name, route] : routes) t.routes.push_back(std::move(route));
  for (size_t pi = 0; pi < cfg.pipelines.size(); ++pi) {
    auto& p = cfg.pipelines[pi];
    for (size_t s = 0; s < p.stages.size(); ++s) t.budgets.push_back({p.name, p.stages[s].name, r.splits[pi].budget_ms[s]});
  }
  return t;
}

std::map<std::string, msg::schedule> schedules_from(const cluster_config& cfg, const sched::epoch_input& in,
                                                    const sched::epoch_result& r, uint64_t epoch) {
  std::map<std::string, msg::schedule> out;
  for (auto& n : cfg.nodes) {
    if (!n.has_role("worker")) continue;
    auto& s = out[n.name];
    s.epoch = epoch;
    for (int d = 0; d < n.device_count(); ++d) s.devices.push_back({static_cast<uint32_t>(d), 0, {}});
  }
  for (size_t k = 0; k < r.placement.devices.size(); ++k) {
    if (r.slot_of[k] < 0) continue;
    auto& slot = in.slots[static_cast<size_t>(r.slot_of[k])];
    auto& dev = out[slot.node].devices[slot.device];
    auto& pd = r.placement.devices[k];
    dev.duty_cycle_ms = pd.duty_cycle_ms;
    // The planned batch fixes placement and duty cycle for arrivals at the planned rate. Real
    // arrivals come in bursts, so the batch a device may grow to under backlog is the session's
    // saturating batch (the largest with 2·l(b) within its budget) when that is larger.
    // One session per model on a device: a model under two SLOs runs at the larger batch.
    for (auto& a : pd.sessions) {
      auto& sess = r.sessions[a.session];
      auto cap = static_cast<uint32_t>(std::max(a.batch, saturating_batch(*sess.model, sess.slo_ms)));
      for (auto& [model, w] : r.models_of[a.session]) {
        auto& name = model->name;
        auto it = std::find_if(dev.sessions.begin(), dev.sessions.end(), [&](auto& x) { return x.model == name; });
        if (it == dev.sessions.end()) dev.sessions.push_back({name, cap});
        else it->batch = std::max(it->batch, cap);
      }
    }
  }
  return out;
}

}  // namespace sloserve
