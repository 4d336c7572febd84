#include "scheduling/jellyfish_plan.hpp"

#include <algorithm>
#include <cmath>

namespace sloserve::sched {

double jf_input_bytes(const jf_client_state& c, const jf_variant& v, const jf_plan_options& o) {
  double pixels = static_cast<double>(v.height) * static_cast<double>(v.width);
  const std::pair<double, double>* near = nullptr;
  for (auto& i : c.image_bytes)
    if (i.first > 0 && i.second > 0 &&
        (!near || std::abs(std::log(pixels / i.first)) < std::abs(std::log(pixels / near->first))))
      near = &i;
  if (near) return near->second * std::pow(pixels / near->first, 0.9);
  if (c.bytes_per_pixel > 0 && c.image_pixels > 0)
    return c.bytes_per_pixel * c.image_pixels * std::pow(pixels / c.image_pixels, 0.9);
  return (c.bytes_per_pixel > 0 ? c.bytes_per_pixel : o.bytes_per_pixel) * pixels;
}

double jf_budget_ms(const jf_client_state& c, const jf_variant& v, const jf_plan_options& o) {
  if (o.compute_share > 0) return o.compute_share * c.slo_ms;
  double upload_ms = 0;
  if (c.uplink_mbps >= 0) {
    double bytes = jf_input_bytes(c, v, o);
    double bytes_per_s = c.uplink_mbps * 1e6 / 8;
    if (bytes > 0 && bytes_per_s / bytes <= c.rate_hz) return 0;  // the uplink cannot carry this size
    if (c.uplink_low_mbps > 0) bytes_per_s = std::min(bytes_per_s, c.uplink_low_mbps * 1e6 / 8);
    upload_ms = bytes_per_s > 0 ? bytes / bytes_per_s * 1e3 : 0;
  }
  return std::max(0.0, c.slo_ms - upload_ms - std::max(0.0, c.rtt_ms) - o.overhead_ms);
}

jf_plan plan_jellyfish(const std::vector<jf_variant>& zoo, const std::vector<jf_client_state>& clients, size_t workers,
                       std::vector<size_t> previous, const jf_plan_options& o) {
  jf_plan plan;
  if (zoo.empty() || workers == 0) return plan;
  previous.resize(workers, 0);
  for (auto& v : previous) v = std::min(v, zoo.size() - 1);
  std::vector<jf_dnn> dnns;
  for (auto& v : zoo) dnns.push_back({v.accuracy, v.max_batch, v.latency_ms});
  std::vector<jf_client> jc;
  for (auto& c : clients) {
    jf_client x{std::max(1, static_cast<int>(std::lround(c.rate_hz))), {}};
    for (auto& v : zoo) x.budget_ms.push_back(jf_budget_ms(c, v, o));
    jc.push_back(std::move(x));
  }
  auto s = clients.empty() ? evaluate_selection(dnns, jc, previous) : select_dnns(dnns, jc, previous, o.annealing);
  plan.variants = s.dnns;
  plan.quality = s.quality;
  plan.clients.resize(clients.size());
  std::vector<double> carried(workers, 0), capacity(workers, 0);
  for (size_t w = 0; w < workers; ++w) {
    int b = std::max(1, s.mapping[w].batch);
    plan.batch.push_back(b);
    capacity[w] = b / std::max(1e-9, zoo[plan.variants[w]].latency_ms(b)) * 1e3;
    carried[w] = s.mapping[w].rate;
    for (auto c : s.mapping[w].clients) {
      auto& a = plan.clients[c];
      a.worker = w;
      a.variant = plan.variants[w];
      a.budget_ms = jc[c].budget_ms[a.variant];
      a.mapped = true;
    }
  }
  // Clients no DNN can take within their budgets still get served: by the fastest variant
  // running, on its least loaded worker, and they are told its (smallest) size.
  for (size_t c = 0; c < clients.size(); ++c) {
    auto& a = plan.clients[c];
    if (a.mapped) continue;
    size_t best = 0;
    for (size_t w = 1; w < workers; ++w) {
      auto vw = plan.variants[w], vb = plan.variants[best];
      if (vw < vb || (vw == vb && carried[w] / capacity[w] < carried[best] / capacity[best])) best = w;
    }
    a.worker = best;
    a.variant = plan.variants[best];
    a.budget_ms = jc[c].budget_ms[a.variant];
    carried[best] += jc[c].rate;
  }
  return plan;
}

}  // namespace sloserve::sched
