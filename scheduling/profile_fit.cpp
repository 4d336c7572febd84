#include "scheduling/profile_fit.hpp"

#include <cmath>
#include <set>

namespace sloserve::sched {
bool least_squares(const std::vector<std::vector<double>>& rows, const std::vector<double>& y,
                   std::vector<double>& coef) {
  if (rows.empty() || rows.size() != y.size()) return false;
  auto k = rows.front().size();
  std::vector<std::vector<double>> m(k, std::vector<double>(k + 1, 0));  // augmented normal equations
  for (size_t i = 0; i < rows.size(); ++i)
    for (size_t r = 0; r < k; ++r) {
      for (size_t c = 0; c < k; ++c) m[r][c] += rows[i][r] * rows[i][c];
      m[r][k] += rows[i][r] * y[i];
    }
  for (size_t col = 0; col < k; ++col) {
    auto piv = col;
    for (auto r = col + 1; r < k; ++r)
      if (std::abs(m[r][col]) > std::abs(m[piv][col])) piv = r;
    std::swap(m[col], m[piv]);
    if (std::abs(m[col][col]) < 1e-12) return false;
    for (size_t r = 0; r < k; ++r) {
      if (r == col) continue;
      double factor = m[r][col] / m[col][col];
      for (auto c = col; c <= k; ++c) m[r][c] -= factor * m[col][c];
    }
  }
  coef.assign(k, 0);
  for (size_t r = 0; r < k; ++r) coef[r] = m[r][k] / m[r][r];
  return true;
}

namespace {

// Least squares over the basis 1, b, b² (the first `k` of them).
profile_fit fit(const std::vector<int>& batch, const std::vector<double>& y, int k) {
  profile_fit f;
  if (batch.size() != y.size() || std::set<int>(batch.begin(), batch.end()).size() < static_cast<size_t>(k)) return f;
  std::vector<std::vector<double>> rows;
  for (int x : batch) {
    double basis[3] = {1.0, static_cast<double>(x), static_cast<double>(x) * x};
    rows.emplace_back(basis, basis + k);
  }
  std::vector<double> coef;
  if (!least_squares(rows, y, coef)) return f;
  coef.resize(3, 0);
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
