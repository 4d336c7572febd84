#pragma once
// Predicting the largest per-second rate of the next window from the recent per-second rates,
// for the horizontal scaler (FA2 and Biscale plan for the predicted maximum of the next 10 s).
// Pluggable: the scaler takes any rate_predictor by name.

#include <deque>
#include <memory>
#include <string_view>

#include "config/knobs.hpp"

namespace sloserve::sched {

class rate_predictor {
 public:
  virtual ~rate_predictor() = default;
  virtual std::string_view name() const = 0;
  // The rate (requests/s) of the second that just ended.
  virtual void observe(double rate) = 0;
  // The largest per-second rate expected over the next window; 0 before any observation.
  virtual double predict() const = 0;
};

// The largest rate of the last `history` seconds. Reacts to a burst at once and keeps it for
// `history` seconds, so the capacity it asks for does not flap with every second.
class recent_max_predictor final : public rate_predictor {
 public:
  explicit recent_max_predictor(size_t history = 30) : history_(history ? history : 1) {}
  std::string_view name() const override { return "recent_max"; }
  void observe(double rate) override;
  double predict() const override;

 private:
  size_t history_;
  std::deque<double> rates_;
};

// Holt's linear trend on the per-second rates (level smoothing `alpha`, trend `beta`),
// extrapolated over `window` seconds, and never below the last observed rate: a rising load is
// anticipated instead of chased.
class trend_predictor final : public rate_predictor {
 public:
  trend_predictor(double window = 10, double alpha = 0.5, double beta = 0.3)
      : window_(window), alpha_(alpha), beta_(beta) {}
  std::string_view name() const override { return "trend"; }
  void observe(double rate) override;
  double predict() const override;

 private:
  double window_, alpha_, beta_;
  double level_ = 0, trend_ = 0, last_ = 0;
  int seen_ = 0;
};

// The predictor of scaler.predictor; null for lstm, which lives with LibTorch
// (gpu/lstm_predictor.hpp).
std::unique_ptr<rate_predictor> make_rate_predictor(predictor_kind kind);

}  // namespace sloserve::sched
