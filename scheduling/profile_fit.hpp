#pragma once
// Fitting latency models to measured profiles: l(b) = alpha·b + beta (Nexus's linear profile)
// and d(b) = a·b² + b1·b + c (FA2's quadratic), by least squares.

#include <vector>

namespace sloserve::sched {

struct profile_fit {
  double a = 0;            // b² coefficient (0 for the linear fit)
  double b1 = 0;           // b coefficient (alpha_ms for the linear fit)
  double c = 0;            // constant (beta_ms for the linear fit)
  double rms_ms = 0;       // root mean square error over the points
  double max_rel_err = 0;  // largest |fit - measured| / measured
  bool ok = false;         // false when there are too few distinct points

  double at(double batch) const { return a * batch * batch + b1 * batch + c; }
};

// Least squares: the `coef` minimising Σ (rows[i]·coef − y[i])², by the normal equations with
// partial pivoting. False when the system is singular (too few distinct points).
bool least_squares(const std::vector<std::vector<double>>& rows, const std::vector<double>& y,
                   std::vector<double>& coef);

profile_fit fit_linear(const std::vector<int>& batch, const std::vector<double>& latency_ms);
profile_fit fit_quadratic(const std::vector<int>& batch, const std::vector<double>& latency_ms);

}  // namespace sloserve::sched
