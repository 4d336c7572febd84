// The controller: learns which nodes exist, runs scheduler epochs (query analyzer, session
// merging, squishy bin packing) on the rates frontends report, and pushes schedules to workers
// and routing tables to frontends. Until rates are known, and under `scheduler.policy: static`,
// every device runs every model it may serve and budgets are the even split. Under a scaler
// policy the scaler's deployments replace the epochs.
//
// An instance enters routing only once its worker acknowledges the schedule that brought it
// (the worker does so after the model is loaded); until a model has such an instance, the
// instances of the last published table keep serving it (they drain rather than stop).

#include <spdlog/spdlog.h>

#include <map>
#include <optional>
#include <set>

#include "actors/placement.hpp"
#include "actors/roles.hpp"

namespace sloserve {

msg::schedule static_schedule(const cluster_config& cfg, const node_spec& node, uint64_t epoch) {
  // Each model batches up to the saturating size for its tightest even-split budget: a device
  // that runs several models round-robin then stays within their budgets more often.
  std::map<std::string, double> budget;
  for (auto& p : cfg.pipelines) {
    auto split = even_split(p);
    for (size_t i = 0; i < p.stages.size(); ++i) {
      auto& b = budget.try_emplace(p.stages[i].model, split.budget_ms[i]).first->second;
      b = std::min(b, split.budget_ms[i]);
    }
  }
  msg::schedule s;
  s.epoch = epoch;
  for (int d = 0; d < node.device_count(); ++d) {
    msg::device_schedule ds;
    ds.device = static_cast<uint32_t>(d);
    for (auto& m : cfg.models) {
      if (!node.serves(d, m.name)) continue;
      auto it = budget.find(m.name);
      int b = it == budget.end() ? 0 : saturating_batch(m, it->second);
      ds.sessions.push_back({m.name, static_cast<uint32_t>(b > 0 ? b : m.batch_limit())});
    }
    s.devices.push_back(std::move(ds));
  }
  return s;
}

namespace {

using clock_time = caf::actor_clock::time_point;

struct worker_info {
  uint64_t incarnation = 0;
  uint64_t acked = 0;  // schedule epoch the worker runs
  bool up = true;
  bool draining = false;  // left with SIGTERM: planned without, still serves what it holds
};

// Smoothed per-pipeline load from frontends' reports.
struct pipeline_rates {
  double rate = 0;                // queries/s
  std::vector<double> stage;      // invocations/s per stage
  double planned = 0;             // the rate the current plan was made for
};

struct controller_state {
  static inline const char* name = "controller";

  std::shared_ptr<const cluster_config> cfg;
  std::shared_ptr<link> net;
  // The file's models, with the profiles workers measured for entries that had none.
  std::vector<model_spec> models;
  bool told_unprofiled = false;
  std::map<std::string, worker_info> workers;
  std::map<std::string, uint64_t> frontends;  // name -> routing epoch it holds
  uint64_t epoch_base = 0;                    // numbering of this controller's epochs
  uint64_t epoch = 0;                         // current schedule and routing epoch

  // Scheduler.
  std::vector<pipeline_rates> rates;
  std::vector<uint64_t> window_queries;                // since the last beacon
  std::vector<std::vector<uint64_t>> window_stages;
  int beacons_with_load = 0;
  clock_time last_beacon, last_epoch;
  bool planned = false;  // an epoch has replaced the static placement
  std::vector<sched::device_slot> all_slots;
  sched::epoch_input input;
  sched::epoch_result result;
  std::map<std::string, msg::schedule> schedules;  // per worker, current
  msg::routing_table table;                        // current, before filtering by readiness
  msg::routing_table published;                    // the last table frontends were sent
  // (node, device, model) -> schedule epoch that brought the model to that device.
  std::map<std::tuple<std::string, uint32_t, std::string>, uint64_t> since;

