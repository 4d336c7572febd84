// The simulated control plane: scheduler epochs, placements, the scaler, node failures.

#include "sim/engine.hpp"

namespace sloserve::sim::detail {

void engine::on_beacon(ns now) {
  for (size_t p = 0; p < cfg_.pipelines.size(); ++p) {
    // Shed queries count as offered, at the stages' measured rates per query, as the monitor
    // counts a frontend's.
    sched::add_shed(window_queries_[p], window_stages_[p], window_fallthroughs_[p], window_shed_[p]);
    load_->count(p, window_queries_[p], window_stages_[p], window_fallthroughs_[p]);
    window_queries_[p] = window_shed_[p] = 0;
    std::fill(window_stages_[p].begin(), window_stages_[p].end(), 0);
    std::fill(window_fallthroughs_[p].begin(), window_fallthroughs_[p].end(), 0);
  }
  load_->close_window(cfg_.runtime.beacon_ms / 1000.0);
  refresh_profiles(now);
  if (budget_)
    budget_->charge(static_cast<double>(now) / 1e9, running_ ? *running_ : cfg_.pipelines, cfg_.models, load_->rates(),
                    budget_price_);
  if (plans_epochs()) {
    double since = static_cast<double>(now - last_epoch_) / 1e9;
    auto why = sched::epoch_gate(scheduling_, epoch_rule_of(cfg_), load_->rates(), planned_ ? &planned_for_ : nullptr,
                                 planned_ ? previous_.get() : nullptr, since);
    if (why != sched::epoch_reason::none) plan(now, why == sched::epoch_reason::surge);
  }
  if (now < end_send_ + 10'000 * ns_per_ms) post(now + cfg_.runtime.beacon_ms * ns_per_ms, kind::beacon);
}

// The beacon's batch times reach the drift detector (the monitor's part); a model whose scale
// changed is planned at it at once (the controller's), and the scaler sizes it so too.
void engine::refresh_profiles(ns now) {
  if (!drift_) return;
  for (size_t m = 0; m < exec_.size(); ++m) {
    auto& x = exec_[m];
    if (x.batches > 0) drift_->add(cfg_.models[m].name, x.took, x.said, x.batches);
    x = {};
  }
  bool changed = false;
  for (auto& [model, scale] : drift_->take_changes()) {
    if (!sched::rescale_model(models_, scales_, model, scale)) continue;
    char line[160];
    std::snprintf(line, sizeof line, "%s x%.2f at %.1f s", model.c_str(), scale, static_cast<double>(now) / 1e9);
    refreshes_.push_back(line);
    if (scaler_) scaler_->rescale(model, scale);
    changed = true;
  }
  if (changed && plans_epochs()) plan(now);
}

void engine::plan(ns now, bool surge, bool immediately) {
  // As the controller's: least-cost policies plan for load only.
  if (scheduling_.plans_least_cost() && sched::nothing_to_plan_for(load_->rates())) return;
  auto in = planning_input(cfg_, models_);
  if (cfg_.scheduler.cost_budget > 0 && !budget_) {
    budget_.emplace(cfg_.scheduler.cost_budget, cfg_.scheduler.budget_horizon_s);
    budget_price_ = sched::mean_price(in.slots);
  }
  std::erase_if(in.slots, [&](const sched::device_slot& s) { return !nodes_[node_id_.at(s.node)].seen; });
  if (budget_) in.budget = budget_->view(static_cast<double>(now) / 1e9);
  sched::set_measured_load(in, load_->rates(), cfg_.scheduler.headroom, surge, planned_ ? &planned_for_ : nullptr);
  planned_ = true;
  last_epoch_ = now;
  auto planned = sched::plan_for_load(in, previous_.get(), sched::nothing_to_plan_for(load_->rates()),
                                      sched::planning_rates(load_->rates(), surge));
  if (!planned) return;
  planned_for_ = std::move(planned->planned);
  if (budget_) {
    running_ = in.chosen;
    budget_->adopt(static_cast<double>(now) / 1e9, in.chosen ? *in.chosen : cfg_.pipelines);
  }
  previous_ = std::make_shared<sched::epoch_result>(std::move(planned->plan.result));
  ++plans_;
  peak_used_ = std::max(peak_used_, previous_->placement.devices.size());
  auto placement = epoch_placement(cfg_, in, *previous_, ++epoch_, &placed_);
  // As the controller: short of devices, the lower priorities a plan cut run in the higher ones'
  // idle time, and the frontend admits what the plan carries.
  std::vector<double> running;
  for (auto& r : load_->rates().pipelines) running.push_back(r.rate);
  cover_shortfall(cfg_, in, *previous_, planned->plan.scale, planned_for_.rate, running, placement);
  adopt(now, std::move(placement), immediately);
}

// fn(index, device, its schedule) for every device of `p` on a node that is up.
template <class Fn>
void engine::for_each_scheduled(const cluster_placement& p, Fn fn) {
  for (auto& [node, sched] : p.schedules) {
    auto n = node_id_.find(node);
    if (n == node_id_.end() || !nodes_[n->second].up) continue;
    for (auto& ds : sched.devices)
      if (auto di = device_at(node, ds.device); di != none) fn(di, devices_[di], ds);
  }
}

// A placement reaches the workers; each loads the models it lacks (emulated cold start) and the
// routes switch once all have (make before break).
void engine::adopt(ns now, cluster_placement p, bool immediately, std::vector<instance_assignment> cores) {
  ns ready = 0;
  for_each_scheduled(p, [&](uint32_t, device& d, const msg::device_schedule& ds) {
    for (auto& s : ds.sessions) {
      auto m = model_id_.find(s.model);
      if (m == model_id_.end()) continue;
      bool held = std::any_of(d.sessions.begin(), d.sessions.end(), [&](auto& x) { return x.model == m->second; });
      if (!held) ready = std::max(ready, to_ns(cfg_.models[m->second].load_ms));
    }
  });
  // Cores change in place at once (the controller's resize), apart from the schedule, which
  // waits for the models to load.
  for (auto& c : cores)
    if (auto di = device_at(c.node, c.device); di != none)
      devices_[di].threads = static_cast<int>(std::max(1u, c.cores));
  placed_ = p;
  pending_.push_back(std::move(p));
  auto which = static_cast<uint32_t>(pending_.size() - 1);
  if (immediately) return on_apply(now, which);
  post(now + delay(frontend_, none) + ready, kind::apply, which);
}

void engine::on_apply(ns now, uint32_t which) {
  auto p = std::move(pending_[which]);
  applied_.clear();
  if (cfg_.scaler.enabled())  // only the scaler reads it (tell_scaler); a large fleet has millions
    for (auto& [node, sched] : p.schedules)
      for (auto& ds : sched.devices)
        for (auto& ss : ds.sessions) applied_.insert({node, ds.device, ss.model});
  for_each_scheduled(p, [&](uint32_t di, device& d, const msg::device_schedule& ds) {
    std::vector<dev_session> next;
    for (auto& s : ds.sessions) {
      auto m = model_id_.find(s.model);
      if (m == model_id_.end()) continue;
      dev_session x;
      x.model = m->second;
      x.batch = static_cast<int>(std::max(1u, s.batch));
      x.collect = std::min(static_cast<int>(s.collect), x.batch);
      x.collect_ms = s.collect_ms;
      // A kept session keeps its queue.
      for (auto& old : d.sessions)
        if (old.model == x.model && !old.draining && !old.queue.empty())
          x.queue = std::move(old.queue), old.draining = true;
      next.push_back(std::move(x));
    }
    // What leaves drains what it holds.
    for (auto& old : d.sessions)
      if (!old.queue.empty()) old.draining = true, next.push_back(std::move(old));
    d.sessions = std::move(next);
    d.next = 0;
    if (!d.busy) start_next(now, di);
  });
  // The routing table: instances per model, carrying the outstanding counts of those kept.
  std::vector<route> routes(cfg_.models.size());
  std::vector<std::unordered_map<uint32_t, size_t>> pos(cfg_.models.size());
  for (auto& r : p.table.routes) {
    auto m = model_id_.find(r.model);
    if (m == model_id_.end()) continue;
    pos[m->second].reserve(pos[m->second].size() + r.instances.size());
    routes[m->second].devices.reserve(routes[m->second].devices.size() + r.instances.size());
    routes[m->second].loads.reserve(routes[m->second].loads.size() + r.instances.size());
    for (auto& inst : r.instances) {
      auto di = device_at(inst.node, inst.device);
      if (di == none) continue;
      sched::backend_load l;
      l.weight = inst.weight;
      l.spare = inst.spare;
      // The one simulated frontend sends a model one frontend dispatches for all whole batches.
      auto frontends = r.dispatcher.empty() ? p.table.frontends : 1u;
      l.spill_at = sched::spill_threshold(inst.spill_at, frontends);
      l.batch = sched::spill_threshold(inst.batch, frontends);
      l.padding = inst.dummy_rate;
      l.duration_s = inst.duration_ms / 1e3;
      l.live = nodes_[devices_[di].node].seen;
      if (auto old = route_pos_[m->second].find(di); old != route_pos_[m->second].end())
        l.outstanding = routes_[m->second].loads[old->second].outstanding;
      pos[m->second][di] = routes[m->second].devices.size();
      routes[m->second].devices.push_back(di);
      routes[m->second].loads.push_back(l);
    }
  }
  // The turn goes on where the table keeps the instances in turn as they were.
  for (size_t m = 0; m < routes.size() && m < routes_.size(); ++m)
    if (sched::kept_turn(routes[m].loads, routes_[m].loads,
                         [&](size_t i, size_t j) { return routes[m].devices[i] == routes_[m].devices[j]; }))
      routes[m].turn = routes_[m].turn, routes[m].deadline_told = routes_[m].deadline_told;
  for (auto& r : p.table.routes)
    if (auto m = model_id_.find(r.model); m != model_id_.end())
      routes[m->second].turn.frontends = r.dispatcher.empty() ? std::max<uint32_t>(1, p.table.frontends) : 1;
  routes_ = std::move(routes);
  route_pos_ = std::move(pos);
  // The frontend's quotas and the pipelines that share a device, from the table.
  std::vector<std::vector<std::string>> models(cfg_.pipelines.size());
  for (size_t pi = 0; pi < cfg_.pipelines.size(); ++pi)
    for (auto& s : cfg_.pipelines[pi].stages) {
      models[pi].push_back(s.model);
      for (auto& v : s.versions) models[pi].push_back(cfg_.models[v.model_index].name);
      if (s.cascade) models[pi].push_back(cfg_.models[s.cascade->second_index].name);
    }
  admission_.apply(p.table, models);
  // The table's padding: each padded instance's dummies, spaced evenly, under the tightest
  // budget of the stages that run its model.
  dummies_.clear();
  ++dummy_generation_;
  for (auto& r : p.table.routes) {
    auto m = model_id_.find(r.model);
    if (m == model_id_.end()) continue;
    double budget = tightest_budget_ms(p.table.budgets, r.model);
    routes_[m->second].budget = to_ns(budget);
    for (auto& inst : r.instances) {
      if (!(inst.dummy_rate > 0) || !(budget > 0)) continue;
      auto di = device_at(inst.node, inst.device);
      if (di == none) continue;
      dummies_.push_back({m->second, di, inst.dummy_rate, to_ns(budget)});
      post(now + to_ns(1000 / inst.dummy_rate), kind::dummy, static_cast<uint32_t>(dummies_.size() - 1),
           dummy_generation_);
    }
  }
  for (size_t pi = 0; pi < cfg_.pipelines.size(); ++pi) {
    // The stage runs the variant the table names (loaded by now: make before break).
    auto read = stages_of(cfg_, cfg_.pipelines[pi], p.table.budgets);
    for (size_t s = 0; s < read.models.size(); ++s) stage_model_[pi][s] = static_cast<uint32_t>(read.models[s]);
    if (read.split) splits_[pi] = std::move(read.split);
  }
  budgets_ = p.table.budgets;
  tell_scaler();
}

// The controller tells the scaler which workers are up and which instances it routes to.
void engine::tell_scaler() {
  if (!scaler_) return;
  worker_set w;
  for (auto& n : nodes_)
    if (n.up && n.seen && !n.devices.empty()) w.up.push_back(n.name);
  w.acknowledged.assign(applied_.begin(), applied_.end());
  scaler_->on_workers(w);
}

// The scaler's poll of the monitor: per session of every device, the rate since the last poll,
// the mean budget left on arrival and the queue.
void engine::on_scale(ns now) {
  cluster_load load;
  double dt = static_cast<double>(now - last_scale_) / 1e9;
  last_scale_ = now;
  for (auto& d : devices_) {
    if (!nodes_[d.node].up) continue;
    for (auto& s : d.sessions) {
      if (s.draining) continue;
      session_rate r;
      r.node = nodes_[d.node].name;
      r.device = d.index;
      r.model = cfg_.models[s.model].name;
      r.last_rate = r.rate = dt > 0 ? static_cast<double>(s.arrived) / dt : 0;
      r.budget_ms = s.arrived ? s.budget_sum / static_cast<double>(s.arrived) : 0;
      r.queue_length = static_cast<uint32_t>(s.queue.size());
      r.queue_budgets_ms = s.queue.budgets_ms(at(now), sched::budget_sample::capacity);
      r.arrival_budgets_ms = s.budgets.take();
      load.sessions.push_back(std::move(r));
      s.arrived = 0;
      s.budget_sum = 0;
    }
  }
  scaler_->decide(load, dt);
  if (now < end_send_) post(now + std::chrono::nanoseconds(scaler_->poll_period()).count(), kind::scale);
}

void engine::on_fail(ns now, uint32_t n) {
  nodes_[n].up = false;
  for (auto di : nodes_[n].devices) {
    auto& d = devices_[di];
    ++d.generation;
    d.busy = false;
    d.running.clear();
    d.sessions.clear();
  }
  post(now + cfg_.runtime.peer_timeout_ms * ns_per_ms, kind::detect, n);
}

// The frontend and the controller hear no more heartbeats: out of routing, its invocations sent
// elsewhere, and a plan for the survivors.
void engine::on_detect(ns now, uint32_t n) {
  if (nodes_[n].up) return;
  nodes_[n].seen = false;
  for (size_t m = 0; m < routes_.size(); ++m)
    for (size_t k = 0; k < routes_[m].devices.size(); ++k)
      if (devices_[routes_[m].devices[k]].node == n) routes_[m].loads[k].live = false;
  for (uint32_t inv = 0; inv < invocations_.size(); ++inv) {
    auto& f = invocations_[inv];
    if (!f.live || devices_[f.device].node != n) continue;
    if (f.dummy) {  // gone with its node
      f.live = false;
      free_invocations_.push_back(inv);
      continue;
    }
    if (auto it = route_pos_[f.model].find(f.device); it != route_pos_[f.model].end())
      routes_[f.model].loads[it->second].outstanding = 0;
    if (route_invocation(now, inv)) continue;
    f.live = false;
    free_invocations_.push_back(inv);
    --queries_[f.query].pending;
    finish(now, f.query, msg::status::error, "no live instance serves the model");
  }
  if (plans_epochs() && planned_) plan(now);
  tell_scaler();
}

void engine::on_back(ns now, uint32_t n) {
  nodes_[n].up = true;
  nodes_[n].seen = true;
  if (scaler_) return tell_scaler();
  if (!scheduling_.plans_epochs() || !planned_)
    adopt(now, static_placement(cfg_, ++epoch_), false);
  else
    plan(now);
}

}  // namespace sloserve::sim::detail
