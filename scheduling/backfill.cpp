#include "scheduling/backfill.hpp"

#include <algorithm>
#include <climits>
#include <cmath>
#include <limits>
#include <map>
#include <set>

#include "scheduling/query_analyzer.hpp"

namespace sloserve {

std::vector<backfill_device> backfill_devices(const sched::epoch_input& in, const sched::epoch_result& r,
                                              double headroom, const std::vector<double>* now) {
  std::vector<backfill_device> out;
  auto& pipes = *in.pipelines;
  // The share of pipeline pi's planned rate that runs now.
  auto running = [&](size_t pi) {
    if (!now) return 1 / (1 + std::max(0.0, headroom));
    if (pi >= now->size() || pi >= in.rates.size() || !(in.rates[pi] > 0)) return 1.0;
    return std::clamp((*now)[pi] / in.rates[pi], 0.0, 1.0);
  };
  for (size_t k = 0; k < r.placement.devices.size(); ++k) {
    int at = k < r.slot_of.size() ? r.slot_of[k] : -1;
    auto& d = r.placement.devices[k];
    if (at < 0 || static_cast<size_t>(at) >= r.slots.size() || d.sessions.empty()) continue;
    auto& slot = r.slots[static_cast<size_t>(at)];
    if (slot.share < 1) continue;
    backfill_device b{&slot, INT_MAX, 0, std::numeric_limits<double>::infinity()};
    double share = 0;
    for (auto& a : d.sessions) {
      if (a.session >= r.sessions.size()) continue;
      if (a.session < r.members.size())
        for (auto& [pi, stage] : r.members[a.session])
          if (pi < pipes.size())
            b.lowest_priority = std::min(b.lowest_priority, pipes[pi].priority), share = std::max(share, running(pi));
      auto& s = r.sessions[a.session];
      double l = s.model->profile_for(slot.type).latency_ms_at(a.batch);
      // A planned batch waits at most a duty cycle, then runs: what is left of its budget is
      // the longest a backfilled batch started just before it may take.
      b.slack_ms = std::min(b.slack_ms, s.slo_ms - d.duty_cycle_ms - l);
    }
    b.idle = 1 - std::min(1.0, d.occupancy) * share;
    if (b.lowest_priority == INT_MAX || !(b.idle > 0.05) || !(b.slack_ms > 0)) continue;
    out.push_back(b);
  }
  return out;
}

namespace {

// A spare instance of model `m` on the slot's device in `placed`, at `batch`, and its route.
void add_spare(const model_spec& m, const sched::device_slot& slot, uint32_t batch, cluster_placement& placed) {
  auto sched = placed.schedules.find(slot.node);
  if (sched == placed.schedules.end() || slot.device >= sched->second.devices.size()) return;
  auto& sessions = sched->second.devices[slot.device].sessions;
  if (std::none_of(sessions.begin(), sessions.end(), [&](auto& x) { return x.model == m.name; }))
    sessions.push_back({m.name, batch});
  auto route =
      std::find_if(placed.table.routes.begin(), placed.table.routes.end(), [&](auto& x) { return x.model == m.name; });
  if (route == placed.table.routes.end()) route = placed.table.routes.insert(route, {m.name, {}});
  msg::route_instance i{slot.node, slot.device, 1e-3};
  i.spare = true;
  i.batch = 0;
  route->instances.push_back(std::move(i));
}

// The largest batch of `m` on `slot` that runs within `ms`; 0 when none does.
int batch_within(const model_spec& m, const sched::device_slot& slot, double ms) {
  int best = 0;
  for (int b = 1; b <= m.batch_limit(); ++b)
    if (m.profile_for(slot.type).latency_ms_at(b) <= ms) best = b;
  return best;
}

}  // namespace

std::vector<double> backfill_cut_priorities(const cluster_config& cfg, const sched::epoch_input& in,
                                            const sched::epoch_result& r, const std::vector<double>& offered,
                                            cluster_placement& placed, const std::vector<double>* now) {
  auto& pipes = *in.pipelines;
  auto& models = in.models ? *in.models : cfg.models;
  std::vector<double> extra(pipes.size(), 0);
  // `in.rates` carry the headroom, `offered` does not.
  double h = 1 + std::max(0.0, cfg.scheduler.headroom);
  std::vector<size_t> cut;
  for (size_t pi = 0; pi < pipes.size() && pi < in.rates.size() && pi < offered.size(); ++pi)
    if (in.rates[pi] < 0.999 * h * offered[pi]) cut.push_back(pi);
  if (cut.empty()) return extra;
  std::stable_sort(cut.begin(), cut.end(), [&](size_t a, size_t b) { return pipes[a].priority > pipes[b].priority; });
  auto devices = backfill_devices(in, r, cfg.scheduler.headroom, now);
  std::vector<bool> taken(devices.size(), false);
  bool added = false;
  for (auto pi : cut) {
    auto& p = pipes[pi];
    auto fan = pi < in.fanouts.size() && in.fanouts[pi].size() == p.stages.size() ? in.fanouts[pi] : declared_fanout(p);
    auto per_query = stage_rates(p, 1.0, fan);  // invocations of each stage per query
    struct use {
      size_t device, stage;
      int batch;
    };
    std::vector<use> uses;
    std::vector<double> carried(p.stages.size(), 0);  // queries/s of the pipeline each stage's backfill takes
    for (size_t k = 0; k < devices.size(); ++k) {
      auto& dev = devices[k];
      if (taken[k] || dev.lowest_priority <= p.priority) continue;
      auto* node = cfg.find_node(dev.slot->node);
      // The stage that carries least so far, of those the device may run.
      std::optional<use> best;
      double best_rate = 0;
      for (size_t s = 0; s < p.stages.size(); ++s) {
        auto& m = models[p.stages[s].model_index];
        if (!node || !node->serves(static_cast<int>(dev.slot->device), m.name) || !dev.slot->serves(m.name)) continue;
        int b = batch_within(m, *dev.slot, dev.slack_ms);
        double q = s < per_query.size() && per_query[s] > 0 ? per_query[s] : 1;
        if (b == 0) continue;
        double rate = dev.idle * b * 1000 / m.profile_for(dev.slot->type).latency_ms_at(b) / q;
        if (!best || carried[s] < carried[best->stage]) best = use{k, s, b}, best_rate = rate;
      }
      if (!best) continue;
      taken[k] = true;
      carried[best->stage] += best_rate;
      uses.push_back(*best);
    }
    double gain = p.stages.empty() ? 0 : *std::min_element(carried.begin(), carried.end());
    gain = std::min(gain, h * offered[pi] - in.rates[pi]);
    if (!(gain > 0)) {
      for (auto& u : uses) taken[u.device] = false;
      continue;
    }
    extra[pi] = gain;
    for (auto& u : uses) {
      add_spare(models[p.stages[u.stage].model_index], *devices[u.device].slot, static_cast<uint32_t>(u.batch), placed);
      added = true;
    }
  }
  if (added) set_spill_points(cfg, placed, in.models);
  return extra;
}

bool spare_higher_priorities(const cluster_config& cfg, const sched::epoch_input& in, const sched::epoch_result& r,
                             cluster_placement& placed) {
  auto& pipes = *in.pipelines;
  auto& models = in.models ? *in.models : cfg.models;
  // The batch each model runs at where the plan placed it.
  std::map<std::string, uint32_t> batch;
  for (auto& [node, s] : placed.schedules)
    for (auto& d : s.devices)
      for (auto& x : d.sessions) batch[x.model] = std::max(batch[x.model], x.batch);
  bool added = false;
  for (size_t k = 0; k < r.placement.devices.size(); ++k) {
    int at = k < r.slot_of.size() ? r.slot_of[k] : -1;
    auto& d = r.placement.devices[k];
    if (at < 0 || static_cast<size_t>(at) >= r.slots.size() || d.sessions.empty()) continue;
    auto& slot = r.slots[static_cast<size_t>(at)];
    int highest = INT_MIN;
    std::set<const model_spec*> held;
    for (auto& a : d.sessions) {
      if (a.session >= r.sessions.size()) continue;
      held.insert(r.sessions[a.session].model);
      if (a.session < r.members.size())
        for (auto& [pi, stage] : r.members[a.session])
          if (pi < pipes.size()) highest = std::max(highest, pipes[pi].priority);
    }
    if (highest == INT_MIN) continue;
    double memory = 0;
    for (auto* m : held) memory += m ? m->memory_mb : 0;
    auto* node = cfg.find_node(slot.node);
    for (auto& p : pipes) {
      if (p.priority <= highest) continue;
      for (auto& st : p.stages) {
        auto& m = models[st.model_index];
        auto b = batch.find(m.name);
        if (b == batch.end() || held.count(&m) || !node || !node->serves(static_cast<int>(slot.device), m.name) ||
            !slot.serves(m.name))
          continue;
        if (slot.memory_mb > 0 && memory + m.memory_mb > slot.memory_mb) continue;
        add_spare(m, slot, b->second, placed);
        held.insert(&m);
        memory += m.memory_mb;
        added = true;
      }
    }
  }
  // A higher priority's instance planned for a small share of its model (a residual beside a
  // lower priority's sessions) takes that model's overflow, as a spare, instead of its share: the
  // pick rarely reaches it, so as planned it would leave the bursts queueing on the big ones.
  std::map<std::string, int> model_priority;
  for (auto& p : pipes)
    for (auto& st : p.stages) {
      auto [it, fresh] = model_priority.emplace(models[st.model_index].name, p.priority);
      if (!fresh) it->second = std::max(it->second, p.priority);
    }
  std::map<std::pair<std::string, uint32_t>, int> device_lowest;
  for (auto& [node, s] : placed.schedules)
    for (auto& d : s.devices)
      for (auto& x : d.sessions)
        if (auto it = model_priority.find(x.model); it != model_priority.end()) {
          auto [at, fresh] = device_lowest.emplace(std::make_pair(node, d.device), it->second);
          if (!fresh) at->second = std::min(at->second, it->second);
        }
  for (auto& route : placed.table.routes) {
    auto mp = model_priority.find(route.model);
    if (mp == model_priority.end()) continue;
    double total = 0, biggest = 0;
    for (auto& i : route.instances)
      if (!i.spare) total += i.weight, biggest = std::max(biggest, i.weight);
    if (!(biggest >= 0.5 * total)) continue;  // no instance the model mostly runs on
    for (auto& i : route.instances) {
      auto low = device_lowest.find({i.node, i.device});
      if (i.spare || !(i.weight < 0.1 * total) || low == device_lowest.end() || low->second >= mp->second) continue;
      i.spare = true;
      added = true;
    }
  }
  return added;
}

std::vector<double> cover_shortfall(const cluster_config& cfg, const sched::epoch_input& in,
                                    const sched::epoch_result& r, double scale, const std::vector<double>& planned,
                                    const std::vector<double>& running, cluster_placement& placed) {
  std::vector<double> backfilled;
  if (!(scale < 1)) return backfilled;
  auto& pipes = *in.pipelines;
  bool ranked = sched::priorities_differ(pipes);
  if (ranked) {
    backfilled = backfill_cut_priorities(cfg, in, r, planned, placed, &running);
    if (spare_higher_priorities(cfg, in, r, placed)) set_spill_points(cfg, placed, in.models);
  }
  if (!ranked && cfg.security.tenants.empty()) return backfilled;
  for (size_t pi = 0; pi < pipes.size() && pi < in.rates.size(); ++pi) {
    double carried = in.rates[pi] + (pi < backfilled.size() ? backfilled[pi] : 0);
    placed.table.quotas.push_back({pipes[pi].name, carried, pi < planned.size() ? planned[pi] : 0, pipes[pi].priority});
  }
  return backfilled;
}

}  // namespace sloserve
