#include "actors/worker_registry.hpp"

#include <algorithm>
#include <utility>

namespace sloserve {

const worker_registry::worker* worker_registry::find(const std::string& node) const {
  auto it = workers_.find(node);
  return it == workers_.end() ? nullptr : &it->second;
}

worker_registry::joined worker_registry::on_register(const std::string& node, uint64_t incarnation, uint64_t acked) {
  joined out;
  out.fresh = !workers_.count(node);
  auto& w = workers_[node];
  bool was_serving = !out.fresh && serving(w);
  auto was_acked = w.acked;
  out.restarted = w.incarnation && w.incarnation != incarnation;
  if (out.restarted) w.unloaded.clear(), w.unloadable.clear();
  out.came_back = !out.fresh && !w.up;
  w.incarnation = incarnation;
  w.acked = acked;
  w.up = true;
  w.draining = false;
  out.changed = serving(w) != was_serving || w.acked != was_acked;
  return out;
}

worker_registry::left worker_registry::on_leave(const std::string& node) {
  left out;
  auto& w = workers_[node];
  if (!w.up) return out;
  out.was_up = true;
  out.was_serving = serving(w);
  w.up = false;
  w.draining = true;
  return out;
}

worker_registry::left worker_registry::on_lost(const std::string& node) {
  left out;
  auto it = workers_.find(node);
  if (it == workers_.end()) return out;
  auto& w = it->second;
  if (!w.up) {
    out.stopped_draining = std::exchange(w.draining, false);
    return out;
  }
  out.was_up = true;
  out.was_serving = serving(w);
  w.up = false;
  return out;
}

bool worker_registry::up(const std::string& node) const {
  auto* w = find(node);
  return w && w->up;
}

bool worker_registry::serving(const std::string& node) const {
  auto* w = find(node);
  return w && serving(*w);
}

bool worker_registry::standing_in(const std::string& node) const {
  auto* w = find(node);
  return w && (serving(*w) || (w->draining && w->acked > epoch_base_));
}

uint64_t worker_registry::acked(const std::string& node) const {
  auto* w = find(node);
  return w ? w->acked : 0;
}

std::vector<std::string> worker_registry::up_workers() const {
  std::vector<std::string> out;
  for (auto& [name, w] : workers_)
    if (w.up) out.push_back(name);
  return out;
}

size_t worker_registry::serving_count() const {
  size_t n = 0;
  for (auto& [name, w] : workers_) n += serving(w);
  return n;
}

std::vector<worker_registry::unloaded_model> worker_registry::set_unloaded(const std::string& node,
                                                                           std::vector<unloaded_model> now) {
  auto it = workers_.find(node);
  if (it == workers_.end()) return {};
  auto& w = it->second;
  std::vector<unloaded_model> fresh;
  for (auto& u : now) {
    if (std::find(w.unloaded.begin(), w.unloaded.end(), u) == w.unloaded.end()) fresh.push_back(u);
    if (std::find(w.unloadable.begin(), w.unloadable.end(), u.model) == w.unloadable.end())
      w.unloadable.push_back(u.model);
  }
  w.unloaded = std::move(now);
  return fresh;
}

bool worker_registry::unloaded(const std::string& node, uint32_t device, const std::string& model) const {
  auto* w = find(node);
  return w && std::any_of(w->unloaded.begin(), w->unloaded.end(),
                          [&](auto& u) { return u.device == device && u.model == model; });
}

const std::vector<worker_registry::unloaded_model>& worker_registry::unloaded_of(const std::string& node) const {
  static const std::vector<unloaded_model> none;
  auto* w = find(node);
  return w ? w->unloaded : none;
}

std::map<std::string, std::vector<std::string>> worker_registry::unloadable() const {
  std::map<std::string, std::vector<std::string>> out;
  for (auto& [node, w] : workers_)
    if (!w.unloadable.empty()) out[node] = w.unloadable;
  return out;
}

void worker_registry::forget_unloadable() {
  for (auto& [node, w] : workers_) w.unloadable.clear();
}

}  // namespace sloserve
