#include "scheduling/link_estimate.hpp"

#include <algorithm>
#include <set>

#include "scheduling/epoch.hpp"

namespace sloserve::sched {

void link_estimate::add(double empty_ms, double loaded_ms, int64_t bytes) {
  if (bytes <= 0) return;
  rounds_.push_back({empty_ms, std::max(0.0, loaded_ms - empty_ms) / (static_cast<double>(bytes) / 1e6)});
  if (rounds_.size() > 3) rounds_.pop_front();
}

double link_estimate::ms_per_mb() const {
  if (rounds_.empty()) return -1;
  std::vector<double> v;
  for (auto& r : rounds_) v.push_back(r.per_mb);
  std::sort(v.begin(), v.end());
  return v[(v.size() - 1) / 2];
}

double link_estimate::base_ms() const {
  double best = -1;
  for (auto& r : rounds_) best = best < 0 ? r.empty_ms : std::min(best, r.empty_ms);
  return best;
}

int64_t request_bytes(const model_spec& m) {
  return static_cast<int64_t>(m.input.byte_size().value_or(0));
}

std::map<std::string, std::vector<std::string>> models_too_far(const std::map<std::string, double>& ms_per_mb,
                                                               const std::vector<model_spec>& models, double limit_ms) {
  std::map<std::string, std::vector<std::string>> out;
  for (auto& [node, per_mb] : ms_per_mb) {
    if (per_mb <= 0) continue;
    for (auto& m : models)
      if (static_cast<double>(request_bytes(m)) / 1e6 * per_mb > limit_ms) out[node].push_back(m.name);
  }
  return out;
}

void keep_models_off(std::vector<device_slot>& slots, const std::map<std::string, std::vector<std::string>>& far,
                     const std::vector<model_spec>& models) {
  if (far.empty()) return;
  auto is_far = [&](const device_slot& s, const std::string& m) {
    auto it = far.find(s.node);
    return it != far.end() && std::find(it->second.begin(), it->second.end(), m) != it->second.end();
  };
  // Models that would have no slot left keep theirs.
  std::set<std::string> off;
  for (auto& m : models) {
    bool near_one = false;
    for (auto& s : slots) near_one |= s.serves(m.name) && !is_far(s, m.name);
    if (near_one) off.insert(m.name);
  }
  if (off.empty()) return;
  std::vector<device_slot> kept;
  for (auto& s : slots) {
    std::vector<std::string> keep;
    bool changed = false;
    for (auto& m : models) {
      if (!s.serves(m.name)) continue;
      if (off.count(m.name) && is_far(s, m.name))
        changed = true;
      else
        keep.push_back(m.name);
    }
    if (changed && keep.empty()) continue;  // serves nothing now
    if (changed) s.models = std::move(keep);
    kept.push_back(std::move(s));
  }
  slots = std::move(kept);
}

}  // namespace sloserve::sched
