#include "scheduling/policies/jellyfish/rounds.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "scheduling/policies/jellyfish/config.hpp"

namespace sloserve::sched::jellyfish {

std::vector<variant> zoo_of(const pipeline& p, const std::vector<model_spec>& models) {
  std::vector<variant> zoo;
  for (auto m : p.stages.front().variant_indices) {
    auto& spec = models[m];
    auto& shape = spec.input.shape;
    variant v;
    v.model = spec.name;
    v.height = shape.size() >= 2 ? shape[shape.size() - 2] : 1;
    v.width = shape.empty() ? 1 : shape.back();
    v.accuracy = spec.accuracy.value_or(100);
    v.max_batch = spec.batch_limit();
    v.latency_ms = [profile = spec.profile](int b) { return profile.latency_ms_at(b); };
    zoo.push_back(std::move(v));
  }
  return clean_zoo(std::move(zoo));
}

namespace {

// Slots per pipeline: one each while they last (to those `given` none yet), the rest by the frame
// rates of their clients (largest remainders), pipelines without clients sharing the rest evenly.
std::vector<size_t> apportion(const std::vector<double>& rate, size_t slots,
                              const std::vector<size_t>* given = nullptr) {
  size_t n = rate.size();
  std::vector<size_t> out(n, 0);
  for (size_t p = 0; p < n && slots > 0; ++p)
    if (!given || (*given)[p] == 0) out[p] = 1, --slots;
  double total = std::accumulate(rate.begin(), rate.end(), 0.0);
  std::vector<double> share(n, total > 0 ? 0 : 1.0 / static_cast<double>(std::max<size_t>(n, 1)));
  if (total > 0)
    for (size_t p = 0; p < n; ++p) share[p] = rate[p] / total;
  size_t left = slots;
  std::vector<std::pair<double, size_t>> remainders;
  for (size_t p = 0; p < n; ++p) {
    double exact = share[p] * static_cast<double>(slots);
    auto whole = static_cast<size_t>(std::floor(exact));
    out[p] += whole;
    left -= whole;
    remainders.emplace_back(exact - static_cast<double>(whole), p);
  }
  std::sort(remainders.begin(), remainders.end(), [](auto& a, auto& b) { return a.first > b.first; });
  for (size_t i = 0; i < left && i < remainders.size(); ++i) ++out[remainders[i].second];
  return out;
}

// Slots per pipeline where pipelines differ in priority: from the highest priority down, each
// pipeline is first given the slots `need` says its load takes (while they last), and what is
// left is apportioned by rate as above among all of them, so that a lower priority's clients,
// however many, take no slot a higher one needs.
std::vector<size_t> apportion_by_priority(const std::vector<double>& rate, const std::vector<int>& priority,
                                          const std::vector<size_t>& need, size_t slots) {
  size_t n = rate.size();
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return priority[a] > priority[b]; });
  std::vector<size_t> out(n, 0);
  int lowest = n ? *std::min_element(priority.begin(), priority.end()) : 0;
  for (auto p : order) {
    if (priority[p] == lowest) break;
    size_t give = std::min(need[p], slots);
    out[p] = give, slots -= give;
  }
  auto rest = apportion(rate, slots, &out);
  for (size_t p = 0; p < n; ++p) out[p] += rest[p];
  return out;
}

}  // namespace

std::chrono::microseconds rounds::interval() const {
  return std::chrono::microseconds(static_cast<int64_t>(cfg_.scheduler.section_as<options>().interval_ms * 1e3));
}

std::string rounds::news() {
  if (stats_.switches == told_switches_) return {};
  auto switched = stats_.switches - std::exchange(told_switches_, stats_.switches);
  return fmt::format("jellyfish: {} clients, {:.0f}% mapped within their budgets, accuracy {:.1f}%; {} devices switch",
                     stats_.clients, 100 * stats_.mapped, 100 * stats_.accuracy, switched);
}

