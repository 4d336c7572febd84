#include "actors/worker_registry.hpp"

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

}  // namespace sloserve
