#include "scheduling/placement.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string_view>
#include <unordered_map>

#include "scheduling/policies/registry.hpp"
#include "scheduling/query_analyzer.hpp"
#include "scheduling/spill_points.hpp"

namespace sloserve {

namespace {

// Per worker node: each of its devices listed, running nothing yet.
std::map<std::string, msg::schedule> idle_schedules(const cluster_config& cfg, uint64_t epoch) {
  std::map<std::string, msg::schedule> out;
  for (auto& n : cfg.nodes) {
    if (!n.has_role(role::worker)) continue;
    auto& s = out[n.name];
    s.epoch = epoch;
    for (int d = 0; d < n.device_count(); ++d) s.devices.push_back({static_cast<uint32_t>(d), 0, {}});
  }
  return out;
}

// One frontend per model that takes whole batches dispatches it for all, where there are several:
// the models spread over the file's frontends by a hash of the name, so that every table (and
// every controller) names the same one.
void assign_dispatchers(const cluster_config& cfg, msg::routing_table& t) {
  auto frontends = cfg.with_role(role::frontend);
  if (frontends.size() < 2) return;
  for (auto& r : t.routes) {
    if (std::none_of(r.instances.begin(), r.instances.end(), [](auto& i) { return i.batch > 0; })) continue;
    r.dispatcher = frontends[fingerprint(r.model) % frontends.size()]->name;
  }
}

}  // namespace

std::vector<sched::device_slot> device_slots(const cluster_config& cfg) {
  std::vector<sched::device_slot> out;
  for (auto& n : cfg.nodes) {
    if (!n.has_role(role::worker)) continue;
    uint32_t d = 0;
    for (auto& g : n.devices)
      for (int i = 0; i < g.instances(); ++i)
        out.push_back({n.name, d++, g.models, g.memory_mb, cfg.price_of(g) * g.share_of(i), g.type, g.share_of(i)});
  }
  return out;
}

sched::epoch_input planning_input(const cluster_config& cfg, const std::vector<model_spec>& models) {
  sched::epoch_input in;
  in.models = &models;
  in.pipelines = &cfg.pipelines;
  in.slots = device_slots(cfg);
  in.policy = &sched::policy_of(cfg.scheduler);
  in.split = cfg.scheduler.split;
  in.steps = cfg.scheduler.steps;
  in.fragment_models = &cfg.fragments;
  in.options = cfg.scheduler.section;
  return in;
}

msg::routing_table routing_from(const cluster_config& cfg, const sched::epoch_input& in, const sched::epoch_result& r,
                                uint64_t epoch) {
  msg::routing_table t;
  t.epoch = epoch;
  std::map<std::string, msg::model_route> routes;
  for (auto& m : cfg.models) routes[m.name].model = m.name;
  std::map<instance_key, uint32_t> planned_batch;
  std::map<instance_key, double> planned_ms;  // l(b) at the planned batch: the device's duty cycle
  for (size_t k = 0; k < r.placement.devices.size(); ++k) {
    if (r.slot_of[k] < 0) continue;
    auto& slot = in.slots[static_cast<size_t>(r.slot_of[k])];
    std::map<std::string, double> rate;     // a device may run one model under two SLOs
    std::map<std::string, uint32_t> batch;  // the planned batch: more outstanding spills to spares
    for (auto& a : r.placement.devices[k].sessions) {
      // A merged prefix family shares its rate among its variants as their traffic does.
      auto& mo = r.models_of[a.session];
      double total = 0;
      for (auto& [m, w] : mo) total += w;
      for (auto& [m, w] : mo) {
        rate[m->name] += total > 0 ? a.rate * w / total : a.rate / mo.size();
        batch[m->name] = std::max(batch[m->name], static_cast<uint32_t>(std::max(1, a.batch)));
      }
    }
    // Piccolo's padding goes with the machine's one model.
    auto& pd = r.placement.devices[k];
    auto* padded = pd.dummy_rate > 0 ? r.models_of[pd.sessions.front().session].front().first : nullptr;
    for (auto& [model, w] : rate) {
      auto& route = routes[model];
      route.model = model;  // a fragment of a partitioned model is not among the file's models
      route.instances.push_back(
          {slot.node, slot.device, std::max(w, 1e-3), padded && padded->name == model ? pd.dummy_rate : 0});
      planned_batch[{slot.node, slot.device, model}] = batch[model];
      planned_ms[{slot.node, slot.device, model}] = pd.duty_cycle_ms;
    }
  }
  t.frontends = static_cast<uint32_t>(std::max<size_t>(1, cfg.with_role(role::frontend).size()));
  for (auto& [name, route] : routes) t.routes.push_back(std::move(route));
  // Each stage runs the model (variant) the epoch planned it with; each fragment its ranges.
  auto& planned = in.pipelines ? *in.pipelines : cfg.pipelines;
  for (auto& f : r.fragment_routes)
    t.fragments.push_back(
        {planned[f.pipeline].name, static_cast<uint32_t>(f.start), f.slo_ms, f.models, f.budget_ms, f.rate});
  auto& models = in.models ? *in.models : cfg.models;
  for (size_t pi = 0; pi < planned.size(); ++pi) {
    auto& p = planned[pi];
    for (size_t s = 0; s < p.stages.size(); ++s)
      t.budgets.push_back({p.name, p.stages[s].name, r.splits[pi].budget_ms[s], models[p.stages[s].model_index].name});
  }
  // Each planned instance spills past the batch it was planned at, against its model's budget,
  // at the planner's latencies (a refreshed profile's).
  spill_points spill(cfg, t, in.models);
  bool whole = in.policy && in.policy->whole_batches(in.options);
  for (auto& route : t.routes)
    for (auto& inst : route.instances)
      if (auto b = planned_batch.find({inst.node, inst.device, route.model}); b != planned_batch.end()) {
        inst.spill_at = spill.of(route.model, inst, b->second);
        if (whole) inst.batch = b->second, inst.duration_ms = planned_ms[b->first];
      }
  if (in.policy && in.policy->central_dispatch(in.options)) assign_dispatchers(cfg, t);
  return t;
}

std::map<std::string, msg::schedule> schedules_from(const cluster_config& cfg, const sched::epoch_input& in,
                                                    const sched::epoch_result& r, uint64_t epoch) {
  auto out = idle_schedules(cfg, epoch);
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
        if (it == dev.sessions.end())
          it = dev.sessions.insert(dev.sessions.end(), msg::session_schedule{name, cap});
        else
          it->batch = std::max(it->batch, cap);
        // Whole batches in turn: the device waits for the planned batch.
        if (in.policy && in.policy->whole_batches(in.options)) {
          it->collect = std::max(it->collect, static_cast<uint32_t>(std::max(1, a.batch)));
          it->collect_ms = std::max(it->collect_ms, pd.collect_ms);
        }
      }
    }
  }
  return out;
}