namespace {

// Each pipeline's clients, and its frame rate (each client one a second at least).
struct grouped {
  std::vector<std::vector<const msg::client_load*>> clients;
  std::vector<double> rate;
};
grouped group_clients(const cluster_config& cfg, const std::vector<msg::client_load>& clients) {
  grouped g{std::vector<std::vector<const msg::client_load*>>(cfg.pipelines.size()),
            std::vector<double>(cfg.pipelines.size(), 0)};
  for (auto& c : clients)
    if (auto* p = cfg.find_pipeline(c.pipeline)) {
      auto pi = static_cast<size_t>(p - cfg.pipelines.data());
      g.clients[pi].push_back(&c);
      g.rate[pi] += std::max(1.0, c.rate_hz);
    }
  return g;
}

std::vector<client_state> client_states(const std::vector<const msg::client_load*>& clients) {
  std::vector<client_state> cs;
  for (auto* c : clients) {
    cs.push_back({c->client,
                  c->slo_ms,
                  c->rate_hz,
                  c->uplink_mbps,
                  c->rtt_ms,
                  c->bytes_per_pixel,
                  c->image_pixels,
                  {},
                  c->uplink_low_mbps,
                  c->wait_share,
                  c->headroom_share});
    for (auto& i : c->images) cs.back().image_bytes.emplace_back(i.pixels, i.bytes);
  }
  return cs;
}

// What a device running zoo[z] keeps resident, in this order while memory and `resident` allow:
// the selected variant, its neighbours in size (prefetched: the next re-schedule most likely
// moves there), the variants it ran most recently (`mru`), then farther neighbours.
std::vector<std::string> resident_order(const std::vector<variant>& zoo, size_t z,
                                        const std::vector<std::string>& mru) {
  std::vector<std::string> order{zoo[z].model};
  auto neighbours = [&](size_t from, size_t to) {
    for (size_t step = from; step <= to; ++step) {
      if (z + step < zoo.size()) order.push_back(zoo[z + step].model);
      if (z >= step) order.push_back(zoo[z - step].model);
    }
  };
  neighbours(1, 1);
  order.insert(order.end(), mru.begin(), mru.end());
  neighbours(2, zoo.size());
  return order;
}

// Pipeline `p`'s routes (each variant to the devices selecting it, weighted by what they carry),
// its budget (requests of clients without a route run on the fastest variant running) and its
// clients' mappings, into `t`.
void route_pipeline(const pipeline& p, const std::vector<variant>& zoo, const plan& planned,
                    const std::vector<size_t>& mine, const std::vector<device_slot>& slots,
                    const std::vector<client_state>& cs, msg::routing_table& t) {
  size_t fastest = zoo.size();
  for (auto v : planned.variants) fastest = std::min(fastest, v);
  for (auto& v : zoo) {
    msg::model_route r{v.model, {}};
    for (size_t w = 0; w < mine.size(); ++w)
      if (zoo[planned.variants[w]].model == v.model) {
        int b = planned.batch[w];
        r.instances.push_back({slots[mine[w]].node, slots[mine[w]].device, b / v.latency_ms(b) * 1e3});
      }
    t.routes.push_back(std::move(r));
  }
  auto anonymous = fastest < zoo.size() ? zoo[fastest].model : p.stages.front().model;
  t.budgets.push_back({p.name, p.stages.front().name, p.slo_ms, anonymous});
  for (size_t c = 0; c < cs.size() && !mine.empty(); ++c) {
    auto& a = planned.clients[c];
    auto& slot = slots[mine[a.worker]];
    auto& v = zoo[a.variant];
    t.clients.push_back({cs[c].id, p.name, v.model, slot.node, slot.device, a.budget_ms,
                         static_cast<uint32_t>(v.height), static_cast<uint32_t>(v.width)});
  }
}

}  // namespace

