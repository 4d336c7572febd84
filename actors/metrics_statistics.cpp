// Triton's statistics extension's figures per pipeline (node_metrics): what each answered, how
// long it took, and in how many executions.

#include <algorithm>
#include <cmath>

#include "actors/metrics.hpp"

namespace sloserve {

void node_metrics::request_statistics(const std::string& pipeline, bool ok, int64_t total_ns, int64_t queue_ns,
                                      int64_t compute_ns, double executions, uint64_t wall_ms) {
  std::lock_guard lock(mu_);
  auto& t = statistics_[pipeline];
  auto& st = t.stats;
  auto add = [](pipeline_statistics::duration& d, int64_t ns) {
    ++d.count;
    d.ns += static_cast<uint64_t>(std::max<int64_t>(0, ns));
  };
  add(ok ? st.success : st.fail, total_ns);
  st.last_inference_ms = wall_ms;
  if (!ok) return;
  ++st.inference_count;
  add(st.queue, queue_ns);
  add(st.compute, compute_ns);
  t.executions += executions;
  st.execution_count = static_cast<uint64_t>(std::llround(t.executions));
}

std::vector<pipeline_statistics> node_metrics::statistics() const {
  std::lock_guard lock(mu_);
  std::vector<pipeline_statistics> out;
  for (auto& [name, t] : statistics_) {
    out.push_back(t.stats);
    out.back().name = name;
  }
  return out;
}

std::vector<pipeline_statistics> node_metrics::statistics(const std::vector<std::string>& names) const {
  std::lock_guard lock(mu_);
  std::vector<pipeline_statistics> out;
  for (auto& name : names) {
    auto it = statistics_.find(name);
    out.push_back(it == statistics_.end() ? pipeline_statistics{} : it->second.stats);
    out.back().name = name;
  }
  return out;
}

}  // namespace sloserve
