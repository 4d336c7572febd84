#pragma once
// What a request may ask for of itself, the same at every ingress (ZeroMQ, KServe v2 over HTTP
// and gRPC): its own SLO and the layer a partitioned model starts from.

#include <cstdint>

namespace sloserve::limits {

inline constexpr double max_slo_ms = 3600e3;  // an hour
inline constexpr const char* slo_range = "[0, 3600000]";
inline constexpr int64_t max_start_layer = 1000000;

// Whether `ms` is an SLO a request may carry (0: the pipeline's own).
inline bool slo_in_range(double ms) {
  return ms >= 0 && ms <= max_slo_ms;
}

}  // namespace sloserve::limits