std::vector<std::vector<size_t>> rounds::assign(const std::vector<double>& rate, const std::vector<device_slot>& slots,
                                                const std::vector<model_spec>& models, std::vector<bool>& taken) const {
  size_t np = cfg_.pipelines.size();
  std::vector<int> priority;
  std::vector<size_t> need;
  for (size_t pi = 0; pi < np; ++pi) {
    auto& p = cfg_.pipelines[pi];
    priority.push_back(p.priority);
    // The slots its clients' frames take on its fastest variant, at the largest batch that
    // runs within half its SLO, each slot kept a fifth idle for the frames' bursts (at least one).
    double most = 0;
    for (auto& v : zoo_of(p, models))
      for (int b = 1; b <= v.max_batch; ++b)
        if (double l = v.latency_ms(b); l > 0 && l <= p.slo_ms / 2) most = std::max(most, b / l * 1e3);
    double frames = pi < rate.size() ? rate[pi] : 0;
    need.push_back(most > 0 ? static_cast<size_t>(std::max(1.0, std::ceil(frames / (0.8 * most)))) : 1);
  }
  bool ranked = std::any_of(priority.begin(), priority.end(), [&](int x) { return x != priority.front(); });
  auto count = ranked ? apportion_by_priority(rate, priority, need, slots.size()) : apportion(rate, slots.size());
  std::vector<std::vector<size_t>> mine(np);
  auto pipeline_of = [&](const std::string& model) -> size_t {
    for (size_t pi = 0; pi < np; ++pi)
      for (auto m : cfg_.pipelines[pi].stages.front().variant_indices)
        if (models[m].name == model) return pi;
    return np;
  };
  for (size_t s = 0; s < slots.size(); ++s)
    if (auto it = running_.find({slots[s].node, slots[s].device}); it != running_.end()) {
      auto pi = pipeline_of(it->second);
      if (pi < np && mine[pi].size() < count[pi]) mine[pi].push_back(s), taken[s] = true;
    }
  for (size_t pi = 0, s = 0; pi < np; ++pi)
    for (; mine[pi].size() < count[pi] && s < slots.size(); ++s)
      if (!taken[s]) mine[pi].push_back(s), taken[s] = true;
  return mine;
}

void rounds::run_on(const slot_key& k, const device_slot& slot, const std::vector<variant>& zoo, size_t z, int batch,
                    double rate, const std::vector<model_spec>& models, msg::device_schedule& d) {
  auto& v = zoo[z];
  auto& mru = resident_[k];
  auto same = running_.find(k);
  if (same != running_.end() && same->second != v.model) {
    ++stats_.switches;
    if (std::find(mru.begin(), mru.end(), v.model) != mru.end()) ++stats_.resident_hits;
  }
  // A batch that moved little keeps the schedule as it is (workers are not re-sent one every
  // interval for estimates that jitter) where the batch kept still holds the plan: no larger than
  // the one its clients' budgets allow, and carrying their rate (a worker kept at batch 1 while
  // a second client joins it would queue without end).
  if (auto kept = batch_.find(k); same != running_.end() && same->second == v.model && kept != batch_.end()) {
    int b = kept->second;
    if (b <= batch && batch - b <= std::max(1, b / 4) && b / v.latency_ms(b) * 1e3 >= rate) batch = b;
  }
  batch_[k] = batch;
  running_[k] = v.model;
  double memory = 0;
  std::vector<std::string> kept;
  for (auto& name : resident_order(zoo, z, mru)) {
    if (std::find(kept.begin(), kept.end(), name) != kept.end()) continue;
    if (kept.size() >= static_cast<size_t>(cfg_.scheduler.section_as<options>().resident)) break;
    auto m = std::find_if(models.begin(), models.end(), [&](auto& x) { return x.name == name; });
    double mb = m != models.end() ? m->memory_mb : 0;
    if (slot.memory_mb > 0 && memory + mb > slot.memory_mb) continue;
    memory += mb;
    kept.push_back(name);
    d.sessions.push_back({name, name == v.model ? static_cast<uint32_t>(batch) : 1u});
  }
  if (kept.empty()) {  // the selected variant alone exceeds the slot's memory: it runs anyway
    kept.push_back(v.model);
    d.sessions.push_back({v.model, static_cast<uint32_t>(batch)});
  }
  mru = std::move(kept);
}

