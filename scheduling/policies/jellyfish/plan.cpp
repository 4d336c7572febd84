#include "scheduling/policies/jellyfish/plan.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace sloserve::sched::jellyfish {

double input_bytes(const client_state& c, const variant& v, const plan_options& o) {
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

double budget_ms(const client_state& c, const variant& v, const plan_options& o) {
  if (o.compute_share > 0) return o.compute_share * c.slo_ms;
  double upload_ms = 0;
  if (c.uplink_mbps >= 0) {
    auto sent = v;
    if (o.client_side > 0) sent.height = sent.width = o.client_side;
    double bytes = input_bytes(c, sent, o);
    double bytes_per_s = c.uplink_mbps * 1e6 / 8;
    if (bytes > 0 && bytes_per_s / bytes <= c.rate_hz) return 0;  // the uplink cannot carry this size
    if (c.uplink_low_mbps > 0) bytes_per_s = std::min(bytes_per_s, c.uplink_low_mbps * 1e6 / 8);
    upload_ms = bytes_per_s > 0 ? bytes / bytes_per_s * 1e3 : 0;
  }
  return std::max(0.0, c.slo_ms - upload_ms - std::max(0.0, c.rtt_ms) - o.overhead_ms);
}

double spare_budget_ms(const client_state& c, const plan_options& o) {
  if (c.uplink_mbps <= 0 || c.rate_hz <= 0) return 0;
  double dip = c.uplink_low_mbps > 0 ? std::max(1.0, c.uplink_mbps / c.uplink_low_mbps) : 1;
  dip = std::max(dip, 1 / (1 - std::clamp(o.lift_margin, 0.0, 0.9)));
  return std::max(0.0, c.slo_ms - 1e3 / c.rate_hz * dip - std::max(0.0, c.rtt_ms) - o.overhead_ms);
}

namespace {

// The share of each worker's t(b) the mapping and the lift plan it to carry.
double planned_load(const plan_options& o) {
  return 1 - std::clamp(o.headroom, 0.0, 0.9);
}

// The smallest batch from `from` at which `v` carries `rate` requests/s within `bound_ms`; 0: none.
// A request waits at most for the batch running when it comes, l(b), then runs: `wait` is the
// share of that wait planned for (client_state::wait_share), (1 + wait)·l(b) within the bound.
// On a worker serving one client (`alone`), whose frames come further apart than l(1), a frame
// waits at most for the one before it, which came at least a frame interval earlier less the
// difference of their uploads: within the bound on its upload the budget keeps, nothing, so
// batch 1 fits where l(1) does.
// `load`: the share of b / l(b) it may be planned to carry (plan_options::headroom).
int smallest_batch(const variant& v, int from, double bound_ms, double rate, double wait, bool alone, double load) {
  if (alone && from <= 1 && v.latency_ms(1) <= bound_ms && rate * v.latency_ms(1) <= 1e3 * load) return 1;
  for (int b = from; b <= v.max_batch && (1 + wait) * v.latency_ms(b) <= bound_ms; ++b)
    if (load * b / v.latency_ms(b) * 1e3 >= rate) return b;
  return 0;
}

// Spare compute lifts mapped clients onto more accurate variants (plan_options::spare).
void lift(const std::vector<variant>& zoo, const std::vector<client_state>& clients, const std::vector<client>& jc,
          const plan_options& o, plan& plan, std::vector<double>& carried, std::vector<double>& capacity) {
  size_t workers = plan.variants.size(), top = zoo.size() - 1;
  std::vector<size_t> on(workers, 0);
  // Per worker, the least budget of its clients (what bounds its batch), and the largest share of
  // a batch's wait they plan for.
  std::vector<double> least(workers, std::numeric_limits<double>::infinity()), wait(workers, 0);
  for (size_t c = 0; c < clients.size(); ++c) {
    auto w = plan.clients[c].worker;
    ++on[w];
    least[w] = std::min(least[w], plan.clients[c].budget_ms);
    wait[w] = std::max(wait[w], clients[c].wait_share);
  }
  std::vector<double> spare;
  for (auto& c : clients) spare.push_back(spare_budget_ms(c, o));
  // Whole workers: each raised in place to the most accurate variant at a batch that still
  // carries its clients within every one's spare budget. First, and again once clients moved.
  auto raise_workers = [&] {
    for (size_t w = 0; w < workers; ++w) {
      if (!on[w]) continue;
      double bound = std::numeric_limits<double>::infinity();
      bool all_mapped = true;
      for (size_t c = 0; c < clients.size(); ++c)
        if (plan.clients[c].worker == w) bound = std::min(bound, spare[c]), all_mapped &= plan.clients[c].mapped;
      if (!all_mapped) continue;
      for (size_t v = top; v > plan.variants[w]; --v) {
        int fits = smallest_batch(zoo[v], 1, bound, carried[w], wait[w], on[w] == 1, planned_load(o));
        if (!fits) continue;
        plan.variants[w] = v;
        plan.batch[w] = fits;
        capacity[w] = fits / zoo[v].latency_ms(fits) * 1e3;
        least[w] = bound;
        for (size_t c = 0; c < clients.size(); ++c)
          if (plan.clients[c].worker == w) plan.clients[c].variant = v, plan.clients[c].budget_ms = spare[c];
        break;
      }
    }
  };
  raise_workers();
  std::vector<size_t> order;
  for (size_t c = 0; c < clients.size(); ++c)
    if (plan.clients[c].mapped) order.push_back(c);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return plan.clients[a].variant < plan.clients[b].variant; });
  for (auto c : order) {
    auto& a = plan.clients[c];
    size_t to = workers, to_variant = 0;
    int to_batch = 0;
    // The batch at which worker w running v would carry it too, within every budget there; 0: none.
    auto fit = [&](size_t w, size_t v) {
      return smallest_batch(zoo[v], on[w] ? plan.batch[w] : 1, std::min(least[w], spare[c]), carried[w] + jc[c].rate,
                            std::max(wait[w], clients[c].wait_share), !on[w], planned_load(o));
    };
    for (size_t w = 0; w < workers; ++w) {
      // A worker no client is left on may take the most accurate variant that fits.
      size_t v = on[w] ? plan.variants[w] : top;
      int fits = v > a.variant ? fit(w, v) : 0;
      while (!on[w] && !fits && v > a.variant + 1) fits = fit(w, --v);
      if (!fits || (to < workers && v < to_variant)) continue;
      double load = on[w] ? carried[w] / capacity[w] : 0;
      if (to == workers || v > to_variant || load < (on[to] ? carried[to] / capacity[to] : 0))
        to = w, to_variant = v, to_batch = fits;
    }
    if (to == workers) continue;
    carried[a.worker] -= jc[c].rate;
    if (--on[a.worker] == 0) least[a.worker] = std::numeric_limits<double>::infinity(), wait[a.worker] = 0;
    a.worker = to;
    a.variant = plan.variants[to] = to_variant;
    a.budget_ms = spare[c];
    ++on[to];
    least[to] = std::min(least[to], spare[c]);
    wait[to] = std::max(wait[to], clients[c].wait_share);
    plan.batch[to] = to_batch;
    capacity[to] = to_batch / zoo[a.variant].latency_ms(to_batch) * 1e3;
    carried[to] += jc[c].rate;
  }
  raise_workers();
}

}  // namespace

