#pragma once
// Clients that name themselves (ClientRequest.client), as one frontend sees them: per client and
// pipeline, the SLO and frame rate it declares (else its measured rate), its uplink (the harmonic
// mean of the last second of its uploads: bytes over the time each took, from its send time less
// what it waited on the client and half its round trip), the bytes per pixel of its images, and
// the controller's route for it (the variant, instance and image size the policy mapped it to).
// CAF-free; the frontend owns one.

#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "messages/types.hpp"
#include "scheduling/dip_quantile.hpp"
#include "scheduling/uplink_estimate.hpp"

namespace sloserve {

// The uplinks (Mbps) at which each of `images` can be carried at `rate_hz` frames a second: where
// the size a plan gives the client changes. Empty when the rate is unknown.
std::vector<double> carried_at_mbps(const std::vector<msg::image_bytes>& images, double rate_hz);

class client_registry {
 public:
  struct request {
    const std::string& client;
    const std::string& pipeline;
    double slo_ms = 0;   // what it declares (0: the pipeline's, `default_slo_ms`)
    double rate_hz = 0;  // 0: measured
    double rtt_ms = -1;
    int64_t bytes = 0;
    int64_t pixels = 0;     // of its image (0: not an image)
    double waited_ms = -1;  // since it sent, clock offset removed; < 0: no send time
    double default_slo_ms = 0;
    double queued_ms = 0;  // of waited_ms, on the client before its upload began
    uint32_t skipped = 0;  // frames it skipped since its last request (missed)
  };
  explicit client_registry(size_t max_clients = 4096) : max_(max_clients) {}
  static constexpr size_t max_image_sizes = 8;  // sizes remembered per client

  // Counts one request. False when the registry is full and the client is new (it is then
  // served as an anonymous client).
  bool on_request(const request& r, double now_s);
  // Every client heard within `forget_s`, with its rate over the `window_s` since the last call;
  // clients silent longer are forgotten.
  // Uplinks are reported at their `uplink_quantile` dips (uplink_estimate::low_mbps); with
  // `miss_target` > 0, that is where each pipeline's quantile starts, then moves to keep its
  // clients' misses near the target (sched::dip_quantile), lowering the lifts' wait share to
  // `min_wait_share` at least. All 0 until set.
  void plan_dips(double uplink_quantile, double miss_target, double min_wait_share) {
    start_quantile_ = uplink_quantile;
    miss_target_ = miss_target;
    min_wait_share_ = min_wait_share;
    dips_.clear();
  }
  std::vector<msg::client_load> report(double now_s, double window_s, double forget_s = 10);
  // A named client's request of `pipeline` was answered: within its SLO or not (any status but OK
  // misses); `servers`: a miss the servers caused, not its upload (frontend_impl::servers_miss).
  void on_outcome(const std::string& pipeline, bool missed, bool servers, double now_s);
  // The quantile `pipeline`'s uplinks were last reported at; < 0 before its first report.
  double uplink_quantile(const std::string& pipeline) const;
  // The share of a batch's wait `pipeline`'s lifts plan for (sched::dip_quantile::wait_share) as
  // last reported; < 0 before its first report.
  double wait_share(const std::string& pipeline) const;
  // The share of scheduler.jellyfish.headroom `pipeline`'s plan keeps
  // (sched::dip_quantile::headroom_share) as last reported; < 0 before its first report.
  double headroom_share(const std::string& pipeline) const;

  // Whether the client's uplink estimate moved beyond `factor` (either way), or across the rate
  // that carries one of the sizes it sent at its declared frame rate, since the last report:
  // worth reporting before the next one (sched::uplink_moved).
  bool moved(const std::string& client, const std::string& pipeline, double now_s, double factor = 1.25) const;

  // The controller's mapping; replaces the last.
  void apply(const std::vector<msg::client_route>& routes);
  // Where the client's requests of `pipeline` go; null when the table names none.
  const msg::client_route* route(const std::string& client, const std::string& pipeline) const;

 private:
  struct entry {
    std::string client, pipeline;
    double slo_ms = 0, rate_hz = 0, rtt_ms = -1, bytes_per_pixel = 0, pixels = 0, last_s = 0;
    std::vector<msg::image_bytes> images;  // per size it sent, most recent first
    double reported_mbps = -1;             // the uplink the last report gave
    uint64_t arrivals = 0;                 // since the last report
    sched::uplink_estimate uplink;
  };
  static std::string key(const std::string& client, const std::string& pipeline) { return client + '\n' + pipeline; }

  sched::dip_quantile& dips(const std::string& pipeline);

  size_t max_;
  double start_quantile_ = 0, miss_target_ = 0, min_wait_share_ = 0;  // for pipelines first seen from now on
  std::unordered_map<std::string, sched::dip_quantile> dips_;         // per pipeline
  std::unordered_map<std::string, double> reported_quantile_;         // per pipeline
  std::unordered_map<std::string, entry> clients_;
  std::unordered_map<std::string, msg::client_route> routes_;
};

}  // namespace sloserve