cluster_placement rounds::decide(const std::vector<msg::client_load>& clients, const std::vector<device_slot>& slots,
                                 const std::vector<model_spec>& models, uint64_t epoch) {
  stats_.clients = clients.size();
  ++stats_.reschedules;
  auto& o = cfg_.scheduler.section_as<options>();
  auto of = group_clients(cfg_, clients);
  std::vector<bool> taken(slots.size(), false);
  auto mine = assign(of.rate, slots, models, taken);
  cluster_placement out;
  for (auto& slot : device_slots(cfg_)) {
    auto& sched = out.schedules[slot.node];
    sched.epoch = epoch;
    sched.devices.push_back({slot.device, 0, {}});
  }
  auto device_of = [&](const slot_key& k) -> msg::device_schedule& {
    for (auto& d : out.schedules[k.first].devices)
      if (d.device == k.second) return d;
    return out.schedules[k.first].devices.emplace_back(msg::device_schedule{k.second, 0, {}});
  };
  plan_options po{o.overhead_ms, o.bytes_per_pixel, o.compute_share, {},
                  o.use_spare,   o.client_side,     o.lift_margin,   o.headroom};
  po.annealing.seed = stats_.reschedules;
  double mapped = 0, accuracy = 0, weight = 0;
  for (size_t pi = 0; pi < cfg_.pipelines.size(); ++pi) {
    auto& p = cfg_.pipelines[pi];
    auto zoo = zoo_of(p, models);
    auto cs = client_states(of.clients[pi]);
    // Where each slot starts: what it ran, else the smallest variant (Jellyfish's bootstrap set).
    std::vector<size_t> previous;
    for (auto s : mine[pi]) {
      auto it = running_.find({slots[s].node, slots[s].device});
      size_t z = 0;
      for (size_t i = 0; it != running_.end() && i < zoo.size(); ++i)
        if (zoo[i].model == it->second) z = i;
      previous.push_back(z);
    }
    // The headroom the pipeline's misses keep (the most any of its frontends reports).
    auto pp = po;
    if (!cs.empty()) {
      double share = 0;
      for (auto& c : cs) share = std::max(share, std::clamp(c.headroom_share, 0.0, 1.0));
      pp.headroom = o.headroom * share;
    }
    auto planned = plan_jellyfish(zoo, cs, mine[pi].size(), previous, pp);
    if (!cs.empty()) {
      mapped += planned.quality.mapped * static_cast<double>(cs.size());
      accuracy += planned.quality.accuracy * static_cast<double>(cs.size());
      weight += static_cast<double>(cs.size());
    }
    for (size_t w = 0; w < mine[pi].size(); ++w) {
      auto& slot = slots[mine[pi][w]];
      slot_key k{slot.node, slot.device};
      // The rate of the clients it carries (mapped or taken best effort), with the headroom the
      // plan left on it.
      double rate = 0;
      for (size_t c = 0; c < cs.size(); ++c)
        if (planned.clients[c].worker == w) rate += cs[c].rate_hz;
      run_on(k, slot, zoo, planned.variants[w], planned.batch[w], rate / (1 - pp.headroom), models, device_of(k));
    }
    route_pipeline(p, zoo, planned, mine[pi], slots, cs, out.table);
  }
  // Slots no pipeline was given (more slots than pipelines want, or a pipeline of no zoo) forget.
  for (size_t s = 0; s < slots.size(); ++s)
    if (!taken[s]) running_.erase({slots[s].node, slots[s].device}), batch_.erase({slots[s].node, slots[s].device});
  stats_.mapped = weight > 0 ? mapped / weight : 1;
  stats_.accuracy = weight > 0 ? accuracy / weight : 0;
  return out;
}

}  // namespace sloserve::sched::jellyfish
