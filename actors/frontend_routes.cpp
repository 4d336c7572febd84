#include "actors/frontend_routes.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "scheduling/placement.hpp"

namespace sloserve {

frontend_routes::frontend_routes(const cluster_config& cfg, std::unique_ptr<sched::balancer> balancer)
    : cfg_(&cfg), balancer_(std::move(balancer)), splits_(cfg.pipelines.size()), blockers_(cfg.pipelines.size()) {
  for (auto& p : cfg.pipelines) {
    stage_models_.emplace_back();
    for (auto& st : p.stages) stage_models_.back().push_back(st.model);
  }
  admission_.configure(cfg, 1);
  refresh();
}

void frontend_routes::on_outcome(size_t pi, bool within_slo, bool served, double now_s) {
  admission_.on_outcome(pi, within_slo, served, now_s);
}

sched::backend_load* frontend_routes::load_of(const std::string& model, const std::string& node, uint32_t device) {
  auto it = routes_.find(model);
  if (it == routes_.end()) return nullptr;
  for (size_t i = 0; i < it->second.backends.size(); ++i)
    if (it->second.backends[i].node == node && it->second.backends[i].device == device) return &it->second.loads[i];
  return nullptr;
}

void frontend_routes::rebind(const cluster_config& cfg, const std::vector<std::optional<size_t>>& from) {
  std::vector<std::optional<slo_split>> splits(cfg.pipelines.size());
  std::vector<std::vector<std::string>> models;
  for (size_t i = 0; i < cfg.pipelines.size(); ++i) {
    models.emplace_back();
    for (auto& st : cfg.pipelines[i].stages) models.back().push_back(st.model);
    if (i < from.size() && from[i] && stage_models_[*from[i]].size() == models.back().size()) {
      splits[i] = splits_[*from[i]];
      models[i] = stage_models_[*from[i]];
    }
  }
  cfg_ = &cfg;
  splits_ = std::move(splits);
  stage_models_ = std::move(models);
  blockers_.assign(cfg.pipelines.size(), {});
  fragments_.assign(cfg.pipelines.size(), {});
  admission_.configure(cfg, admission_.frontends());  // quotas read again from the table, by the new pipelines' names
  if (table_) {
    auto t = *table_;
    apply(t);
  } else {
    refresh();
  }
}

void frontend_routes::apply(const msg::routing_table& t) {
  // Tables come from the one controller in order; a restarted controller numbers afresh.
  epoch_ = t.epoch;
  table_ = t;
  std::unordered_map<std::string, route> fresh;
  for (auto& mr : t.routes) {
    auto& r = fresh[mr.model];
    r.dispatcher = mr.dispatcher;
    // A model one frontend dispatches for all is dispatched whole; otherwise each frontend sends
    // its share of each batch.
    auto frontends = mr.dispatcher.empty() ? t.frontends : 1u;
    for (auto& inst : mr.instances) {
      r.backends.push_back({inst.node, inst.device});
      sched::backend_load l;
      l.weight = inst.weight;
      l.live = !down_.count(inst.node);
      l.spare = inst.spare;
      l.spill_at = sched::spill_threshold(inst.spill_at, frontends);
      l.batch = sched::spill_threshold(inst.batch, frontends);  // each frontend's part of a batch
      l.padding = inst.dummy_rate;
      l.duration_s = inst.duration_ms / 1e3;
      if (auto* old = load_of(mr.model, inst.node, inst.device)) l.outstanding = old->outstanding;
      r.loads.push_back(l);
    }
  }
  // A model the new table routes nowhere this frontend hears keeps the live instances it had, as
  // stand-ins, until one of the new ones is live: they drain, and serve meanwhile. So it goes when
  // a worker that just came back reaches the controller before this node reaches it, and when a
  // controller that was cut off sends tables made while it heard only part of the cluster.
  for (auto& [model, old] : routes_) {
    auto& r = fresh[model];
    if (std::any_of(r.loads.begin(), r.loads.end(), [](auto& l) { return l.live; })) continue;
    for (size_t i = 0; i < old.backends.size(); ++i)
      if (old.loads[i].live) {
        r.backends.push_back(old.backends[i]);
        r.loads.push_back(old.loads[i]);
        r.stand_ins.push_back(r.backends.size() - 1);
      }
    if (r.backends.empty()) fresh.erase(model);
  }
  // The turn goes on where the table keeps the instances in turn as they were.
  for (auto& [model, r] : fresh)
    if (auto old = routes_.find(model);
        old != routes_.end() && sched::kept_turn(r.loads, old->second.loads, [&](size_t i, size_t j) {
          return r.backends[i].node == old->second.backends[j].node &&
                 r.backends[i].device == old->second.backends[j].device;
        }))
      r.turn = old->second.turn, r.deadline_told = old->second.deadline_told;
  for (auto& [model, r] : fresh) {
    r.turn.frontends = r.dispatcher.empty() ? std::max<uint32_t>(1, t.frontends) : 1;
    r.budget_ms = tightest_budget_ms(t.budgets, model);
  }
  routes_ = std::move(fresh);
  fragments_.assign(cfg_->pipelines.size(), {});
  for (auto& f : t.fragments)
    if (auto* p = cfg_->find_pipeline(f.pipeline); p && !f.models.empty() && f.models.size() == f.budgets_ms.size())
      fragments_[static_cast<size_t>(p - cfg_->pipelines.data())].push_back(f);
  for (size_t pi = 0; pi < cfg_->pipelines.size(); ++pi) {
    auto read = stages_of(*cfg_, cfg_->pipelines[pi], t.budgets);
    for (size_t s = 0; s < read.models.size(); ++s) stage_models_[pi][s] = cfg_->models[read.models[s]].name;
    if (read.split) splits_[pi] = std::move(read.split);
  }
  std::vector<std::vector<std::string>> models;
  for (size_t pi = 0; pi < cfg_->pipelines.size(); ++pi) models.push_back(models_of(pi));
  admission_.apply(t, models);
  refresh();
}

bool frontend_routes::set_live(const std::string& node, bool live) {
  if (live)
    heard_.insert(node);
  else
    heard_.erase(node);
  if (live ? !down_.erase(node) : !down_.insert(node).second) return false;
  for (auto& [m, r] : routes_) {
    for (size_t i = 0; i < r.backends.size(); ++i)
      if (r.backends[i].node == node) r.loads[i].live = live;
    // Stand-ins go once an instance of the table is live.
    if (r.stand_ins.empty()) continue;
    bool table_live = false;
    for (size_t i = 0; i < r.backends.size(); ++i)
      table_live =
          table_live || (r.loads[i].live && std::find(r.stand_ins.begin(), r.stand_ins.end(), i) == r.stand_ins.end());
    if (!table_live) continue;
    for (auto k = r.stand_ins.rbegin(); k != r.stand_ins.rend(); ++k) {
      r.backends.erase(r.backends.begin() + static_cast<long>(*k));
      r.loads.erase(r.loads.begin() + static_cast<long>(*k));
    }
    r.stand_ins.clear();
  }
  refresh();
  return true;
}

const std::string& frontend_routes::dispatcher(const std::string& model) const {
  static const std::string none;
  auto it = routes_.find(model);
  if (it == routes_.end() || !heard_.count(it->second.dispatcher)) return none;
  return it->second.dispatcher;
}

std::optional<frontend_routes::backend> frontend_routes::pick(const std::string& model, std::mt19937_64& rng) {
  auto it = routes_.find(model);
  if (it == routes_.end()) return std::nullopt;
  it->second.turn.clock = clock_s_;
  auto k = balancer_->dispatch(it->second.loads, it->second.turn, rng);
  if (!k) return std::nullopt;
  ++it->second.loads[*k].outstanding;
  return it->second.backends[*k];
}

bool frontend_routes::in_turn(const std::string& model) const {
  auto it = routes_.find(model);
  return it != routes_.end() && sched::takes_whole_batches(it->second.loads);
}

std::vector<frontend_routes::backend> frontend_routes::padding_due(const std::string& model, std::mt19937_64& rng) {
  std::vector<backend> out;
  auto it = routes_.find(model);
  if (it == routes_.end()) return out;
  auto& r = it->second;
  r.turn.clock = clock_s_;
  for (auto n = balancer_->padding_due(r.loads, r.turn); n > 0; --n) {
    auto k = balancer_->dispatch_padding(r.loads, r.turn, rng);
    if (!k) break;
    ++r.loads[*k].outstanding;
    out.push_back(r.backends[*k]);
  }
  return out;
}

std::optional<double> frontend_routes::padding_deadline(const std::string& model) {
  auto it = routes_.find(model);
  if (it == routes_.end()) return std::nullopt;
  auto& r = it->second;
  auto at = balancer_->padding_deadline(r.loads, r.turn);
  if (!at || *at == r.deadline_told) return std::nullopt;
  r.deadline_told = *at;
  return at;
}

double frontend_routes::budget_ms(const std::string& model) const {
  auto it = routes_.find(model);
  return it == routes_.end() ? 0 : it->second.budget_ms;
}

std::optional<frontend_routes::backend> frontend_routes::pick_at(const std::string& model, const std::string& node,
                                                                 uint32_t device, std::mt19937_64& rng) {
  if (auto* l = load_of(model, node, device); l && l->live) {
    ++l->outstanding;
    return backend{node, device};
  }
  return pick(model, rng);
}

const msg::fragment_route* frontend_routes::fragment_route(size_t pi, int start, double slo_ms,
                                                           std::mt19937_64& rng) const {
  if (pi >= fragments_.size()) return nullptr;
  auto live = [&](const msg::fragment_route& f) {
    return std::all_of(f.models.begin(), f.models.end(), [&](auto& m) {
      auto it = routes_.find(m);
      return it != routes_.end() &&
             std::any_of(it->second.loads.begin(), it->second.loads.end(), [](auto& l) { return l.live; });
    });
  };
  // The SLO to serve at: the largest planned not above slo_ms, else the least above.
  std::optional<double> below, above;
  for (auto& f : fragments_[pi]) {
    if (static_cast<int>(f.start_layer) != start || !live(f)) continue;
    if (f.slo_ms <= slo_ms + 1e-9) {
      if (!below || f.slo_ms > *below) below = f.slo_ms;
    } else if (!above || f.slo_ms < *above) {
      above = f.slo_ms;
    }
  }
  if (!below && !above) return nullptr;
  double at = below ? *below : *above;
  std::vector<const msg::fragment_route*> pick;
  double total = 0;
  for (auto& f : fragments_[pi])
    if (static_cast<int>(f.start_layer) == start && f.slo_ms == at && live(f))
      pick.push_back(&f), total += std::max(f.rate, 1e-6);
  double x = std::uniform_real_distribution<double>(0, total)(rng);
  for (auto* f : pick) {
    x -= std::max(f->rate, 1e-6);
    if (x <= 0) return f;
  }
  return pick.back();
}

void frontend_routes::release(const std::string& model, const std::string& node, uint32_t device) {
  if (auto* l = load_of(model, node, device); l && l->outstanding) --l->outstanding;
}

uint32_t frontend_routes::outstanding_at(const std::string& node) const {
  uint32_t n = 0;
  for (auto& [model, r] : routes_)
    for (size_t i = 0; i < r.backends.size(); ++i)
      if (r.backends[i].node == node) n += r.loads[i].outstanding;
  return n;
}

void frontend_routes::refresh() {
  for (size_t pi = 0; pi < cfg_->pipelines.size(); ++pi) {
    auto& p = cfg_->pipelines[pi];
    auto& why = blockers_[pi];
    why.clear();
    if (epoch_ == 0) {
      why = "no routing table from the controller yet";
      continue;
    }
    if (!splits_[pi]) {
      why = "no stage budgets for pipeline '" + p.name + "'";
      continue;
    }
    for (auto& model : models_of(pi)) {
      auto it = routes_.find(model);
      bool live = it != routes_.end() &&
                  std::any_of(it->second.loads.begin(), it->second.loads.end(), [](auto& l) { return l.live; });
      if (!live) {
        why = "no live instance serves model '" + model + "'";
        if (table_)
          for (auto& u : table_->unloaded)
            if (u.model == model) {
              why += fmt::format(": it could not load on device {} of node '{}': {}", u.device, u.node, u.reason);
              break;
            }
        break;
      }
    }
  }
}

sched::admission::verdict frontend_routes::admit(size_t pi, int tenant, double now_s) {
  return admission_.admit(pi, tenant, now_s);
}

bool frontend_routes::serves(const std::string& model) const {
  auto it = routes_.find(model);
  return it != routes_.end() &&
         std::any_of(it->second.loads.begin(), it->second.loads.end(), [](auto& l) { return l.live; });
}

std::vector<std::string> frontend_routes::models_of(size_t pi) const {
  auto models = stage_models_[pi];
  for (auto& st : cfg_->pipelines[pi].stages)
    if (st.cascade) models.push_back(cfg_->models[st.cascade->second_index].name);
  return models;
}

std::string frontend_routes::readiness(const std::string& self, std::optional<size_t> only) const {
  for (size_t pi = 0; pi < cfg_->pipelines.size(); ++pi) {
    if (only && pi != *only) continue;
    if (!blockers_[pi].empty()) return blockers_[pi];
    // Requests are routed to any live instance (a table's instance is live until its node goes
    // down); ready waits until each model has one whose node answered both ways.
    for (auto& model : models_of(pi)) {
      auto& r = routes_.at(model);
      bool heard = false;
      for (size_t i = 0; i < r.backends.size() && !heard; ++i)
        heard = r.loads[i].live && (r.backends[i].node == self || heard_.count(r.backends[i].node));
      if (!heard) return "model '" + model + "' runs only on nodes not heard both ways yet";
    }
  }
  return {};
}

}  // namespace sloserve
