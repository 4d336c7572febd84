#include "actors/route_publisher.hpp"

#include <algorithm>
#include <set>

namespace sloserve {

void route_publisher::adopt(const cluster_placement& p) {
  std::set<instance_key> now;
  for (auto& [node, s] : p.schedules)
    for (auto& d : s.devices)
      for (auto& ss : d.sessions) {
        instance_key key{node, d.device, ss.model};
        now.insert(key);
        since_.emplace(std::move(key), s.epoch);
      }
  std::erase_if(since_, [&](auto& kv) { return !now.count(kv.first); });
}

bool route_publisher::live(const worker_registry& w, const std::string& model, const msg::route_instance& i) const {
  if (!w.serving(i.node) || w.unloaded(i.node, i.device, model)) return false;
  auto s = since_.find({i.node, i.device, model});
  return s == since_.end() || w.acked(i.node) >= s->second;
}

msg::routing_table route_publisher::live_table(const cluster_placement& p, const worker_registry& w,
                                               uint64_t epoch) const {
  auto t = p.table;
  t.epoch = epoch;
  for (auto& r : t.routes) {
    // A model the placement runs nowhere has nothing to stand in for: the instances it had are
    // gone (or serve other models), and a stage that switches to it must wait (hold_switches).
    bool placed = !r.instances.empty();
    std::erase_if(r.instances, [&](const msg::route_instance& i) { return !live(w, r.model, i); });
    if (!r.instances.empty() || !placed) continue;
    for (auto& old : published_.routes)
      if (old.model == r.model)
        for (auto& i : old.instances)
          if (w.standing_in(i.node) && !w.unloaded(i.node, i.device, r.model)) r.instances.push_back(i);
  }
  for (auto& node : w.up_workers())
    for (auto& u : w.unloaded_of(node)) t.unloaded.push_back({node, u.device, u.model, u.reason});
  hold_switches(t, w);
  hold_clients(t, w);
  return t;
}

// Make before break for the clients a table maps to instances: a client whose new instance cannot take traffic yet
// stays on the one it was last published with while that device still holds the model (a
// resident variant), which is then routed too; with neither it has no route (the stage's serve it).
void route_publisher::hold_clients(msg::routing_table& t, const worker_registry& w) const {
  auto placed_live = [&](const std::string& model, const std::string& node, uint32_t device) {
    return since_.count({node, device, model}) && live(w, model, {node, device, 1});
  };
  std::vector<msg::client_route> kept;
  for (auto& c : t.clients) {
    if (placed_live(c.model, c.node, c.device)) {
      kept.push_back(c);
      continue;
    }
    auto old = std::find_if(published_.clients.begin(), published_.clients.end(),
                            [&](auto& o) { return o.client == c.client && o.pipeline == c.pipeline; });
    if (old == published_.clients.end() || !placed_live(old->model, old->node, old->device)) continue;
    kept.push_back(*old);
    auto r = std::find_if(t.routes.begin(), t.routes.end(), [&](auto& x) { return x.model == old->model; });
    if (r == t.routes.end()) r = t.routes.insert(t.routes.end(), msg::model_route{old->model, {}});
    if (std::none_of(r->instances.begin(), r->instances.end(),
                     [&](auto& i) { return i.node == old->node && i.device == old->device; }))
      r->instances.push_back({old->node, old->device, 1});
  }
  t.clients = std::move(kept);
}

// Make before break for variants: a pipeline one of whose stages moves to a model with no
// instance that may take traffic yet keeps the stage models and budgets it was last published
// with (and the routes of the models they name) until every new one has.
void route_publisher::hold_switches(msg::routing_table& t, const worker_registry& w) const {
  auto routed = [&](const std::string& model) {
    for (auto& r : t.routes)
      if (r.model == model) return !r.instances.empty();
    return false;
  };
  std::set<std::string> held;
  for (auto& b : t.budgets) {
    if (b.model.empty() || routed(b.model)) continue;
    for (auto& old : published_.budgets)
      if (old.pipeline == b.pipeline && old.stage == b.stage && old.model != b.model) held.insert(b.pipeline);
  }
  for (auto& pipeline : held) {
    std::erase_if(t.budgets, [&](auto& b) { return b.pipeline == pipeline; });
    for (auto& old : published_.budgets) {
      if (old.pipeline != pipeline) continue;
      t.budgets.push_back(old);
      if (routed(old.model)) continue;
      // A model the new placement no longer runs drains where it ran: those instances serve on.
      msg::model_route r{old.model, {}};
      for (auto& pr : published_.routes)
        if (pr.model == old.model)
          for (auto& i : pr.instances)
            if (w.standing_in(i.node)) r.instances.push_back(i);
      std::erase_if(t.routes, [&](auto& x) { return x.model == old.model; });
      t.routes.push_back(std::move(r));
    }
  }
}

const msg::routing_table& route_publisher::publish(const cluster_placement& p, const worker_registry& w,
                                                   uint64_t epoch) {
  published_ = live_table(p, w, epoch);
  return published_;
}

std::vector<instance_key> route_publisher::acknowledged(const cluster_placement& p, const worker_registry& w) const {
  std::vector<instance_key> out;
  for (auto& r : p.table.routes)
    for (auto& i : r.instances)
      if (live(w, r.model, i)) out.push_back({i.node, i.device, r.model});
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

}  // namespace sloserve