std::vector<const model_spec*> served_models(const cluster_config& cfg) {
  std::vector<const model_spec*> out;
  for (auto& m : cfg.models) out.push_back(&m);
  for (auto& f : cfg.fragments)
    if (f.layer_to == static_cast<int>(cfg.find_model(f.fragment_of)->layers.size())) out.push_back(&f);
  return out;
}

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
  // Every model's session once; a device that serves them all takes the whole list.
  std::vector<msg::session_schedule> every;
  for (auto* m : served_models(cfg)) {
    auto it = budget.find(m->is_fragment() ? m->fragment_of : m->name);
    int b = it == budget.end() ? 0 : saturating_batch(*m, it->second);
    every.push_back({m->name, static_cast<uint32_t>(b > 0 ? b : m->batch_limit())});
  }
  msg::schedule s;
  s.epoch = epoch;
  s.devices.reserve(static_cast<size_t>(std::max(0, node.device_count())));
  for (int d = 0; d < node.device_count(); ++d) {
    auto& ds = s.devices.emplace_back();
    ds.device = static_cast<uint32_t>(d);
    if (node.device_models(d).empty()) {
      ds.sessions = every;
      continue;
    }
    for (auto& session : every)
      if (node.serves(d, session.model)) ds.sessions.push_back(session);
  }
  return s;
}

cluster_placement static_placement(const cluster_config& cfg, uint64_t epoch) {
  cluster_placement out;
  out.table.epoch = epoch;
  for (auto& n : cfg.nodes)
    if (n.has_role(role::worker)) out.schedules[n.name] = static_schedule(cfg, n, epoch);
  for (auto* m : served_models(cfg)) {
    msg::model_route r{m->name, {}};
    for (auto& n : cfg.nodes)
      for (int d = 0; n.has_role(role::worker) && d < n.device_count(); ++d)
        if (n.serves(d, m->name)) r.instances.push_back({n.name, static_cast<uint32_t>(d), 1.0});
    out.table.routes.push_back(std::move(r));
  }
  for (auto& p : cfg.pipelines) {
    auto split = even_split(p);
    for (size_t i = 0; i < p.stages.size(); ++i)
      out.table.budgets.push_back({p.name, p.stages[i].name, split.budget_ms[i], p.stages[i].model});
  }
  set_spill_points(cfg, out);
  return out;
}

