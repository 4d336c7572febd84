// The controller: a thin actor over pure parts. The worker registry knows which workers are up and
// which schedule each runs; placements (scheduling/placement) come from the static plan, epochs on
// the monitor's pipeline rates, or the scaler's deployments; the route publisher turns the current
// one into the table frontends may use (an instance routes once its worker acknowledges it).

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>

#include "actors/controller_state.hpp"
#include "scheduling/profile_drift.hpp"

namespace sloserve::control {

bool replans(const controller_state& st) {
  return (st.plan || st.plan_pending) && st.policy->plans_epochs();
}

bool plans_epochs(const controller_state& st) {
  return st.policy->plans_epochs() && !st.cfg->scaler.enabled() && !st.rounds;
}

const std::vector<pipeline>& running_pipelines(const controller_state& st) {
  return st.plan && st.plan->input.chosen ? *st.plan->input.chosen : st.cfg->pipelines;
}

bool cut_off(const controller_state& st) {
  auto others = st.cfg->nodes.size() - 1;
  return others > 0 && 2 * st.unheard.size() > others;
}

namespace {

// Tells the scaler which workers are up and which instances they acknowledged, when that changed.
void tell_scaler(self_ptr self) {
  auto& st = self->state;
  auto scaler = st.net->local().scaler;
  if (!scaler) return;
  worker_set now{st.workers.up_workers(), st.publisher.acknowledged(st.current, st.workers)};
  if (now.up == st.told_scaler.up && now.acknowledged == st.told_scaler.acknowledged) return;
  st.told_scaler = now;
  self->send(scaler, std::move(now));
}

void publish(self_ptr self) {
  auto& st = self->state;
  if (cut_off(st)) return void(st.held = true);
  auto& t = st.publisher.publish(st.current, st.workers, st.epoch);
  // Said once per epoch and per change of the workers serving it: a table re-sent as workers
  // acknowledge is not news (nor are a policy's rounds, every interval).
  std::pair said{st.epoch, st.workers.serving_count()};
  spdlog::log(st.rounds || said == st.said_routing ? spdlog::level::debug : spdlog::level::info,
              "{}: routing epoch {}: {} serving workers", st.net->self_name(), st.epoch - st.epoch_base, said.second);
  st.said_routing = said;
  for (auto& f : st.frontends) st.net->to_node(f, {{}, t});
  tell_scaler(self);
}

// The current placement in the node's metrics: devices it uses, instances of each model.
void count_placement(controller_state& st) {
  size_t devices = 0;
  std::map<std::string, size_t> instances;
  for (auto& m : st.cfg->models) instances[m.name] = 0;
  for (auto& [name, s] : st.current.schedules)
    for (auto& d : s.devices) {
      devices += d.sessions.empty() ? 0 : 1;
      for (auto& ss : d.sessions) ++instances[ss.model];
    }
  st.net->metrics.placement(devices, instances);
}

}  // namespace

void adopt(self_ptr self, cluster_placement p) {
  auto& st = self->state;
  // Devices run their models at the refreshed profile too (their early drop).
  if (!st.profile_scales.empty())
    for (auto& [name, s] : p.schedules)
      for (auto& d : s.devices)
        for (auto& x : d.sessions)
          if (auto it = st.profile_scales.find(x.model); it != st.profile_scales.end()) x.latency_scale = it->second;
  for (auto& [name, s] : p.schedules) {
    auto old = st.current.schedules.find(name);
    if (st.workers.up(name) && (old == st.current.schedules.end() || old->second.epoch != s.epoch))
      st.net->to_node(name, {{}, s});
  }
  st.current = std::move(p);
  count_placement(st);
  st.publisher.adopt(st.current);
  publish(self);
}

namespace {

// A worker that was up left or was lost: out of routing now, and a plan for the survivors (it may
// have held a model's only instances).
void after_departure(self_ptr self, const worker_registry::left& left) {
  if (left.was_serving)
    publish(self);
  else
    tell_scaler(self);
  if (replans(self->state)) run_epoch(self);
}

// A node that runs another configuration than the one applied last (it restarted with its file,
// or missed the update) gets the applied one again.
void resync_config(controller_state& st, const msg::register_node& r) {
  if (st.revision == 0 || r.config_revision == st.revision) return;
  spdlog::info("{}: node {} runs another configuration: sending revision {:016x}", st.net->self_name(), r.node,
               st.revision);
  st.net->to_node(r.node, {{}, msg::config_update{st.revision, st.revision_text, st.revision_file}});
}

// What a worker's devices could not load of its schedule: not routed there (`routes`: that
// changed), and planned elsewhere while another worker can take it (`plan`: a model is newly so).
struct unloaded_news {
  bool routes = false, plan = false;
};
unloaded_news note_unloaded(controller_state& st, const msg::register_node& r) {
  std::vector<worker_registry::unloaded_model> now;
  for (auto& u : r.unloaded) now.push_back({u.device, u.model, u.reason});
  unloaded_news out;
  out.routes = now != st.workers.unloaded_of(r.node);
  if (!out.routes) return out;
  auto before = st.workers.unloadable();
  for (auto& u : st.workers.set_unloaded(r.node, std::move(now)))
    spdlog::warn("{}: worker {} device {} could not load model '{}': {}; it is not routed there{}", st.net->self_name(),
                 r.node, u.device, u.model, u.reason,
                 st.policy->plans_epochs() ? ", and is planned on other workers while one can take it" : "");
  out.plan = st.workers.unloadable() != before;
  return out;
}

void on_register(self_ptr self, msg::register_node& r) {
  auto& st = self->state;
  auto has = [&](role x) { return std::find(r.roles.begin(), r.roles.end(), knob_name(x)) != r.roles.end(); };
  if (has(role::frontend)) resync_config(st, r);
  if (has(role::frontend) && (!st.frontends.count(r.node) || r.schedule_epoch != st.epoch)) {
    st.frontends.insert(r.node);
    st.net->to_node(r.node, {{}, st.publisher.live_table(st.current, st.workers, st.epoch)});
  }
  if (!has(role::worker)) return;
  auto* node = st.cfg->find_node(r.node);
  if (!node || !node->has_role(role::worker))
    return spdlog::warn("{}: ignoring registration of unknown worker '{}'", st.net->self_name(), r.node);
  for (auto& mp : r.profiles)
    if (adopt_measured_profile(st.models, mp))
      spdlog::info("{}: model '{}' planned with the profile worker {} measured", st.net->self_name(), mp.model, r.node);
  if (r.leaving) {
    auto left = st.workers.on_leave(r.node);
    if (!left.was_up) return;
    spdlog::info("{}: worker {} is leaving", st.net->self_name(), r.node);
    return after_departure(self, left);
  }
  auto j = st.workers.on_register(r.node, r.incarnation, r.schedule_epoch);
  resync_config(st, r);
  auto unloaded = note_unloaded(st, r);
  if (j.restarted) spdlog::info("{}: worker {} restarted", st.net->self_name(), r.node);
  if (j.came_back && replans(st)) return run_epoch(self);  // a worker that returns gets work again at once
  auto& mine = st.current.schedules[r.node];
  if (r.schedule_epoch != mine.epoch) {
    st.net->to_node(r.node, {{}, mine});
    send_resizes(self, r.node, j.restarted || j.came_back || j.fresh);  // a restart runs the file's threads
  }
  if (j.changed || unloaded.routes)
    publish(self);
  else
    tell_scaler(self);
  // A worker that joins gets work at once: before any load, a plan for what the devices up hold.
  if (j.fresh && plans_epochs(st) && (st.plan || sched::nothing_to_plan_for(st.rates))) return run_epoch(self);
  if (unloaded.plan && replans(st)) run_epoch(self);
}

void on_lost(self_ptr self, const std::string& node) {
  auto& st = self->state;
  bool was_cut_off = cut_off(st);
  st.unheard.insert(node);
  if (!was_cut_off && cut_off(st))
    spdlog::warn(
        "{}: hears {} of the {} other nodes: keeping the current placement and routing until it hears "
        "more of them",
        st.net->self_name(), st.cfg->nodes.size() - 1 - st.unheard.size(), st.cfg->nodes.size() - 1);
  auto left = st.workers.on_lost(node);
  if (left.stopped_draining) return publish(self);  // it no longer stands in for its replacements
  if (left.was_up) after_departure(self, left);
}

// The monitor's rates of the last beacon: an epoch when one is due.
void on_rates(self_ptr self, sched::pipeline_rates& r) {
  auto& st = self->state;
  st.rates = std::move(r);
  floor_unmeasured(st);
  if (st.budget)
    st.budget->charge(seconds_since_epoch(self->clock().now()), running_pipelines(st), st.models, st.rates,
                      st.budget_price);
  auto why = epoch_due(st, self->clock().now());
  if (why == sched::epoch_reason::surge)
    spdlog::info("{}: a pipeline's load is above what the plan carries: planning again now", st.net->self_name());
  if (why != sched::epoch_reason::none) run_epoch(self, why == sched::epoch_reason::surge);
}

// Workers behind slow links, and models too large for a worker's link: planned around.
void on_links(self_ptr self, link_verdicts& v) {
  auto& st = self->state;
  std::set<std::string> slow(v.slow.begin(), v.slow.end());
  if (slow == st.slow && v.far == st.far) return;
  st.slow = std::move(slow);
  st.far = std::move(v.far);
  if (replans(st)) run_epoch(self);
}

// Models whose batches have run off their profile for a while: planned at what they measure.
void on_profile_scales(self_ptr self, profile_scales& p) {
  auto& st = self->state;
  bool changed = false;
  for (auto& [name, scale] : p.scales) {
    auto was = sched::rescale_model(st.models, st.profile_scales, name, scale);
    if (!was) continue;
    spdlog::info(
        "{}: model '{}' runs at {:.2f}x its profile while serving (it was planned at {:.2f}x): planning with "
        "the refreshed profile",
        st.net->self_name(), name, scale, *was);
    changed = true;
  }
  if (changed && replans(st)) run_epoch(self);
}

void on_heard(self_ptr self, const std::string& node) {
  auto& st = self->state;
  bool was_cut_off = cut_off(st);
  st.unheard.erase(node);
  if (!was_cut_off || cut_off(st) || !std::exchange(st.held, false)) return;
  spdlog::info("{}: hears the cluster again; planning and routing resume", st.net->self_name());
  if (replans(st))
    run_epoch(self);
  else
    publish(self);
}

// A client's uplink moved much: a round now, or 25 ms after the last one (or ten times what it
// took, so that moves keep planning under a tenth of the controller's time).
void on_client_moved(self_ptr self) {
  auto& st = self->state;
  if (!st.rounds || st.round_deferred) return;
  auto since = self->clock().now() - st.last_round;
  auto floor = std::max<caf::timespan>(std::chrono::milliseconds(25), 10 * st.round_cost);
  if (since >= floor) return ask_clients(self);
  st.round_deferred = true;
  self->delayed_send(self, floor - since, round_atom::value);
}

}  // namespace
}  // namespace sloserve::control

