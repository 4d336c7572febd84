// The controller: a thin actor over pure parts. The worker registry knows which workers are up and
// which schedule each runs; placements (scheduling/placement) come from the static plan, epochs on
// the monitor's pipeline rates, or the scaler's deployments; the route publisher turns the current
// one into the table frontends may use (an instance routes once its worker acknowledges it).

#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <set>

#include "actors/roles.hpp"
#include "actors/route_publisher.hpp"
#include "actors/worker_registry.hpp"
#include "control/jellyfish_core.hpp"
#include "scheduling/link_estimate.hpp"
#include "scheduling/policies/registry.hpp"

namespace sloserve {
namespace {

using clock_time = caf::actor_clock::time_point;

struct controller_state {
  static inline const char* name = "controller";

  std::shared_ptr<const cluster_config> cfg;
  const sched::scheduling_policy* policy = nullptr;  // scheduler.policy's
  std::shared_ptr<link> net;
  std::vector<model_spec> models;  // the file's, with profiles workers measured for those without
  bool told_unprofiled = false;
  worker_registry workers;
  std::set<std::string> frontends;
  // Nodes this one does not hear now. Hearing fewer than half of the others, the controller is
  // more likely cut off than they are all gone: it keeps the placement and routing it has
  // (plans and tables made now would reach the frontends late, and wrong) until it hears them.
  std::set<std::string> unheard;
  bool held = false;                                    // a plan or a table was held back while cut off
  std::set<std::string> slow;                           // workers behind slow links (the monitor's): planned without
  std::map<std::string, std::vector<std::string>> far;  // per worker, models too large for its link
  uint64_t epoch_base = 0;                              // numbering of this controller's epochs
  uint64_t epoch = 0;                                   // current schedule and routing epoch
  cluster_placement current;
  route_publisher publisher;
  std::pair<uint64_t, size_t> said_routing;  // the routing epoch and serving workers logged last
  worker_set told_scaler;
  // Epochs.
  sched::pipeline_rates rates;  // the monitor's, as of the last beacon
  clock_time last_epoch;
  planner_actor planner;                      // plans off this actor's thread
  std::shared_ptr<const planned_epoch> plan;  // the plan applied; null: the static placement serves
  bool plan_pending = false;
  bool replan = false;  // what it plans for changed while a plan was pending: that plan is stale
  // The scaler's.
  deployment deployed;
  std::map<std::pair<std::string, uint32_t>, uint32_t> cores;  // threads last sent per device
  // Jellyfish's (scheduler.policy: jellyfish).
  std::optional<jellyfish_core> jellyfish;
  clock_time last_round;                   // of jellyfish's re-schedules
  std::chrono::nanoseconds round_cost{0};  // what the last one took to decide (CPU, steady clock)
  bool round_deferred = false;             // a client's move came too soon after one: a round follows
};

using self_ptr = controller_actor::stateful_pointer<controller_state>;

bool replans(const controller_state& st) {
  return (st.plan || st.plan_pending) && st.policy->plans_epochs();
}

// Whether scheduler epochs place sessions (not the static placement, the scaler or Jellyfish's rounds).
bool plans_epochs(const controller_state& st) {
  return st.policy->plans_epochs() && !st.cfg->scaler.enabled() && !st.jellyfish;
}

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

bool cut_off(const controller_state& st) {
  auto others = st.cfg->nodes.size() - 1;
  return others > 0 && 2 * st.unheard.size() > others;
}

void publish(self_ptr self) {
  auto& st = self->state;
  if (cut_off(st)) return void(st.held = true);
  auto& t = st.publisher.publish(st.current, st.workers, st.epoch);
  // Said once per epoch and per change of the workers serving it: a table re-sent as workers
  // acknowledge is not news (nor are Jellyfish's, re-mapped every interval).
  std::pair said{st.epoch, st.workers.serving_count()};
  spdlog::log(st.jellyfish || said == st.said_routing ? spdlog::level::debug : spdlog::level::info,
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

// Makes `p` the current placement: workers that are up get their schedules of a new epoch first
// (a device keeps serving what it loses until it drains, so frontends that still route there
// lose nothing), then frontends get the table.
void adopt(self_ptr self, cluster_placement p) {
  auto& st = self->state;
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

void on_planned(self_ptr self, planned_epoch& p);

// Whether a plan may be made now: not while cut off (held for later), nor while a model lacks the
// profile a worker will measure.
bool may_plan(controller_state& st) {
  if (cut_off(st)) return st.held = true, false;
  if (auto* m = unprofiled_model(*st.cfg, st.models)) {
    if (!std::exchange(st.told_unprofiled, true))
      spdlog::info("{}: not planning yet: model '{}' has no profile until a worker measures it", st.net->self_name(),
                   m->name);
    return false;
  }
  return true;
}

// One scheduler epoch on the monitor's rates and the workers up, planned by the planner, one at a
// time; `surge`: for the last window's rate where it is above the smoothed one.
void run_epoch(self_ptr self, bool surge = false) {
  auto& st = self->state;
  if (!may_plan(st)) return;
  // Least-cost policies plan for load only: with none, what serves stays.
  if (st.policy->plans_least_cost() && sched::nothing_to_plan_for(st.rates)) return;
  if (std::exchange(st.plan_pending, true)) return void(st.replan = true);  // planned again on its return
  // Workers behind slow links are left out, unless that would leave none.
  bool fast_one = false;
  for (auto& n : st.cfg->nodes) fast_one |= n.has_role(role::worker) && st.workers.up(n.name) && !st.slow.count(n.name);
  auto req = epoch_request(
      *st.cfg, std::make_shared<const std::vector<model_spec>>(st.models), st.rates, st.plan,
      [&](const std::string& node) { return st.workers.up(node) && (!fast_one || !st.slow.count(node)); }, surge);
  // Models too large for a worker's link are placed elsewhere, while another worker can take them.
  sched::keep_models_off(req.input.slots, st.far, st.models);
  self->request(st.planner, caf::infinite, std::move(req)).then([=](planned_epoch& p) { on_planned(self, p); });
}

// A plan arrived: applied unless what it was made for changed meanwhile (then it plans again).
void on_planned(self_ptr self, planned_epoch& p) {
  auto& st = self->state;
  st.plan_pending = false;
  // Cut off since it asked (the workers it lost just before were lost to it alone, most likely):
  // the plan is for a cluster it cannot see, and planning resumes when it hears it again.
  if (cut_off(st)) {
    st.held = true;
    st.replan = false;
    return;
  }
  if (std::exchange(st.replan, false)) return run_epoch(self);
  if (!p.error.empty()) return spdlog::error("{}: epoch failed: {}", st.net->self_name(), p.error);
  if (p.scale < 1 && !p.capacity)
    spdlog::warn("{}: the cluster has {} devices, too few for the load ({} queries/s); planning for {:.0f}% of it",
                 st.net->self_name(), p.input.slots.size(), fmt::join(p.planned.rate, ", "), 100 * p.scale);
  // Variants given up for memory, said when that changes (MCDNN's catalogue).
  if (p.degraded != (st.plan ? st.plan->degraded : std::vector<std::string>{})) {
    if (p.degraded.empty())
      spdlog::info("{}: memory: every stage runs its most accurate variant again", st.net->self_name());
    else
      spdlog::warn("{}: memory: the most accurate variants do not fit the cluster{}; running {}", st.net->self_name(),
                   p.variants_fit ? "" : " (nor do the smallest)", fmt::join(p.degraded, "; "));
  }
  ++st.epoch;
  auto plan = std::make_shared<planned_epoch>(std::move(p));
  plan->previous.reset();  // only the planning needed it
  st.plan = plan;
  st.last_epoch = self->clock().now();
  if (plan->capacity)
    spdlog::info(
        "{}: epoch {}: no load measured yet: {} sessions on {} of {} devices, for what they hold ({:.1f} "
        "queries/s per pipeline)",
        st.net->self_name(), st.epoch - st.epoch_base, plan->result.sessions.size(),
        plan->result.placement.devices.size(), plan->input.slots.size(), plan->scale);
  else
    spdlog::info(
        "{}: epoch {}: {} sessions on {} of {} devices ({} moved), planned for {:.2f}x the load ({:.1f} queries/s)",
        st.net->self_name(), st.epoch - st.epoch_base, plan->result.sessions.size(),
        plan->result.placement.devices.size(), plan->input.slots.size(), plan->result.placement.moved,
        plan->scale * (1 + st.cfg->scheduler.headroom), fmt::join(plan->planned.rate, ", "));
  if (auto& fr = plan->result.fragment_routes; !fr.empty()) {
    std::vector<std::string> routes;
    for (auto& f : fr) routes.push_back(fmt::format("{}@{:g}ms {}", f.start, f.slo_ms, fmt::join(f.models, "+")));
    spdlog::info("{}: graft: {} fragments on {:.2f} GPU shares: {}", st.net->self_name(), fr.size(),
                 plan->result.resources, fmt::join(routes, ", "));
  }
  adopt(self, epoch_placement(*st.cfg, plan->input, plan->result, st.epoch, &st.current));
}

// Threads of the scaler's instances on `node` it does not run yet (all when `force`: a restart).
void send_resizes(self_ptr self, const std::string& node, bool force) {
  auto& st = self->state;
  for (auto& i : st.deployed.instances) {
    if (i.node != node) continue;
    auto& sent = st.cores[{i.node, i.device}];
    if (!force && sent == i.cores) continue;
    sent = i.cores;
    st.net->to_node(node, {{}, msg::resize{i.device, i.cores}});
  }
}

void on_deployment(self_ptr self, deployment& d) {
  auto& st = self->state;
  auto p = deployment_placement(*st.cfg, d, ++st.epoch, st.current.table.budgets, &st.current);
  st.deployed = std::move(d);
  // A worker whose devices did not change keeps its schedule and its epoch.
  for (auto& [name, s] : p.schedules) {
    auto old = st.current.schedules.find(name);
    if (old != st.current.schedules.end() && old->second.devices == s.devices) s = old->second;
  }
  adopt(self, std::move(p));  // the schedule first, then the cores: the worker applies them in that order
  for (auto& name : st.workers.up_workers()) send_resizes(self, name, false);
}

// Why an epoch is due now, if it is.
sched::epoch_reason epoch_due(const controller_state& st, clock_time now) {
  if (!plans_epochs(st) || st.plan_pending) return sched::epoch_reason::none;
  auto since = std::chrono::duration<double>(now - st.last_epoch).count();
  return sched::epoch_gate(*st.policy, epoch_rule_of(*st.cfg), st.rates, st.plan ? &st.plan->planned : nullptr,
                           st.plan ? &st.plan->result : nullptr, since);
}

// One Jellyfish re-schedule on the clients the frontends reported. A worker whose devices keep
// their sessions keeps its schedule; nothing is sent when nothing changed.
void jellyfish_round(self_ptr self, const std::vector<msg::client_load>& clients) {
  auto& st = self->state;
  if (!may_plan(st)) return;
  std::vector<sched::device_slot> slots;
  for (auto& s : device_slots(*st.cfg))
    if (st.workers.up(s.node)) slots.push_back(s);
  auto switches = st.jellyfish->counters().switches;
  auto began = std::chrono::steady_clock::now();
  auto p = st.jellyfish->decide(clients, slots, st.models, st.epoch + 1);
  st.round_cost = std::chrono::steady_clock::now() - began;
  bool changed = false;
  for (auto& [name, s] : p.schedules) {
    auto old = st.current.schedules.find(name);
    if (old != st.current.schedules.end() && old->second.devices == s.devices)
      s = old->second;
    else
      changed = true;
  }
  auto& t = st.current.table;
  if (!changed && p.table.routes == t.routes && p.table.budgets == t.budgets && p.table.clients == t.clients) return;
  if (auto& c = st.jellyfish->counters(); c.switches != switches)
    spdlog::info("{}: jellyfish: {} clients, {:.0f}% mapped within their budgets, accuracy {:.1f}%; {} devices switch",
                 st.net->self_name(), clients.size(), 100 * c.mapped, 100 * c.accuracy, c.switches - switches);
  ++st.epoch;
  adopt(self, std::move(p));
}

// Asks the monitor for the clients and re-schedules on them.
void ask_clients(self_ptr self) {
  auto& st = self->state;
  st.last_round = self->clock().now();
  if (auto mon = st.net->local().monitor)
    self->request(mon, caf::infinite, clients_atom::value).then([=](std::vector<msg::client_load>& c) {
      jellyfish_round(self, c);
    });
}

// A worker that was up left or was lost: out of routing now, and a plan for the survivors (it may
// have held a model's only instances).
void after_departure(self_ptr self, const worker_registry::left& left) {
  if (left.was_serving)
    publish(self);
  else
    tell_scaler(self);
  if (replans(self->state)) run_epoch(self);
}

void on_register(self_ptr self, msg::register_node& r) {
  auto& st = self->state;
  auto has = [&](role x) { return std::find(r.roles.begin(), r.roles.end(), knob_name(x)) != r.roles.end(); };
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
  if (j.restarted) spdlog::info("{}: worker {} restarted", st.net->self_name(), r.node);
  if (j.came_back && replans(st)) return run_epoch(self);  // a worker that returns gets work again at once
  auto& mine = st.current.schedules[r.node];
  if (r.schedule_epoch != mine.epoch) {
    st.net->to_node(r.node, {{}, mine});
    send_resizes(self, r.node, j.restarted || j.came_back || j.fresh);  // a restart runs the file's threads
  }
  if (j.changed)
    publish(self);
  else
    tell_scaler(self);
  // A worker that joins gets work at once: before any load, a plan for what the devices up hold.
  if (j.fresh && plans_epochs(st) && (st.plan || sched::nothing_to_plan_for(st.rates))) run_epoch(self);
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

}  // namespace

controller_actor spawn_controller(caf::actor_system& sys, actor_args args) {
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
    st.policy = &sched::policy_of(st.cfg->scheduler.policy);
    if (st.policy->maps_clients()) st.jellyfish.emplace(*st.cfg);
    st.current = static_placement(*st.cfg, st.epoch);
    count_placement(st);
    st.publisher.adopt(st.current);
    st.last_epoch = self->clock().now();
    auto beacon = std::chrono::milliseconds(st.cfg->runtime.beacon_ms);
    return {
        [=](start_atom) {
          self->delayed_send(self, beacon, beacon_atom::value);
          if (self->state.jellyfish) self->send(self, tick_atom::value);
        },
        [=](tick_atom) {
          auto& st = self->state;
          self->delayed_send(
              self, std::chrono::microseconds(static_cast<int64_t>(st.cfg->scheduler.jellyfish.interval_ms * 1e3)),
              tick_atom::value);
          ask_clients(self);
        },
        [=](clients_atom) {
          // A client's uplink moved much: re-schedule now, or 25 ms after the last round (or ten
          // times what it took, so that moves keep planning under a tenth of the controller's time).
          auto& st = self->state;
          if (!st.jellyfish || st.round_deferred) return;
          auto since = self->clock().now() - st.last_round;
          auto floor = std::max<caf::timespan>(std::chrono::milliseconds(25), 10 * st.round_cost);
          if (since >= floor) return ask_clients(self);
          st.round_deferred = true;
          self->delayed_send(self, floor - since, round_atom::value);
        },
        [=](round_atom) {
          self->state.round_deferred = false;
          ask_clients(self);
        },
        [=](msg::register_node& r) { on_register(self, r); },
        [=](deployment& d) { on_deployment(self, d); },
        [=](beacon_atom) {
          self->delayed_send(self, beacon, beacon_atom::value);
          if (auto mon = self->state.net->local().monitor)
            self->request(mon, caf::infinite, rates_atom::value).then([=](sched::pipeline_rates& r) {
              self->state.rates = std::move(r);
              auto why = epoch_due(self->state, self->clock().now());
              if (why == sched::epoch_reason::surge)
                spdlog::info("{}: a pipeline's load is above what the plan carries: planning again now",
                             self->state.net->self_name());
              if (why != sched::epoch_reason::none) run_epoch(self, why == sched::epoch_reason::surge);
            });
        },
        [=](peer_down_atom, const std::string& node) { on_lost(self, node); },
        [=](link_verdicts& v) {
          auto& st = self->state;
          std::set<std::string> slow(v.slow.begin(), v.slow.end());
          if (slow == st.slow && v.far == st.far) return;
          st.slow = std::move(slow);
          st.far = std::move(v.far);
          if (replans(st)) run_epoch(self);
        },
        [=](peer_up_atom, const std::string& node) {
          auto& st = self->state;
          bool was_cut_off = cut_off(st);
          st.unheard.erase(node);
          if (!was_cut_off || cut_off(st) || !std::exchange(st.held, false)) return;
          spdlog::info("{}: hears the cluster again; planning and routing resume", st.net->self_name());
          if (replans(st))
            run_epoch(self);
          else
            publish(self);
        },
    };
  });
}

}  // namespace sloserve
