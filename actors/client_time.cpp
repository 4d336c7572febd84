#include "actors/client_time.hpp"

#include <algorithm>

namespace sloserve {

// Clients tracked at most; beyond it the estimates start afresh (bounds the memory).
constexpr size_t max_clients = 100000;

double client_time::clock::offset_ms(double waited_ms, time_point now, double tolerance_ms) {
  if (now - since > std::chrono::seconds(10)) {
    prev_low_ms = low_ms;
    low_ms = std::numeric_limits<double>::infinity();
    since = now;
  }
  low_ms = std::min(low_ms, waited_ms);
  double floor = std::min(low_ms, prev_low_ms);
  return floor < 0 || floor > tolerance_ms ? floor : 0;
}

client_time::spent client_time::on_request(const std::string& client, double network_ms, int64_t sent_at_us,
                                           int64_t wall_us, time_point now, double tolerance_ms) {
  spent out;
  out.network_ms = network_ms;
  if (network_ms >= 0) {
    if (network_ms_.size() > max_clients) network_ms_.clear();
    auto [it, fresh] = network_ms_.emplace(client, network_ms);
    if (!fresh) it->second = 0.7 * it->second + 0.3 * network_ms;
  } else if (auto it = network_ms_.find(client); it != network_ms_.end()) {
    out.network_ms = it->second;  // estimated from what this client reported before
  }
  out.spent_ms = std::max(0.0, out.network_ms);
  if (sent_at_us <= 0) return out;
  if (clocks_.size() > max_clients) clocks_.clear();
  double waited_ms = static_cast<double>(wall_us - sent_at_us) / 1000.0;
  auto [it, fresh] = clocks_.try_emplace(client);
  if (fresh) it->second.since = now;
  double offset = it->second.offset_ms(waited_ms, now, tolerance_ms);
  out.waited_ms = waited_ms - offset;
  out.spent_ms = offset == 0 ? std::max(out.spent_ms, out.waited_ms) : std::max(0.0, out.waited_ms) + out.spent_ms;
  return out;
}

}  // namespace sloserve