namespace sloserve {

controller_actor spawn_controller(caf::actor_system& sys, actor_args args) {
  using namespace control;
  return sys.spawn([args](self_ptr self) -> controller_actor::behavior_type {
    auto& st = self->state;
    st.cfg = args.cfg;
    st.net = args.net;
    // Epochs of a restarted controller must not collide with its predecessor's.
    st.epoch_base = (args.incarnation % 1000000) * 1000000;
    st.epoch = st.epoch_base + 1;
    st.workers = worker_registry(st.epoch_base);
    st.models = st.cfg->models;
    st.planner = args.planner ? args.planner(self->home_system()) : spawn_planner(self->home_system());
    self->link_to(st.planner);  // it stops with the controller
    st.rates.pipelines.resize(st.cfg->pipelines.size());
    st.policy = &sched::policy_of(st.cfg->scheduler);
    if (st.cfg->scheduler.cost_budget > 0) {
      st.budget.emplace(st.cfg->scheduler.cost_budget, st.cfg->scheduler.budget_horizon_s);
      st.budget_price = sched::mean_price(planning_input(*st.cfg, st.models).slots);
    }
    st.rounds = st.policy->rounds(*st.cfg);
    st.current = static_placement(*st.cfg, st.epoch);
    count_placement(st);
    st.publisher.adopt(st.current);
    st.last_epoch = self->clock().now();
    auto beacon = std::chrono::milliseconds(st.cfg->runtime.beacon_ms);
    return {
        [=](start_atom) {
          self->delayed_send(self, beacon, beacon_atom::value);
          if (self->state.rounds) self->send(self, tick_atom::value);
        },
        [=](tick_atom) {
          auto& st = self->state;
          self->delayed_send(self, st.rounds->interval(), tick_atom::value);
          ask_clients(self);
        },
        [=](clients_atom) { on_client_moved(self); },
        [=](round_atom) {
          self->state.round_deferred = false;
          ask_clients(self);
        },
        [=](msg::register_node& r) { on_register(self, r); },
        [=](admin_call& call) { on_apply(self, call); },
        [=](msg::config_ack& ack) { on_config_ack(self, ack); },
        [=](applied_atom, uint64_t token) { on_apply_wait_over(self, token); },
        [=](deployment& d) { on_deployment(self, d); },
        [=](beacon_atom) {
          self->delayed_send(self, beacon, beacon_atom::value);
          if (auto mon = self->state.net->local().monitor)
            self->request(mon, caf::infinite, rates_atom::value).then([=](sched::pipeline_rates& r) {
              on_rates(self, r);
            });
        },
        [=](peer_down_atom, const std::string& node) { on_lost(self, node); },
        [=](link_verdicts& v) { on_links(self, v); },
        [=](profile_scales& p) { on_profile_scales(self, p); },
        [=](peer_up_atom, const std::string& node) { on_heard(self, node); },
    };
  });
}

}  // namespace sloserve
