#include "control/provisioner.hpp"

#include <algorithm>
#include <cmath>

namespace sloserve {

local_provisioner::local_provisioner(const cluster_config& cfg, std::function<void(deployment)> publish)
    : cfg_(&cfg), publish_(std::move(publish)) {}

int local_provisioner::free_cores(const std::string& node) const {
  auto* n = cfg_->find_node(node);
  if (!n) return 0;
  int cap = n->cores > 0 ? n->cores : n->device_count() * cfg_->scaler.max_cores;
  for (auto& i : instances_)
    if (i.node == node) cap -= i.cores;
  return cap;
}

int local_provisioner::total_cores() const {
  int sum = 0;
  for (auto& i : instances_) sum += i.cores;
  return sum;
}

int local_provisioner::cores_grantable(const std::string& node, int wanted) const {
  int grant = std::min({wanted, free_cores(node), cfg_->scaler.max_cores});
  if (cfg_->scaler.max_total_cores > 0) grant = std::min(grant, cfg_->scaler.max_total_cores - total_cores());
  return grant;
}

std::optional<uint64_t> local_provisioner::start(const std::string& model, int cores, int batch) {
  if (cfg_->scaler.max_instances > 0 && static_cast<int>(instances_.size()) >= cfg_->scaler.max_instances)
    return std::nullopt;
  // The live worker with a free slot for the model and the most free cores.
  const node_spec* best = nullptr;
  int best_slot = -1, best_free = 0;
  for (auto& n : cfg_->nodes) {
    if (!n.has_role(role::worker) || !up_.count(n.name)) continue;
    int free = free_cores(n.name);
    if (free < 1 || (best && free <= best_free)) continue;
    for (int d = 0; d < n.device_count(); ++d) {
      if (!n.serves(d, model)) continue;
      bool taken = std::any_of(instances_.begin(), instances_.end(), [&](const placed_instance& i) {
        return i.node == n.name && i.device == static_cast<uint32_t>(d);
      });
      if (taken) continue;
      best = &n, best_slot = d, best_free = free;
      break;
    }
  }
  if (!best) return std::nullopt;
  int granted = cores_grantable(best->name, std::max(1, cores));
  if (granted < 1) return std::nullopt;
  placed_instance i{next_id_++, model, best->name, static_cast<uint32_t>(best_slot), granted, std::max(1, batch)};
  instances_.push_back(i);
  return i.id;
}

void local_provisioner::stop(uint64_t id) {
  std::erase_if(instances_, [&](const placed_instance& i) { return i.id == id; });
}

int local_provisioner::resize(uint64_t id, int cores, int batch) {
  auto it = std::find_if(instances_.begin(), instances_.end(), [&](auto& i) { return i.id == id; });
  if (it == instances_.end()) return 0;
  it->batch = std::max(1, batch);
  int wanted = std::clamp(cores, 1, cfg_->scaler.max_cores);
  if (wanted <= it->cores) {
    it->cores = wanted;
    return wanted;
  }
  it->cores += std::max(0, cores_grantable(it->node, wanted - it->cores));
  return it->cores;
}

void local_provisioner::set_workers_up(const std::vector<std::string>& up) {
  up_ = {up.begin(), up.end()};
  std::erase_if(instances_, [&](const placed_instance& i) { return !up_.count(i.node); });
}

bool local_provisioner::commit() {
  deployment d;
  for (auto& i : instances_)
    d.instances.push_back({i.node, i.device, i.model, static_cast<uint32_t>(i.batch), static_cast<uint32_t>(i.cores)});
  d.budgets = budgets_;
  d.in_turn = in_turn_;
  // Budgets and fill times within half a millisecond of the published ones count as unchanged.
  auto near = [](const std::map<std::string, batch_in_turn>& a, const std::map<std::string, batch_in_turn>& b) {
    return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](auto& x, auto& y) {
             return x.first == y.first && x.second.batch == y.second.batch &&
                    std::abs(x.second.fill_ms - y.second.fill_ms) < 0.5;
           });
  };
  auto same = published_ && d.instances == last_.instances && near(d.in_turn, last_.in_turn) &&
              d.budgets.size() == last_.budgets.size() &&
              std::equal(d.budgets.begin(), d.budgets.end(), last_.budgets.begin(), [](auto& a, auto& b) {
                return a.stage == b.stage && std::abs(a.budget_ms - b.budget_ms) < 0.5;
              });
  if (same) return false;
  last_ = d;
  published_ = true;
  publish_(std::move(d));
  return true;
}

}  // namespace sloserve
