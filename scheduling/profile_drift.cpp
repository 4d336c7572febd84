#include "scheduling/profile_drift.hpp"

#include <algorithm>
#include <cmath>

namespace sloserve::sched {

void profile_drift::add(const std::string& model, double took_ms, double said_ms, double batches) {
  if (!(took_ms >= 0) || !(said_ms > 0) || !(batches > 0)) return;
  auto& m = models_[model];
  m.took += took_ms;
  m.said += said_ms;
  m.batches += batches;
  if (m.said < o_.min_work_ms) return;
  double ratio = m.took / m.said;
  // Against the adopted profile: what the batches took, and what the profile × scale says.
  double gap = std::abs(m.took - m.said * m.scale) / m.batches;
  m.took = m.said = m.batches = 0;
  double drift = ratio / m.scale, bound = 1 + std::max(0.0, o_.threshold);
  if ((drift <= bound && drift >= 1 / bound) || gap < o_.min_gap_ms) {
    m.counting = 0;
    m.ratio_sum = 0;
    return;
  }
  m.ratio_sum += ratio;
  if (++m.counting < std::max(1, o_.windows)) return;
  m.scale = m.ratio_sum / m.counting;
  m.counting = 0;
  m.ratio_sum = 0;
  std::erase_if(changes_, [&](auto& c) { return c.first == model; });
  changes_.emplace_back(model, m.scale);
}

std::vector<std::pair<std::string, double>> profile_drift::take_changes() {
  return std::exchange(changes_, {});
}

std::optional<double> rescale_model(std::vector<model_spec>& models, std::map<std::string, double>& scales,
                                    const std::string& model, double scale) {
  auto it = std::find_if(models.begin(), models.end(), [&](auto& m) { return m.name == model; });
  if (it == models.end() || !(scale > 0)) return std::nullopt;
  auto& now = scales.try_emplace(model, 1.0).first->second;
  if (std::abs(scale / now - 1) < 1e-9) return std::nullopt;
  scale_latency(*it, scale / now);
  return std::exchange(now, scale);
}

double profile_drift::scale(const std::string& model) const {
  auto it = models_.find(model);
  return it == models_.end() ? 1 : it->second.scale;
}

}  // namespace sloserve::sched