namespace {

// Gives every model a pipeline uses that has no instance a backup session (see epoch_placement).
// `pipelines`: as planned (each stage on the variant the epoch chose).
void add_backups(const cluster_config& cfg, const std::vector<pipeline>& pipelines,
                 const std::vector<sched::device_slot>& slots, cluster_placement& pl) {
  std::set<std::string> routed;
  for (auto& r : pl.table.routes)
    if (!r.instances.empty()) routed.insert(r.model);
  for (auto& p : pipelines)
    for (auto& stage : p.stages) {
      std::vector<std::string> names{stage.model};  // and a cascade's second model
      if (stage.cascade) names.push_back(cfg.models[stage.cascade->second_index].name);
      // A partitioned model's rest from every layer: queries from where no plan starts yet.
      if (auto* base = cfg.find_model(stage.model); base && base->partitioned())
        for (int p = 1; p < static_cast<int>(base->layers.size()); ++p)
          names.push_back(fragment_name(*base, p, static_cast<int>(base->layers.size())));
      for (auto& name : names) {
        if (routed.count(name)) continue;
        const sched::device_slot* best = nullptr;
        size_t best_load = SIZE_MAX;
        for (auto& slot : slots) {
          if (!cfg.find_node(slot.node)->serves(static_cast<int>(slot.device), name)) continue;
          size_t load = pl.schedules[slot.node].devices[slot.device].sessions.size();
          if (load < best_load) best = &slot, best_load = load;
        }
        if (!best) continue;
        auto* m = cfg.find_model(name);
        pl.schedules[best->node].devices[best->device].sessions.push_back(
            {m->name, static_cast<uint32_t>(m->batch_limit())});
        bool listed = false;
        for (auto& r : pl.table.routes)
          if (r.model == name) r.instances.push_back({best->node, best->device, 1.0}), listed = true;
        if (!listed) pl.table.routes.push_back({name, {{best->node, best->device, 1.0}}});
        routed.insert(name);
      }
    }
}

// Devices of `slots` that `pl` leaves without sessions keep those they ran in `previous`, routed
// as spares.
void keep_spares(const cluster_config& cfg, const std::vector<sched::device_slot>& slots,
                 const cluster_placement& previous, cluster_placement& pl) {
  std::map<std::string, size_t> route_of;
  for (size_t k = 0; k < pl.table.routes.size(); ++k) route_of[pl.table.routes[k].model] = k;
  // A spare batches for the tightest budget its model has now (it ran for the budgets before),
  // round-robin among what it holds.
  auto budget = tightest_budgets(pl.table);
  for (auto& slot : slots) {
    auto now = pl.schedules.find(slot.node);
    auto was = previous.schedules.find(slot.node);
    if (now == pl.schedules.end() || was == previous.schedules.end()) continue;
    if (slot.device >= now->second.devices.size() || slot.device >= was->second.devices.size()) continue;
    auto& dev = now->second.devices[slot.device];
    if (!dev.sessions.empty()) continue;
    auto* node = cfg.find_node(slot.node);
    for (auto& ss : was->second.devices[slot.device].sessions) {
      if (!node || !node->serves(static_cast<int>(slot.device), ss.model)) continue;
      auto& kept = dev.sessions.emplace_back(ss);
      auto* m = cfg.find_model(ss.model);
      if (auto b = budget.find(ss.model); m && b != budget.end())
        kept.batch = static_cast<uint32_t>(std::max(1, saturating_batch(*m, b->second)));
      auto [at, fresh] = route_of.emplace(ss.model, pl.table.routes.size());
      if (fresh) pl.table.routes.push_back({ss.model, {}});
      msg::route_instance i{slot.node, slot.device, 1e-3};
      i.spare = true;
      pl.table.routes[at->second].instances.push_back(std::move(i));
    }
    dev.duty_cycle_ms = 0;
  }
}

}  // namespace

