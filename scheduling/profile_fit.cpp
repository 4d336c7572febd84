#include "scheduling/profile_fit.hpp"

#include <array>
#include <cmath>
#include <set>

namespace sloserve::sched {
namespace {

// Least squares over the basis 1, b, b² (the first `k` of them) by the normal equations,
// solved by Gaussian elimination with partial pivoting.
profile_fit fit(const std::vector<int>& batch, const std::vector<double>& y, int k) {
  profile_fit f;
  if (batch.size() != y.size() || std::set<int>(batch.begin(), batch.end()).size() < static_cast<size_t>(k)) return f;
  std::array<std::array<double, 4>, 3> m{};  // augmented k x (k+1)
  for (size_t i = 0; i < batch.size(); ++i) {
    double x = batch[i], basis[3] = {1, x, x * x};
    for (int r = 0; r < k; ++r) {
      for (int c = 0; c < k; ++c) m[r][c] += basis[r] * basis[c];
      m[r][k] += basis[r] * y[i];
    }
  }
  for (int col = 0; col < k; ++col) {
    int piv = col;
    for (int r = col + 1; r < k; ++r)
      if (std::abs(m[r][col]) > std::abs(m[piv][col])) piv = r;
    std::swap(m[col], m[piv]);
    if (std::abs(m[col][col]) < 1e-12) return f;
    for (int r = 0; r < k; ++r) {
      if (r == col) continue;
      double factor = m[r][col] / m[col][col];
      for (int c = col; c <= k; ++c) m[r][c] -= factor * m[col][c];
    }
  }
  double coef[3] = {0, 0, 0};
  for (int r = 0; r < k; ++r) coef[r] = m[r][k] / m[r][r];
  f.c = coef[0];
  f.b1 = coef[1];
  f.a = coef[2];
  double sq = 0;
  for (size_t i = 0; i < batch.size(); ++i) {
    double e = f.at(batch[i]) - y[i];
    sq += e * e;
    if (y[i] > 0) f.max_rel_err = std::max(f.max_rel_err, std::abs(e) / y[i]);
  }
  f.rms_ms = std::sqrt(sq / batch.size());
  f.ok = true;
  return f;
}

}  // namespace

profile_fit fit_linear(const std::vector<int>& batch, const std::vector<double>& latency_ms) {
  return fit(batch, latency_ms, 2);
}

profile_fit fit_quadratic(const std::vector<int>& batch, const std::vector<double>& latency_ms) {
  return fit(batch, latency_ms, 3);
}

}  // namespace sloserve::sched
