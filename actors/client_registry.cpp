#include "actors/client_registry.hpp"

#include <algorithm>

namespace sloserve {

std::vector<double> carried_at_mbps(const std::vector<msg::image_bytes>& images, double rate_hz) {
  std::vector<double> out;
  if (rate_hz > 0)
    for (auto& i : images) out.push_back(i.bytes * 8 * rate_hz / 1e6);
  return out;
}

bool client_registry::on_request(const request& r, double now_s) {
  auto k = key(r.client, r.pipeline);
  auto it = clients_.find(k);
  if (it == clients_.end()) {
    if (clients_.size() >= max_) return false;
    it = clients_.emplace(k, entry{}).first;
    it->second.client = r.client;
    it->second.pipeline = r.pipeline;
  }
  auto& e = it->second;
  e.slo_ms = r.slo_ms > 0 ? r.slo_ms : r.default_slo_ms;
  e.rate_hz = r.rate_hz;
  if (r.rtt_ms >= 0) e.rtt_ms = r.rtt_ms;
  e.last_s = now_s;
  ++e.arrivals;
  if (r.pixels > 0) {
    double bpp = static_cast<double>(r.bytes) / static_cast<double>(r.pixels);
    bool first = e.bytes_per_pixel <= 0;
    e.bytes_per_pixel = first ? bpp : 0.8 * e.bytes_per_pixel + 0.2 * bpp;
    e.pixels = first ? static_cast<double>(r.pixels) : 0.8 * e.pixels + 0.2 * static_cast<double>(r.pixels);
    // Per size too: a JPEG's bytes per pixel falls as it grows, so each size the client sends
    // is known by what it weighed, and the plan carries the nearest one to sizes not seen.
    auto px = static_cast<double>(r.pixels);
    auto at = std::find_if(e.images.begin(), e.images.end(), [&](auto& i) { return i.pixels == px; });
    msg::image_bytes seen{px, static_cast<double>(r.bytes)};
    if (at != e.images.end()) {
      seen.bytes = 0.8 * at->bytes + 0.2 * seen.bytes;
      e.images.erase(at);
    }
    e.images.insert(e.images.begin(), seen);
    if (e.images.size() > max_image_sizes) e.images.pop_back();
  }
  if (r.skipped > 0) dips(r.pipeline).outcome(now_s, r.skipped, r.skipped, 0);  // the uplink's
  if (r.waited_ms >= 0)
    e.uplink.add(now_s, r.bytes, r.waited_ms - std::max(0.0, r.queued_ms) - std::max(0.0, e.rtt_ms) / 2);
  return true;
}

std::vector<msg::client_load> client_registry::report(double now_s, double window_s, double forget_s) {
  std::vector<msg::client_load> out;
  for (auto it = clients_.begin(); it != clients_.end();) {
    auto& e = it->second;
    if (e.last_s < now_s - forget_s) {
      it = clients_.erase(it);
      continue;
    }
    msg::client_load l;
    l.client = e.client;
    l.pipeline = e.pipeline;
    l.slo_ms = e.slo_ms;
    l.rate_hz = e.rate_hz > 0 ? e.rate_hz : window_s > 0 ? static_cast<double>(e.arrivals) / window_s : 0;
    l.uplink_mbps = e.reported_mbps = e.uplink.mbps(now_s);
    double q = reported_quantile_[e.pipeline] = dips(e.pipeline).quantile(now_s);  // steps once per call at most
    l.uplink_low_mbps = e.uplink.low_mbps(now_s, q);
    l.wait_share = dips(e.pipeline).wait_share();
    l.headroom_share = dips(e.pipeline).headroom_share();
    l.rtt_ms = std::max(0.0, e.rtt_ms);
    l.bytes_per_pixel = e.bytes_per_pixel;
    l.image_pixels = e.pixels;
    l.images = e.images;
    e.arrivals = 0;
    out.push_back(std::move(l));
    ++it;
  }
  std::sort(out.begin(), out.end(),
            [](auto& a, auto& b) { return std::tie(a.client, a.pipeline) < std::tie(b.client, b.pipeline); });
  return out;
}

bool client_registry::moved(const std::string& client, const std::string& pipeline, double now_s, double factor) const {
  auto it = clients_.find(key(client, pipeline));
  if (it == clients_.end() || it->second.reported_mbps <= 0) return false;
  auto& e = it->second;
  return sched::uplink_moved(e.reported_mbps, e.uplink.mbps(now_s), carried_at_mbps(e.images, e.rate_hz), factor);
}

sched::dip_quantile& client_registry::dips(const std::string& pipeline) {
  auto it = dips_.find(pipeline);
  if (it == dips_.end()) {
    if (dips_.size() >= max_) dips_.clear();  // pipelines are the config's: this is a guard
    it = dips_.emplace(pipeline, sched::dip_quantile(start_quantile_, miss_target_, min_wait_share_)).first;
  }
  return it->second;
}

void client_registry::on_outcome(const std::string& pipeline, bool missed, bool servers, double now_s) {
  dips(pipeline).outcome(now_s, 1, missed ? 1 : 0, missed && servers ? 1 : 0);
}

double client_registry::uplink_quantile(const std::string& pipeline) const {
  auto it = reported_quantile_.find(pipeline);
  return it == reported_quantile_.end() ? -1 : it->second;
}

double client_registry::wait_share(const std::string& pipeline) const {
  auto it = dips_.find(pipeline);
  return reported_quantile_.count(pipeline) && it != dips_.end() ? it->second.wait_share() : -1;
}

double client_registry::headroom_share(const std::string& pipeline) const {
  auto it = dips_.find(pipeline);
  return reported_quantile_.count(pipeline) && it != dips_.end() ? it->second.headroom_share() : -1;
}

void client_registry::apply(const std::vector<msg::client_route>& routes) {
  routes_.clear();
  for (auto& r : routes) routes_[key(r.client, r.pipeline)] = r;
}

const msg::client_route* client_registry::route(const std::string& client, const std::string& pipeline) const {
  if (routes_.empty()) return nullptr;
  auto it = routes_.find(key(client, pipeline));
  return it == routes_.end() ? nullptr : &it->second;
}

}  // namespace sloserve
