// The controller: learns which nodes exist, gives workers their schedules, and publishes routing
// tables (instances per model, budgets per stage) to frontends. Until the scheduler lands,
// placement is static (roles.hpp) and budgets are the even split.

#include <spdlog/spdlog.h>

#include <map>
#include <set>

#include "actors/roles.hpp"

namespace sloserve {

msg::schedule static_schedule(const cluster_config& cfg, const node_spec& node, uint64_t epoch) {
  msg::schedule s;
  s.epoch = epoch;
  for (int d = 0; d < node.device_count(); ++d) {
    msg::device_schedule ds;
    ds.device = static_cast<uint32_t>(d);
    for (auto& m : cfg.models)
      if (node.serves(d, m.name)) ds.sessions.push_back({m.name, static_cast<uint32_t>(m.batch_limit())});
    s.devices.push_back(std::move(ds));
  }
  return s;
}

namespace {

struct worker_info {
  uint64_t incarnation = 0;
  bool ready = false;  // runs the current schedule and heartbeats
};

struct controller_state {
  static inline const char* name = "controller";

  std::shared_ptr<const cluster_config> cfg;
  std::shared_ptr<link> net;
  std::map<std::string, worker_info> workers;
  std::map<std::string, uint64_t> frontends;  // name -> incarnation
  uint64_t schedule_epoch = 1;
  uint64_t routing_epoch = 0;
};

using self_ptr = controller_actor::stateful_pointer<controller_state>;

msg::routing_table routing(const controller_state& st) {
  msg::routing_table t;
  t.epoch = st.routing_epoch;
  for (auto& m : st.cfg->models) {
    msg::model_route r{m.name, {}};
    for (auto& [name, w] : st.workers) {
      if (!w.ready) continue;
      auto* n = st.cfg->find_node(name);
      for (int d = 0; n && d < n->device_count(); ++d)
        if (n->serves(d, m.name)) r.instances.push_back({name, static_cast<uint32_t>(d), 1.0});
    }
    t.routes.push_back(std::move(r));
  }
  for (auto& p : st.cfg->pipelines) {
    auto split = even_split(p);
    for (size_t i = 0; i < p.stages.size(); ++i)
      t.budgets.push_back({p.name, p.stages[i].name, split.budget_ms[i]});
  }
  return t;
}

void publish(self_ptr self) {
  auto& st = self->state;
  ++st.routing_epoch;
  auto t = routing(st);
  size_t ready = 0;
  for (auto& [n, w] : st.workers) ready += w.ready;
  spdlog::info("{}: routing epoch {}: {} ready workers", st.net->self_name(), st.routing_epoch, ready);
  for (auto& [f, _] : st.frontends) st.net->to_node(f, {{}, t});
}

void on_register(self_ptr self, msg::register_node& r) {
  auto& st = self->state;
  bool is_worker = std::find(r.roles.begin(), r.roles.end(), "worker") != r.roles.end();
  bool is_frontend = std::find(r.roles.begin(), r.roles.end(), "frontend") != r.roles.end();
  if (is_frontend && r.schedule_epoch != st.routing_epoch)
    st.net->to_node(r.node, {{}, routing(st)});
  if (is_frontend) st.frontends[r.node] = r.incarnation;
  if (!is_worker) return;
  auto* node = st.cfg->find_node(r.node);
  if (!node || !node->has_role("worker")) {
    spdlog::warn("{}: ignoring registration of unknown worker '{}'", st.net->self_name(), r.node);
    return;
  }
  auto& w = st.workers[r.node];
  if (w.incarnation != r.incarnation) {
    if (w.incarnation) spdlog::info("{}: worker {} restarted", st.net->self_name(), r.node);
    w.incarnation = r.incarnation;
    if (w.ready) {
      w.ready = false;
      publish(self);
    }
  }
  if (r.schedule_epoch != st.schedule_epoch) {
    st.net->to_node(r.node, {{}, static_schedule(*st.cfg, *node, st.schedule_epoch)});
    return;
  }
  if (!w.ready) {
    w.ready = true;
    publish(self);
  }
}

}  // namespace

controller_actor spawn_controller(caf::actor_system& sys, actor_args args) {
  return sys.spawn([args](self_ptr self) -> controller_actor::behavior_type {
    self->state.cfg = args.cfg;
    self->state.net = args.net;
    // Epochs of a restarted controller must not collide with its predecessor's.
    self->state.routing_epoch = (args.incarnation % 1000000) * 1000000;
    return {
        [=](start_atom) {},
        [=](msg::register_node& r) { on_register(self, r); },
        [=](peer_down_atom, const std::string& node) {
          auto it = self->state.workers.find(node);
          if (it != self->state.workers.end() && it->second.ready) {
            it->second.ready = false;
            publish(self);
          }
        },
        [=](peer_up_atom, const std::string&) {},
    };
  });
}

}  // namespace sloserve
