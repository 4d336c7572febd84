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
#include <vector>

namespace sloserve::sched {

class uplink_estimate {
 public:
  // An upload of `bytes` that took `upload_ms` (one way), seen at `now_s`. Uploads faster than
  // 10 Gbps are loopback or clock noise: counted at that.
  void add(double now_s, int64_t bytes, double upload_ms) {
    if (bytes <= 0) return;
    double mbps = std::min(static_cast<double>(bytes) * 8 / (std::max(upload_ms, 0.0) * 1e3), 1e4);
    // How this upload compares with what the estimate promised before it.
    if (double before = this->mbps(now_s); before > 0) {
      ratios_.emplace_back(now_s, mbps / before);
      while (ratios_.size() > 256 || ratios_.front().first < now_s - 10) ratios_.pop_front();
    }
    samples_.emplace_back(now_s, mbps);
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
  // The estimate scaled by the q-quantile, over the last 10 s, of each upload's rate against the
  // estimate just before it (at most 1): a bandwidth that an upload falls below only a q of the
  // time, on a link as changeable as this one has been. The estimate itself with fewer than 20
  // uploads to judge by, or q <= 0.
  double low_mbps(double now_s, double q) const {
    double m = mbps(now_s);
    std::vector<double> r;
    for (auto& [at, x] : ratios_)
      if (at >= now_s - 10) r.push_back(x);
    if (m <= 0 || q <= 0 || r.size() < 20) return m;
    auto k =
        static_cast<size_t>(std::min<double>(static_cast<double>(r.size()) - 1, q * static_cast<double>(r.size())));
    std::nth_element(r.begin(), r.begin() + static_cast<long>(k), r.end());
    return m * std::min(1.0, r[k]);
  }

 private:
  std::deque<std::pair<double, double>> samples_;  // (seen at s, Mbps), oldest first
  std::deque<std::pair<double, double>> ratios_;   // (seen at s, Mbps over the estimate before it)
};

// Whether an uplink last reported at `was` Mbps, now `now` Mbps, moved enough to plan again on:
// by more than `factor` either way, or across one of `carried_at` (Mbps): the rates at which the
// frame sizes a client sends can be carried at its frame rate, where the size planned for it
// changes. Unknown rates (<= 0) never moved.
inline bool uplink_moved(double was, double now, const std::vector<double>& carried_at, double factor = 1.25) {
  if (was <= 0 || now <= 0) return false;
  if (now > factor * was || now * factor < was) return true;
  return std::any_of(carried_at.begin(), carried_at.end(), [&](double c) { return c > 0 && (was < c) != (now < c); });
}

}  // namespace sloserve::sched
