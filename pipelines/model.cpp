#include "pipelines/model.hpp"

#include <algorithm>

namespace sloserve {

int latency_profile::max_batch(int model_max_batch) const {
  if (tabular()) return std::min(batch.back(), model_max_batch);
  return model_max_batch;
}

double latency_profile::latency_ms_at(int b) const {
  if (!tabular()) return alpha_ms * b + beta_ms;
  auto it = std::lower_bound(batch.begin(), batch.end(), b);
  if (it != batch.end()) {
    auto i = static_cast<size_t>(it - batch.begin());
    if (step || i == 0 || batch[i] == b) return latency_ms[i];
    double f = static_cast<double>(b - batch[i - 1]) / (batch[i] - batch[i - 1]);
    return latency_ms[i - 1] + f * (latency_ms[i] - latency_ms[i - 1]);
  }
  // Beyond the table (a prefix family's combined batch): the slope of its last two points.
  size_t n = batch.size();
  if (n < 2 || batch[n - 1] == batch[n - 2]) return latency_ms.back();
  double slope = (latency_ms[n - 1] - latency_ms[n - 2]) / (batch[n - 1] - batch[n - 2]);
  return latency_ms.back() + std::max(0.0, slope) * (b - batch.back());
}

std::vector<int> latency_profile::plannable_batches(int model_max_batch) const {
  std::vector<int> out;
  if (tabular()) {
    if (step) {
      for (int b : batch)
        if (b <= model_max_batch) out.push_back(b);
    } else {
      for (int b = batch.front(); b <= std::min(model_max_batch, batch.back()); ++b) out.push_back(b);
    }
  } else {
    for (int b = 1; b <= model_max_batch; ++b) out.push_back(b);
  }
  return out;
}

double core_latency::at(int batch, int cores) const {
  double b = batch, c = cores;
  return gamma * b / c + epsilon / c + delta * b + eta;
}

double core_latency::throughput(int batch, int cores) const {
  double ms = at(batch, cores);
  return ms > 0 ? batch * 1000.0 / ms : 0;
}

double model_spec::suffix_ms_at(int b) const {
  return std::max(0.0, profile.latency_ms_at(b) - (is_variant() ? prefix_profile.latency_ms_at(b) : 0.0));
}

}  // namespace sloserve
