#pragma once
// An uplink's bandwidth from the uploads seen over it: the harmonic mean, over the last second,
// of each upload's bytes over the time it took (Jellyfish's estimate, seed 000 §6). The harmonic
// mean of rates is one over the mean time per byte: what the next upload's time is expected to
// be. The frontend keeps one per client, from send times; the load client one per emulated
// uplink, from the transfers it times. Header-only: both sides use it.

#include <algorithm>
#include <cstdint>
#include <deque>
#include <utility>

namespace sloserve::sched {

class uplink_estimate {
 public:
  // An upload of `bytes` that took `upload_ms` (one way), seen at `now_s`. Uploads faster than
  // 10 Gbps are loopback or clock noise: counted at that.
  void add(double now_s, int64_t bytes, double upload_ms) {
    if (bytes <= 0) return;
    double mbps = static_cast<double>(bytes) * 8 / (std::max(upload_ms, 0.0) * 1e3);
    samples_.emplace_back(now_s, std::min(mbps, 1e4));
    while (samples_.size() > 1024 || (!samples_.empty() && samples_.front().first < now_s - 1)) samples_.pop_front();
  }
  // Mbps; -1 when no upload of the last second is known.
  double mbps(double now_s) const {
    double inverse = 0;
    size_t n = 0;
    for (auto& [at, mbps] : samples_)
      if (at >= now_s - 1) inverse += 1 / mbps, ++n;
    return n ? static_cast<double>(n) / inverse : -1;
  }

 private:
  std::deque<std::pair<double, double>> samples_;  // (seen at s, Mbps), oldest first
};

}  // namespace sloserve::sched
