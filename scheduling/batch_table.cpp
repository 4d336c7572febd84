#include "scheduling/batch_table.hpp"

#include <algorithm>
#include <limits>

namespace sloserve::sched {

batch_table::batch_table(const model_spec& m) : model_(&m), limit_(std::max(0, m.batch_limit())) {
  l_.assign(static_cast<size_t>(limit_) + 1, 0);
  for (int b = 1; b <= limit_; ++b) l_[static_cast<size_t>(b)] = m.profile.latency_ms_at(b);
  least_from_ = l_;
  most_upto_ = l_;
  for (int b = limit_ - 1; b >= 1; --b)
    least_from_[static_cast<size_t>(b)] = std::min(l_[static_cast<size_t>(b)], least_from_[static_cast<size_t>(b) + 1]);
  for (int b = 2; b <= limit_; ++b)
    most_upto_[static_cast<size_t>(b)] = std::max(l_[static_cast<size_t>(b)], most_upto_[static_cast<size_t>(b) - 1]);
  per_request_ = std::numeric_limits<double>::infinity();
  for (int b = 1; b <= limit_; ++b) per_request_ = std::min(per_request_, l_[static_cast<size_t>(b)] / b);
  if (limit_ < 1) per_request_ = 0;
  plannable_ = m.profile.plannable_batches(m.max_batch);
  int best = 0;
  double best_t = 0;
  for (int b : plannable_) {
    double l = ms(b);
    if (!plannable_l_.empty() && l < plannable_l_.back()) monotone_ = false;
    plannable_l_.push_back(l);
    if (l > 0 && b / l >= best_t) best_t = b / l, best = b;
    best_upto_.push_back(best);
  }
}

int batch_table::saturating_batch(double L) const {
  if (!monotone_) {
    int best = 0;
    double best_t = 0;
    for (size_t i = 0; i < plannable_.size(); ++i) {
      double l = plannable_l_[i];
      if (2 * l > L || l <= 0) continue;
      if (plannable_[i] / l >= best_t) best_t = plannable_[i] / l, best = plannable_[i];
    }
    return best;
  }
  // l never falls, so the batches with 2·l(b) <= L are a prefix of the plannable ones.
  auto k = std::upper_bound(plannable_l_.begin(), plannable_l_.end(), L, [](double x, double l) { return x < 2 * l; }) -
           plannable_l_.begin();
  return k == 0 ? 0 : best_upto_[static_cast<size_t>(k) - 1];
}

double batch_table::throughput(double L) const {
  int b = saturating_batch(L);
  return b == 0 ? 0 : b / ms(b) * 1000.0;
}

double batch_table::least_from(int b) const {
  if (b < 1) b = 1;
  if (b > limit_) return ms(b);
  return least_from_[static_cast<size_t>(b)];
}

double batch_table::most_upto(int b) const {
  if (b > limit_) return std::max(limit_ >= 1 ? most_upto_.back() : 0.0, ms(b));
  if (b < 1) return ms(1);
  return most_upto_[static_cast<size_t>(b)];
}

const batch_table& batch_tables::of(const model_spec& m) const {
  if (auto it = tables_.find(&m); it != tables_.end()) return *it->second;
  return *tables_.emplace(&m, std::make_unique<batch_table>(m)).first->second;
}

}  // namespace sloserve::sched