  // Scaler.
  deployment deployed;                                     // the latest
  std::map<std::pair<std::string, uint32_t>, uint32_t> cores;  // threads last sent per device
  std::vector<std::string> told_up;                        // the worker set the scaler knows
};

using self_ptr = controller_actor::stateful_pointer<controller_state>;

bool serving(const controller_state& st, const worker_info& w) { return w.up && w.acked > st.epoch_base; }

// Whether instance `i` of `model` may take traffic: its worker is up and runs the schedule that
// brought the model there.
bool live(const controller_state& st, const std::string& model, const msg::route_instance& i) {
  auto it = st.workers.find(i.node);
  if (it == st.workers.end() || !serving(st, it->second)) return false;
  auto s = st.since.find({i.node, i.device, model});
  return s == st.since.end() || it->second.acked >= s->second;
}

// Records, for every (node, device, model) the schedules run, the epoch that brought it.
void track_assignments(controller_state& st) {
  std::set<std::tuple<std::string, uint32_t, std::string>> now;
  for (auto& [node, s] : st.schedules)
    for (auto& d : s.devices)
      for (auto& ss : d.sessions) {
        std::tuple<std::string, uint32_t, std::string> key{node, d.device, ss.model};
        now.insert(key);
        st.since.emplace(key, s.epoch);
      }
  std::erase_if(st.since, [&](auto& kv) { return !now.count(kv.first); });
}

// The current table, with instances that cannot serve yet taken out. A model none of whose
// instances is ready keeps the ones it had in the last published table, on workers that still
// serve: up, or draining after SIGTERM (until their replacements have loaded the model).
msg::routing_table live_table(const controller_state& st) {
  auto t = st.table;
  t.epoch = st.epoch;
  for (auto& r : t.routes) {
    std::erase_if(r.instances, [&](const msg::route_instance& i) { return !live(st, r.model, i); });
    if (!r.instances.empty()) continue;
    for (auto& old : st.published.routes)
      if (old.model == r.model)
        for (auto& i : old.instances) {
          auto it = st.workers.find(i.node);
          if (it == st.workers.end()) continue;
          auto& w = it->second;
          if (serving(st, w) || (w.draining && w.acked > st.epoch_base)) r.instances.push_back(i);
        }
  }
  return t;
}

void publish(self_ptr self) {
  auto& st = self->state;
  auto t = live_table(st);
  st.published = t;
  size_t ready = 0;
  for (auto& [n, w] : st.workers) ready += serving(st, w);
  spdlog::info("{}: routing epoch {}: {} serving workers", st.net->self_name(), st.epoch - st.epoch_base, ready);
  for (auto& [f, held] : st.frontends) {
    held = t.epoch;
    st.net->to_node(f, {{}, t});
  }
}

// The static placement: every device runs every model it may serve; the even split.
void static_plan(controller_state& st) {
  st.schedules.clear();
  st.table = {};
  for (auto& n : st.cfg->nodes)
    if (n.has_role("worker")) st.schedules[n.name] = static_schedule(*st.cfg, n, st.epoch);
  for (auto& m : st.cfg->models) {
    msg::model_route r{m.name, {}};
    for (auto& n : st.cfg->nodes)
      for (int d = 0; n.has_role("worker") && d < n.device_count(); ++d)
        if (n.serves(d, m.name)) r.instances.push_back({n.name, static_cast<uint32_t>(d), 1.0});
    st.table.routes.push_back(std::move(r));
  }
  for (auto& p : st.cfg->pipelines) {
    auto split = even_split(p);
    for (size_t i = 0; i < p.stages.size(); ++i) st.table.budgets.push_back({p.name, p.stages[i].name, split.budget_ms[i]});
  }
}

// Every model a pipeline uses keeps at least one instance: a model the plan left out (no
// traffic yet, or no room) runs as a backup session on a free device, else beside the least
// busy device that may serve it.
void add_backups(controller_state& st) {
  std::set<std::string> routed;
  for (auto& r : st.table.routes)
    if (!r.instances.empty()) routed.insert(r.model);
  std::set<std::pair<std::string, uint32_t>> used;
  for (auto& [node, s] : st.schedules)
    for (auto& d : s.devices)
      if (!d.sessions.empty()) used.insert({node, d.device});
  for (auto& p : st.cfg->pipelines)
    for (auto& stage : p.stages) {
      if (routed.count(stage.model)) continue;
      const sched::device_slot* best = nullptr;
      size_t best_load = SIZE_MAX;
      for (auto& slot : st.input.slots) {
        if (!st.cfg->find_node(slot.node)->serves(static_cast<int>(slot.device), stage.model)) continue;
        size_t load = used.count({slot.node, slot.device}) ? st.schedules[slot.node].devices[slot.device].sessions.size() : 0;
        if (load < best_load) best = &slot, best_load = load;
      }
      if (!best) continue;
      auto* m = st.cfg->find_model(stage.model);
      st.schedules[best->node].devices[best->device].sessions.push_back({m->name, static_cast<uint32_t>(m->batch_limit())});
      used.insert({best->node, best->device});
      for (auto& r : st.table.routes)
        if (r.model == stage.model) r.instances.push_back({best->node, best->device, 1.0});
      routed.insert(stage.model);
    }
}

// Bisects `steps` times for the largest scale in [lo, hi] at which the rates of `in`, scaled,
// plan so that `fits`. On success `res` holds that plan and `in.rates` its rates; otherwise
// both are left as they were. Returns the scale found (`lo` when none fit).
template <class Fits>
double fit_scale(sched::epoch_input& in, const sched::epoch_result* prev, double lo, double hi, int steps,
                 sched::epoch_result& res, Fits fits) {
  auto base = in.rates;
  std::optional<double> best;
  std::string err;
  for (int i = 0; i < steps; ++i) {
    double mid = lo + (hi - lo) / 2;
    for (size_t k = 0; k < base.size(); ++k) in.rates[k] = base[k] * mid;
    sched::epoch_result trial;
    sched::plan_epoch(in, prev, trial, err);
    if (fits(trial)) lo = mid, best = mid, res = std::move(trial);
    else hi = mid;
  }
  for (size_t k = 0; k < base.size(); ++k) in.rates[k] = base[k] * best.value_or(1);
  return lo;
}

// One scheduler epoch on the smoothed rates; shrinks the load planned for when the cluster
// has too few devices for all of it.
void run_epoch(self_ptr self) {
  auto& st = self->state;
  auto& so = st.cfg->scheduler;
  // Planning needs l(b) of every model; the static placement serves until workers report them.
  for (auto& p : st.cfg->pipelines)
    for (auto& stage : p.stages)
      if (st.models[stage.model_index].needs_profile) {
        if (!std::exchange(st.told_unprofiled, true))
          spdlog::info("{}: not planning yet: model '{}' has no profile until a worker measures it",
                       st.net->self_name(), stage.model);
        return;
      }
  auto in = st.input;
  // Only devices of workers that are up: a failed worker's sessions move to the survivors.
  in.slots.clear();
  for (auto& slot : st.all_slots) {
    auto it = st.workers.find(slot.node);
    if (it != st.workers.end() && it->second.up) in.slots.push_back(slot);
  }
  in.rates.clear();
  in.fanouts.clear();
  for (size_t pi = 0; pi < st.cfg->pipelines.size(); ++pi) {
    auto& p = st.cfg->pipelines[pi];
    auto& r = st.rates[pi];
    in.rates.push_back(r.rate * (1 + so.headroom));
    // Measured fan-out: invocations of a stage per invocation of its parent (per query for
    // roots and joins); the declared value where nothing was measured.
    auto fan = declared_fanout(p);
    for (size_t s = 0; s < p.stages.size(); ++s) {
      auto& parents = p.stages[s].parents;
      double base = parents.size() == 1 ? r.stage[parents[0]] : r.rate;
      if (base > 1e-6 && r.stage[s] > 0) fan[s] = r.stage[s] / base;
    }
    in.fanouts.push_back(std::move(fan));
  }
  sched::epoch_result res;
  std::string err;
  auto prev = st.planned ? &st.result : nullptr;
  if (!sched::plan_epoch(in, prev, res, err)) {
    spdlog::error("{}: epoch failed: {}", st.net->self_name(), err);
    return;
  }
  double scale = 1;
  if (res.devices_missing == 0 && res.placement.devices.size() < in.slots.size()) {
    // Devices to spare on a fixed cluster: plan for the largest multiple of the load (up to 4x)
    // that still fits, so that bursts find capacity instead of idle devices.
    scale = fit_scale(in, prev, 1, 4, 8, res, [](const sched::epoch_result& r) {
      return r.devices_missing == 0 && r.placement.infeasible.empty();
    });
  } else if (res.devices_missing > 0) {
    scale = fit_scale(in, prev, 0, 1, 12, res, [](const sched::epoch_result& r) { return r.devices_missing == 0; });
    spdlog::warn("{}: the cluster has {} devices, too few for the measured load; planning for {:.0f}% of it",
                 st.net->self_name(), in.slots.size(), 100 * scale);
  }
  ++st.epoch;
  st.result = std::move(res);
  st.input = in;
  st.planned = true;
  st.last_epoch = self->clock().now();
  for (size_t pi = 0; pi < st.rates.size(); ++pi) st.rates[pi].planned = st.rates[pi].rate;
  st.schedules = schedules_from(*st.cfg, st.input, st.result, st.epoch);
  st.table = routing_from(*st.cfg, st.input, st.result, st.epoch);
  add_backups(st);
  track_assignments(st);
  spdlog::info("{}: epoch {}: {} sessions on {} of {} devices ({} moved), planned for {:.2f}x the measured load",
               st.net->self_name(), st.epoch - st.epoch_base, st.result.sessions.size(),
               st.result.placement.devices.size(), in.slots.size(), st.result.placement.moved,
               scale * (1 + so.headroom));
  if (spdlog::should_log(spdlog::level::debug))
    for (auto& [name, sch] : st.schedules)
      for (auto& d : sch.devices) {
        std::string line;
        for (auto& ss : d.sessions) line += fmt::format(" {}x{}", ss.model, ss.batch);
        spdlog::debug("{}: epoch {}: {} device {} duty {:.1f} ms:{}", st.net->self_name(), st.epoch - st.epoch_base,
                      name, d.device, d.duty_cycle_ms, line);
      }
  // Workers first: a device keeps serving what it loses until it drains, so frontends that
  // still route there for a moment lose nothing.
  for (auto& [name, w] : st.workers)
    if (w.up) st.net->to_node(name, {{}, st.schedules[name]});
  publish(self);
}

// Tells the scaler which workers are up when that changed.
void notify_scaler(self_ptr self) {
  auto& st = self->state;
  auto scaler = st.net->local().scaler;
  if (!scaler) return;
  std::vector<std::string> up;
  for (auto& [name, w] : st.workers)
    if (w.up) up.push_back(name);
  if (up == st.told_up) return;
  st.told_up = up;
  self->send(scaler, worker_set{std::move(up)});
}

// Intra-op threads of the scaler's instances on `node` that it does not run yet (all of them
// when `force`, e.g. after the worker restarted).
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

// The scaler's placement: one schedule per worker whose devices changed, new cores in place,
// and a table weighted by each instance's throughput.
void on_deployment(self_ptr self, deployment& d) {
  auto& st = self->state;
  ++st.epoch;
  std::map<std::string, msg::schedule> next;
  for (auto& n : st.cfg->nodes) {
    if (!n.has_role("worker")) continue;
    auto& s = next[n.name];
    s.epoch = st.epoch;
    for (int k = 0; k < n.device_count(); ++k) s.devices.push_back({static_cast<uint32_t>(k), 0, {}});
  }
  std::map<std::string, msg::model_route> routes;
  for (auto& m : st.cfg->models) routes[m.name].model = m.name;
  for (auto& i : d.instances) {
    auto it = next.find(i.node);
    if (it == next.end() || i.device >= it->second.devices.size()) continue;
    it->second.devices[i.device].sessions.push_back({i.model, i.batch});
    auto* m = st.cfg->find_model(i.model);
    double w = m && m->cores ? m->cores->throughput(static_cast<int>(i.batch), static_cast<int>(i.cores)) : 1.0;
    routes[i.model].instances.push_back({i.node, i.device, w});
  }
  st.deployed = std::move(d);
  for (auto& [name, s] : next) {
    auto old = st.schedules.find(name);
    bool changed = old == st.schedules.end() || old->second.devices != s.devices;
    if (changed) st.schedules[name] = s;
    auto w = st.workers.find(name);
    bool up = w != st.workers.end() && w->second.up;
    // The schedule first, then the cores: the worker applies them in that order.
    if (changed && up) st.net->to_node(name, {{}, st.schedules[name]});
    if (up) send_resizes(self, name, false);
  }
  st.table.routes.clear();
  for (auto& [m, r] : routes) st.table.routes.push_back(std::move(r));
  if (!st.deployed.budgets.empty()) st.table.budgets = st.deployed.budgets;
  track_assignments(st);
  publish(self);
}

// Beacon windows with load before the first plan: one partial window and about a second of
// full ones, so that the rate the first plan is made for is not one window's Poisson noise.
int first_plan_windows(const controller_state& st) {
  return 1 + std::max(1, static_cast<int>(std::lround(1000.0 / std::max(1, st.cfg->runtime.beacon_ms))));
}

bool epoch_due(controller_state& st, clock_time now) {
  auto& so = st.cfg->scheduler;
  if (so.policy == "static" || st.cfg->scaler.enabled() || st.beacons_with_load < first_plan_windows(st)) return false;
  auto since = std::chrono::duration<double>(now - st.last_epoch).count();
  if (!st.planned) return true;
  if (since >= so.epoch_s) return true;
  if (since < so.min_epoch_s) return false;
  for (auto& r : st.rates) {
    if (r.planned <= 0) {
      if (r.rate > 0.5) return true;
      continue;
    }
    if (r.rate < so.rate_band_low * r.planned || r.rate > so.rate_band_high * r.planned) return true;
  }
  return false;
}

void on_beacon(self_ptr self) {
  auto& st = self->state;
  auto now = self->clock().now();
  double window = std::chrono::duration<double>(now - st.last_beacon).count();
  st.last_beacon = now;
  if (window <= 0) return;
  bool any = false;
  for (size_t pi = 0; pi < st.rates.size(); ++pi) {
    auto& r = st.rates[pi];
    // Moving average with the newest beacon weighted 0.5. Before the first plan, which stands
    // for at least min_epoch_s, the rate is the plain mean of the full windows: the first window
    // with load is dropped (load that starts mid-window makes it a fraction of the rate).
    int n = st.beacons_with_load;
    double w = n < 1 ? 1.0 : n < first_plan_windows(st) ? 1.0 / n : 0.5;
    r.rate = w * st.window_queries[pi] / window + (1 - w) * r.rate;
    for (size_t s = 0; s < r.stage.size(); ++s) {
      r.stage[s] = w * st.window_stages[pi][s] / window + (1 - w) * r.stage[s];
      st.window_stages[pi][s] = 0;
    }
    any |= st.window_queries[pi] > 0;
    st.window_queries[pi] = 0;
  }
  if (any) ++st.beacons_with_load;
  if (epoch_due(st, now)) run_epoch(self);
}

void on_register(self_ptr self, msg::register_node& r) {
  auto& st = self->state;
  bool is_worker = std::find(r.roles.begin(), r.roles.end(), "worker") != r.roles.end();
  bool is_frontend = std::find(r.roles.begin(), r.roles.end(), "frontend") != r.roles.end();
  if (is_frontend) {
    auto it = st.frontends.find(r.node);
    if (it == st.frontends.end() || r.schedule_epoch != st.epoch) {
      st.frontends[r.node] = st.epoch;
      st.net->to_node(r.node, {{}, live_table(st)});
    }
  }
  if (!is_worker) return;
  auto* node = st.cfg->find_node(r.node);
  if (!node || !node->has_role("worker")) {
    spdlog::warn("{}: ignoring registration of unknown worker '{}'", st.net->self_name(), r.node);
    return;
  }
  for (auto& mp : r.profiles) {
    auto it = std::find_if(st.models.begin(), st.models.end(), [&](auto& m) { return m.name == mp.model; });
    if (it == st.models.end() || !it->needs_profile || mp.batch.empty() || mp.batch.size() != mp.latency_ms.size())
      continue;
    it->profile = {{mp.batch.begin(), mp.batch.end()}, mp.latency_ms, 0, 0, mp.step};
    it->needs_profile = false;
    spdlog::info("{}: model '{}' planned with the profile worker {} measured", st.net->self_name(), mp.model, r.node);
  }
  bool fresh = !st.workers.count(r.node);
  auto& w = st.workers[r.node];
  if (r.leaving) {
    // A worker shutting down: plan without it now, while it still serves what it holds.
    if (!w.up) return;
    spdlog::info("{}: worker {} is leaving", st.net->self_name(), r.node);
    bool was = serving(st, w);
    w.up = false;
    w.draining = true;
    notify_scaler(self);
    if (st.planned && st.cfg->scheduler.policy != "static") run_epoch(self);
    else if (was) publish(self);
    return;
  }
  bool was_serving = serving(st, w);
  auto was_acked = w.acked;
  bool restarted = w.incarnation != r.incarnation && w.incarnation;
  if (restarted) spdlog::info("{}: worker {} restarted", st.net->self_name(), r.node);
  w.incarnation = r.incarnation;
  w.acked = r.schedule_epoch;
  bool came_back = !w.up;
  w.up = true;
  w.draining = false;
  if (came_back || fresh) notify_scaler(self);
  // A worker that returns after the plan was made gets work again at once.
  if (st.planned && came_back && st.cfg->scheduler.policy != "static") {
    run_epoch(self);
    return;
  }
  auto& mine = st.schedules[r.node];
  if (r.schedule_epoch != mine.epoch) {
    st.net->to_node(r.node, {{}, mine});
    // A restarted worker's devices start with the file's threads.
    send_resizes(self, r.node, restarted || came_back || fresh);
  }
  if (serving(st, w) != was_serving || w.acked != was_acked) publish(self);
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
    st.models = st.cfg->models;
    st.input.models = &st.models;
    st.input.pipelines = &st.cfg->pipelines;
    st.all_slots = device_slots(*st.cfg);
    st.input.slots = st.all_slots;
    st.input.policy = st.cfg->scheduler.policy == "static" ? "nexus" : st.cfg->scheduler.policy;
    st.input.split = st.cfg->scheduler.split;
    st.input.steps = st.cfg->scheduler.steps;
    for (auto& p : st.cfg->pipelines) {
      st.rates.push_back({0, std::vector<double>(p.stages.size(), 0), 0});
      st.window_queries.push_back(0);
      st.window_stages.emplace_back(p.stages.size(), 0);
    }
    static_plan(st);
    track_assignments(st);
    st.last_beacon = st.last_epoch = self->clock().now();
    return {
        [=](start_atom) {
          self->delayed_send(self, std::chrono::milliseconds(self->state.cfg->runtime.beacon_ms), beacon_atom::value);
        },
        [=](msg::register_node& r) { on_register(self, r); },
        [=](deployment& d) { on_deployment(self, d); },
        [=](msg::load_report& r) {
          auto& st = self->state;
          for (auto& pl : r.pipelines) {
            auto* p = st.cfg->find_pipeline(pl.pipeline);
            if (!p) continue;
            auto pi = static_cast<size_t>(p - st.cfg->pipelines.data());
            st.window_queries[pi] += pl.queries;
            for (size_t s = 0; s < pl.stage_invocations.size() && s < st.window_stages[pi].size(); ++s)
              st.window_stages[pi][s] += pl.stage_invocations[s];
          }
        },
        [=](beacon_atom) {
          on_beacon(self);
          self->delayed_send(self, std::chrono::milliseconds(self->state.cfg->runtime.beacon_ms), beacon_atom::value);
        },
        [=](peer_down_atom, const std::string& node) {
          auto it = self->state.workers.find(node);
          if (it == self->state.workers.end()) return;
          if (!it->second.up) {
            // A draining worker that is gone no longer stands in for its replacements.
            if (std::exchange(it->second.draining, false)) publish(self);
            return;
          }
          bool was = serving(self->state, it->second);
          it->second.up = false;
          notify_scaler(self);
          // Re-plan on the survivors now: the failed worker may have held a model's only instances.
          if (self->state.planned && self->state.cfg->scheduler.policy != "static") run_epoch(self);
          else if (was) publish(self);
        },
        [=](peer_up_atom, const std::string&) {},
    };
  });
}

}  // namespace sloserve