plan plan_jellyfish(const std::vector<variant>& zoo, const std::vector<client_state>& clients, size_t workers,
                    std::vector<size_t> previous, const plan_options& o) {
  plan plan;
  if (zoo.empty() || workers == 0) return plan;
  previous.resize(workers, 0);
  for (auto& v : previous) v = std::min(v, zoo.size() - 1);
  std::vector<dnn> dnns;
  for (auto& v : zoo) dnns.push_back({v.accuracy, v.max_batch, v.latency_ms, planned_load(o)});
  std::vector<client> jc;
  for (auto& c : clients) {
    client x{std::max(1, static_cast<int>(std::lround(c.rate_hz))), {}};
    for (auto& v : zoo) x.budget_ms.push_back(budget_ms(c, v, o));
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
  if (o.spare && o.compute_share <= 0 && o.client_side <= 0 && !clients.empty())
    lift(zoo, clients, jc, o, plan, carried, capacity);
  match_to_previous(plan, previous);
  return plan;
}

std::vector<variant> clean_zoo(std::vector<variant> zoo) {
  std::stable_sort(zoo.begin(), zoo.end(), [](auto& a, auto& b) {
    if (a.accuracy != b.accuracy) return a.accuracy < b.accuracy;
    return a.latency_ms(1) < b.latency_ms(1);
  });
  std::vector<variant> kept;
  for (size_t j = 0; j < zoo.size(); ++j) {
    bool dominated = false;
    for (size_t i = 0; i < zoo.size() && !dominated; ++i) {
      if (i == j) continue;
      double ai = zoo[i].accuracy, aj = zoo[j].accuracy, li = zoo[i].latency_ms(1), lj = zoo[j].latency_ms(1);
      bool no_worse = ai >= aj && li <= lj;
      dominated = no_worse && (ai > aj || li < lj || i < j);  // of equals, the first stays
    }
    if (!dominated) kept.push_back(zoo[j]);
  }
  for (size_t j = 1; j < kept.size(); ++j)
    kept[j].latency_ms = [own = kept[j].latency_ms, below = kept[j - 1].latency_ms](int b) {
      return std::max(own(b), below(b));
    };
  return kept;
}

void match_to_previous(plan& p, const std::vector<size_t>& previous) {
  size_t n = p.variants.size();
  if (previous.size() != n) return;
  std::vector<size_t> by_old(n), by_new(n);
  for (size_t w = 0; w < n; ++w) by_old[w] = by_new[w] = w;
  std::stable_sort(by_old.begin(), by_old.end(), [&](size_t a, size_t b) { return previous[a] > previous[b]; });
  std::stable_sort(by_new.begin(), by_new.end(), [&](size_t a, size_t b) { return p.variants[a] > p.variants[b]; });
  std::vector<size_t> to(n);
  for (size_t k = 0; k < n; ++k) to[by_new[k]] = by_old[k];
  auto variants = p.variants;
  auto batch = p.batch;
  for (size_t w = 0; w < n; ++w) {
    variants[to[w]] = p.variants[w];
    if (w < p.batch.size() && to[w] < batch.size()) batch[to[w]] = p.batch[w];
  }
  p.variants = std::move(variants);
  p.batch = std::move(batch);
  for (auto& a : p.clients) a.worker = to[a.worker];
}

}  // namespace sloserve::sched::jellyfish
