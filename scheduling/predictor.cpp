#include "scheduling/predictor.hpp"

#include <algorithm>

namespace sloserve::sched {

void recent_max_predictor::observe(double rate) {
  rates_.push_back(rate);
  while (rates_.size() > history_) rates_.pop_front();
}

double recent_max_predictor::predict() const {
  return rates_.empty() ? 0 : *std::max_element(rates_.begin(), rates_.end());
}

void trend_predictor::observe(double rate) {
  last_ = rate;
  if (seen_++ == 0) {
    level_ = rate;
    trend_ = 0;
    return;
  }
  double previous = level_;
  level_ = alpha_ * rate + (1 - alpha_) * (level_ + trend_);
  trend_ = beta_ * (level_ - previous) + (1 - beta_) * trend_;
}

double trend_predictor::predict() const {
  if (seen_ == 0) return 0;
  // The largest point of a linear extrapolation over the window is at one of its ends.
  return std::max({last_, level_ + trend_, level_ + trend_ * window_, 0.0});
}

std::unique_ptr<rate_predictor> make_rate_predictor(predictor_kind kind) {
  if (kind == predictor_kind::recent_max) return std::make_unique<recent_max_predictor>();
  if (kind == predictor_kind::lstm) return nullptr;
  return std::make_unique<trend_predictor>();
}

}  // namespace sloserve::sched
