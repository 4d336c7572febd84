// What a frontend's response cache tells Prometheus and Triton's statistics (node_metrics).
#include <fmt/format.h>

#include <algorithm>

#include "actors/exposition.hpp"
#include "actors/metrics.hpp"

namespace sloserve {

using namespace exposition;

void node_metrics::cache_lookup(const std::string& of, bool pipeline, bool hit, double seconds) {
  std::lock_guard lock(mu_);
  auto kind = pipeline ? "pipeline" : "model";
  ++cache_lookups_[label2("of", of, "kind", kind) + "," + label("result", hit ? "hit" : "miss")];
  cache_seconds_[label2("of", of, "kind", kind)] += seconds;
  if (!pipeline) return;
  auto ns = static_cast<uint64_t>(std::max(0.0, seconds) * 1e9);
  auto& st = statistics_[of].stats;
  auto& d = hit ? st.cache_hit : st.cache_miss;
  ++d.count;
  d.ns += ns;
  // A hit is a success answered in its lookup's time; not an inference, nor an execution.
  if (hit) ++st.success.count, st.success.ns += ns;
}

void node_metrics::cache_state(uint64_t insertions, uint64_t evictions, uint64_t too_large, uint64_t bytes,
                               uint64_t entries) {
  std::lock_guard lock(mu_);
  cache_ = cache_totals{insertions, evictions, too_large, bytes, entries};
}

void node_metrics::render_cache(std::string& out) const {
  if (!cache_lookups_.empty()) {
    header(out, "sloserve_response_cache_lookups_total", "counter",
           "Response-cache lookups by what caches (of: a model or a pipeline; kind) and result (hit, miss).");
    for (auto& [l, v] : cache_lookups_) sample(out, "sloserve_response_cache_lookups_total", l, static_cast<double>(v));
    header(out, "sloserve_response_cache_lookup_seconds_total", "counter",
           "Time spent looking up (and, after a miss, keeping) outputs in the response cache.");
    for (auto& [l, v] : cache_seconds_) sample(out, "sloserve_response_cache_lookup_seconds_total", l, v);
  }
  if (!cache_) return;
  auto one = [&](const char* name, const char* type, const char* help, uint64_t v) {
    header(out, name, type, help);
    sample(out, name, {}, static_cast<double>(v));
  };
  one("sloserve_response_cache_insertions_total", "counter", "Outputs kept in the response cache.", cache_->insertions);
  one("sloserve_response_cache_evictions_total", "counter",
      "Entries evicted from the response cache to make room (least recently used first).", cache_->evictions);
  one("sloserve_response_cache_too_large_total", "counter",
      "Outputs not kept: larger than the whole cache (runtime.response_cache_mb).", cache_->too_large);
  one("sloserve_response_cache_bytes", "gauge", "Bytes the response cache holds.", cache_->bytes);
  one("sloserve_response_cache_entries", "gauge", "Entries the response cache holds.", cache_->entries);
}

}  // namespace sloserve