cluster_placement epoch_placement(const cluster_config& cfg, const sched::epoch_input& in, const sched::epoch_result& r,
                                  uint64_t epoch, const cluster_placement* previous) {
  cluster_placement out{schedules_from(cfg, in, r, epoch), routing_from(cfg, in, r, epoch)};
  add_backups(cfg, in.pipelines ? *in.pipelines : cfg.pipelines, in.slots, out);
  if (previous && cfg.scheduler.spares) keep_spares(cfg, in.slots, *previous, out);
  set_spill_points(cfg, out, in.models);
  return out;
}

sched::epoch_rule epoch_rule_of(const cluster_config& cfg) {
  auto& so = cfg.scheduler;
  return {so.epoch_s,
          so.min_epoch_s,
          so.rate_band_low,
          so.rate_band_high,
          sched::settle_windows(cfg.runtime.beacon_ms),
          cfg.runtime.beacon_ms / 1000.0};
}

sched::pipeline_load pipeline_load_of(const cluster_config& cfg) {
  std::vector<size_t> stages;
  for (auto& p : cfg.pipelines) stages.push_back(p.stages.size());
  return sched::pipeline_load(stages, sched::settle_windows(cfg.runtime.beacon_ms), cfg.scheduler.peak_half_life_s);
}

cluster_placement deployment_placement(const cluster_config& cfg, const deployment& d, uint64_t epoch,
                                       const std::vector<msg::stage_budget>& budgets, const cluster_placement* previous,
                                       const std::vector<model_spec>* models) {
  cluster_placement out{idle_schedules(cfg, epoch), {}};
  std::map<std::string, msg::model_route> routes;
  for (auto& m : cfg.models) routes[m.name].model = m.name;
  std::map<std::string, int> count;  // instances per model
  for (auto& i : d.instances) ++count[i.model];
  for (auto& i : d.instances) {
    auto it = out.schedules.find(i.node);
    if (it == out.schedules.end() || i.device >= it->second.devices.size()) continue;
    auto& session = it->second.devices[i.device].sessions.emplace_back(msg::session_schedule{i.model, i.batch});
    auto* m = cfg.find_model(i.model);
    auto b = static_cast<int>(i.batch), c = static_cast<int>(i.cores);
    double w = m && m->cores ? m->cores->throughput(b, c) : 1.0;
    auto& inst = routes[i.model].instances.emplace_back(msg::route_instance{i.node, i.device, w});
    // Whole batches in turn: the frontends send the batch, the device waits for it (as FA2's
    // central queue forms it). Weighed by the stage's rate (b / fill) shared alike: equal turns,
    // as FA2's round-robin.
    if (auto t = d.in_turn.find(i.model); t != d.in_turn.end() && m && t->second.fill_ms > 0) {
      auto whole = static_cast<int>(t->second.batch);
      inst.weight = whole * 1000.0 / t->second.fill_ms / count[i.model];
      inst.batch = t->second.batch;
      inst.duration_ms = m->cores ? m->cores->at(whole, c) : m->profile.latency_ms_at(whole);
      session.batch = std::max(session.batch, t->second.batch);
      session.collect = t->second.batch;
      session.collect_ms = 0;  // a central queue's batch waits until full, or its most urgent can wait no longer
    }
  }
  out.table.epoch = epoch;
  for (auto& [m, r] : routes) out.table.routes.push_back(std::move(r));
  out.table.budgets = d.budgets.empty() ? budgets : d.budgets;
  if (previous && cfg.scheduler.spares) keep_spares(cfg, device_slots(cfg), *previous, out);
  set_spill_points(cfg, out, models);
  return out;
}

const model_spec* unprofiled_model(const cluster_config& cfg, const std::vector<model_spec>& models) {
  for (auto& p : cfg.pipelines)
    for (auto& stage : p.stages)
      for (auto m : stage_models(stage))
        if (models[m].needs_profile) return &models[m];
  return nullptr;
}

bool adopt_measured_profile(std::vector<model_spec>& models, const msg::measured_profile& mp) {
  auto it = std::find_if(models.begin(), models.end(), [&](auto& m) { return m.name == mp.model; });
  if (it == models.end() || !it->needs_profile || mp.batch.empty() || mp.batch.size() != mp.latency_ms.size())
    return false;
  it->profile = {{mp.batch.begin(), mp.batch.end()}, mp.latency_ms, 0, 0, mp.step};
  it->needs_profile = false;
  return true;
}

}  // namespace sloserve
