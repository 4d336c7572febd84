#include "scheduling/autoscaler.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <optional>

#include "scheduling/biscale.hpp"
#include "scheduling/fa2.hpp"
#include "scheduling/sponge.hpp"

namespace sloserve::sched {

std::pair<int, int> one_core_instances(const core_latency& l, double rate, double budget_ms, int max_batch) {
  int best_n = 0, best_b = 0;
  for (int b = 1; b <= max_batch; ++b) {
    if (2 * l.at(b, 1) > budget_ms) break;  // a request may wait for one batch, then run in the next
    int n = rate > 0 ? static_cast<int>(std::ceil(rate / l.throughput(b, 1) - 1e-9)) : 1;
    n = std::max(n, 1);
    if (!best_b || n < best_n) best_n = n, best_b = b;
  }
  return {best_n, best_b};
}

namespace {
// The largest batch, at most `cap`, whose wait-then-run time 2·l(b, cores) fits the budget; 0
// when not even one fits.
int batch_within(const core_latency& l, int cores, double budget_ms, int cap) {
  int b = 0;
  while (b < cap && 2 * l.at(b + 1, cores) <= budget_ms) ++b;
  return b;
}
}  // namespace

int one_core_batch(const core_latency& l, double budget_ms, int cap) {
  return batch_within(l, 1, budget_ms, cap);
}

double one_core_throughput(const core_latency& l, double budget_ms, int max_batch) {
  // b / l(b, 1) grows with b (l is affine in b), so the largest batch that fits is the best.
  int b = one_core_batch(l, budget_ms, max_batch);
  return b ? l.throughput(b, 1) : 0;
}

int elastic_batch(const core_latency& l, int cores, double budget_ms, int chosen, int max_batch) {
  // l(b, c) grows with b, so the batches that fit are 1..batch_within.
  return std::max({1, chosen, batch_within(l, cores, budget_ms, max_batch)});
}

std::vector<stage_shape> fa2_shapes(const std::vector<scale_stage>& stages, double slo_ms) {
  std::vector<fa2_stage> fs;
  for (auto& s : stages) {
    fa2_stage f;
    std::vector<int> b;
    std::vector<double> lat;
    for (int k = 1; k <= s.max_batch; ++k) b.push_back(k), lat.push_back(s.l.at(k, 1));
    if (s.max_batch >= 3) f.d = fit_quadratic(b, lat);
    if (!f.d.ok) f.d = {0, s.l.at(2, 1) - s.l.at(1, 1), 2 * s.l.at(1, 1) - s.l.at(2, 1), 0, 0, true};
    f.rate = std::max(s.predicted, s.rate);
    f.max_batch = s.max_batch;
    f.children = s.children;
    f.slo_ms = s.slo_ms;
    fs.push_back(std::move(f));
  }
  auto plan = fa2_dag(fs, static_cast<int>(std::floor(slo_ms)));
  std::vector<stage_shape> out(stages.size());
  std::vector<double> slots(stages.size(), 0);
  for (size_t i = 0; i < stages.size(); ++i) {
    auto& o = out[i];
    if (plan.feasible) {
      o.batch = o.horizontal_batch = o.planned_batch = std::max(1, plan.batch[i]);
      o.instances = std::max(1, plan.instances[i]);
      slots[i] = std::max(1, fa2_slots(fs[i], o.batch));
    } else {
      o.batch = o.horizontal_batch = o.planned_batch = 1;
      o.instances = std::max(1, static_cast<int>(std::ceil(fs[i].rate / stages[i].l.throughput(1, 1) - 1e-9)));
      slots[i] = std::max(1.0, stages[i].l.at(1, 1));
    }
  }
  // Stage budgets in proportion to the time the plan gives each stage, scaled so that the path
  // with the least slack takes the whole of the SLO. With per-path SLOs, each stage by the least
  // (leaf's SLO / longest path to that leaf) over the leaves it leads to: every stage of a path
  // to leaf L then scales by at most SLO_L / its planned time, so the path fits its own SLO,
  // and stages off a tight path keep the slack of theirs.
  std::vector<double> reach(stages.size(), -1);  // the longest path ending at each stage, in slots
  std::function<double(size_t)> up = [&](size_t s) {
    if (reach[s] >= 0) return reach[s];
    double above = 0;
    for (size_t u = 0; u < stages.size(); ++u)
      if (std::find(stages[u].children.begin(), stages[u].children.end(), s) != stages[u].children.end())
        above = std::max(above, up(u));
    return reach[s] = slots[s] + above;
  };
  bool per_path = false;
  std::vector<double> leaf_scale(stages.size(), INFINITY);  // SLO_L / reach_L, per leaf
  for (size_t s = 0; s < stages.size(); ++s) {
    if (!stages[s].children.empty() || up(s) <= 0) continue;
    per_path = per_path || (stages[s].slo_ms > 0 && stages[s].slo_ms < slo_ms);
    double own = stages[s].slo_ms > 0 ? std::min(stages[s].slo_ms, slo_ms) : slo_ms;
    leaf_scale[s] = own / up(s);
  }
  std::vector<double> scale(stages.size(), -1);  // per stage: the least over the leaves below it
  std::function<double(size_t)> down = [&](size_t s) {
    if (scale[s] >= 0) return scale[s];
    double least = leaf_scale[s];
    for (auto c : stages[s].children) least = std::min(least, down(c));
    return scale[s] = least;
  };
  double uniform = INFINITY;
  for (auto k : leaf_scale) uniform = std::min(uniform, k);
  for (size_t i = 0; i < stages.size(); ++i) {
    double k = per_path ? down(i) : uniform;
    out[i].budget_ms = std::isfinite(k) ? slots[i] * k : slo_ms;
    out[i].batch = out[i].horizontal_batch =
        elastic_batch(stages[i].l, 1, out[i].budget_ms, out[i].batch, stages[i].max_batch);
  }
  return out;
}

double arrival_budget_ms(const scale_stage& s, double quantile) {
  if (s.arrival_budgets_ms.empty()) return s.budget_ms;
  auto a = s.arrival_budgets_ms;
  auto k = static_cast<size_t>(std::floor(std::clamp(quantile, 0.0, 1.0) * static_cast<double>(a.size() - 1)));
  std::nth_element(a.begin(), a.begin() + static_cast<std::ptrdiff_t>(k), a.end());
  return a[k];
}

std::vector<double> sponge_budgets(const scale_stage& s) {
  if (s.queue_budgets_ms.empty() && s.arrival_budgets_ms.empty())
    return std::vector<double>(static_cast<size_t>(std::max(1, s.queued)), s.budget_ms);
  // A request already past its deadline is dropped, not planned for.
  std::vector<double> out;
  std::copy_if(s.queue_budgets_ms.begin(), s.queue_budgets_ms.end(), std::back_inserter(out),
               [](double b) { return b > 0; });
  out.push_back(arrival_budget_ms(s));
  return out;
}

stage_shape sponge_shape(const scale_stage& s, int max_cores) {
  auto c = sponge_decide(s.l, s.rate, sponge_budgets(s), max_cores, s.max_batch);
  stage_shape out;
  out.cores = std::max(1, c.cores);
  out.batch = out.horizontal_batch = elastic_batch(s.l, out.cores, arrival_budget_ms(s), c.batch, s.max_batch);
  return out;
}

namespace {
stage_shape biscale_vertical_sized(const scale_stage& s, const stage_shape& now, int max_cores);
}

stage_shape biscale_vertical(const scale_stage& s, const stage_shape& now, int max_cores) {
  auto out = biscale_vertical_sized(s, now, max_cores);
  out.batch = elastic_batch(s.l, out.cores, s.budget_ms, out.batch, s.max_batch);
  // Up to the largest batch the budget allows one core, never above it unless already there
  // (what they cannot carry went to instance 0 above).
  out.horizontal_batch = std::max(out.horizontal_batch, one_core_batch(s.l, s.budget_ms, s.max_batch));
  return out;
}

namespace {
stage_shape biscale_vertical_sized(const scale_stage& s, const stage_shape& now, int max_cores) {
  auto out = now;
  out.base_instances = std::clamp(now.base_instances, 1, std::max(1, now.instances));
  out.instances = out.base_instances;
  out.vertical = 1;
  // The one-core instances run the largest batch the budget now allows (it shrinks when uploads
  // take longer); when not even one fits, they carry nothing and instance 0 carries it all.
  int fits = one_core_batch(s.l, s.budget_ms, std::max(1, now.horizontal_batch));
  out.horizontal_batch = std::max(1, fits);
  double horizontal = fits ? (out.instances - 1) * s.l.throughput(fits, 1) : 0;
  double excess = std::max(0.0, s.rate - horizontal);
  auto c = sponge_decide(s.l, excess, sponge_budgets(s), max_cores, s.max_batch);
  if (c.feasible || excess <= 0) {
    out.cores = std::max(1, c.cores);
    out.batch = std::max(1, c.batch);
    return out;
  }
  // More than instance 0 can take at max_cores: the running instances grow in place together
  // (thesis P4.5.1.2: no instance to start, so no cold start), the fewest of them first, each at
  // the fewest cores that carry an even share of what the one-core ones beside them do not.
  int n = out.instances;
  for (int v = 2; v <= n; ++v) {
    double others = fits ? (n - v) * s.l.throughput(fits, 1) : 0;
    auto d = sponge_decide(s.l, std::max(0.0, s.rate - others) / v, sponge_budgets(s), max_cores, s.max_batch);
    if (!d.feasible) continue;
    out.vertical = v;
    out.cores = std::max(1, d.cores);
    out.batch = std::max(1, d.batch);
    return out;
  }
  if (n > 1) {
    // Not even all of them at max_cores: they run there, and one-core instances start for the
    // rest now rather than at the next horizontal period.
    int b = std::max(1, batch_within(s.l, max_cores, s.budget_ms, s.max_batch));
    double rest = std::max(0.0, s.rate - n * s.l.throughput(b, max_cores));
    auto [more, hb] = one_core_instances(s.l, rest, s.budget_ms, s.max_batch);
    if (!more) hb = 1, more = static_cast<int>(std::ceil(rest / s.l.throughput(1, 1) - 1e-9));
    out.vertical = n;
    out.cores = max_cores;
    out.batch = b;
    out.instances += more;
    out.horizontal_batch = std::max(1, hb);
    return out;
  }
  // Instance 0 alone: it takes the most it can at max_cores, one-core instances start for the
  // rest now.
  auto b = biscale(s.l, excess, s.budget_ms, max_cores, s.max_batch);
  if (!b.feasible) {
    out.cores = std::max(1, c.cores);
    out.batch = std::max(1, c.batch);
    auto [n, hb] = one_core_instances(s.l, excess, s.budget_ms, s.max_batch);
    if (!n) hb = 1, n = std::max(1, static_cast<int>(std::ceil(excess / s.l.throughput(1, 1) - 1e-9)));
    out.instances += n;
    if (now.instances <= 1) out.horizontal_batch = hb;
    return out;
  }
  out.cores = std::max(1, b.cores);
  out.batch = std::max(1, b.batch);
  if (b.instances > 0) {
    if (out.instances > 1) {
      // One-core instances already run at their batch: the new ones join them at it.
      double rest = excess - b.vertical_rate;
      out.instances += static_cast<int>(std::ceil(rest / s.l.throughput(out.horizontal_batch, 1) - 1e-9));
    } else {
      out.instances += b.instances;
      out.horizontal_batch = std::max(1, b.instance_batch);
    }
  }
  return out;
}

// n one-core instances at their best batch beside instance 0, which takes the rest in place at
// its fewest cores: the n with the fewest cores in all, then the most spare capacity. Nullopt
// when not even max_cores in place carries what one core cannot.
std::optional<stage_shape> cheapest_mix(const scale_stage& s, double rate, int max_cores) {
  int b1 = one_core_batch(s.l, s.budget_ms, s.max_batch);
  double t1 = b1 ? s.l.throughput(b1, 1) : 0;
  int most = t1 > 0 ? static_cast<int>(std::ceil(rate / t1 - 1e-9)) : 0;
  std::optional<stage_shape> best;
  double best_spare = 0;
  for (int n = 0; n <= most; ++n) {
    double rest = std::max(0.0, rate - n * t1);
    int c0 = 0, b0 = 0;
    for (int c = 1; c <= std::max(1, max_cores) && !c0; ++c) {
      int b = batch_within(s.l, c, s.budget_ms, s.max_batch);
      if (b && (rest <= 0 || s.l.throughput(b, c) >= rest)) c0 = c, b0 = b;
    }
    if (!c0) continue;
    double spare = s.l.throughput(b0, c0) + n * t1 - rate;
    if (best && (c0 + n > best->total_cores() || (c0 + n == best->total_cores() && spare <= best_spare + 1e-9)))
      continue;
    best = stage_shape{};
    best->instances = best->base_instances = n + 1;
    best->cores = c0;
    best->batch = b0;
    best->horizontal_batch = std::max(1, b1);
    best_spare = spare;
  }
  return best;
}
}  // namespace

stage_shape biscale_horizontal(const scale_stage& s, const stage_shape& now, bool stable, int max_cores) {
  if (!stable) return now;
  auto predicted = cheapest_mix(s, std::max(s.predicted, s.rate), max_cores);
  auto current = cheapest_mix(s, s.rate, max_cores);
  // Stable also means that the predicted rate gives the plan the current one does; while it
  // asks for more (a burst still in the predictor's memory), instance 0 carries the load in
  // place and the surge, if it comes, is met vertically.
  if (!predicted || !current || predicted->total_cores() != current->total_cores()) return now;
  return *predicted;
}

double shape_capacity(const core_latency& l, const stage_shape& s) {
  if (s.instances < 1) return 0;
  int v = s.in_place();
  return v * l.throughput(s.batch, s.cores) + (s.instances - v) * l.throughput(s.horizontal_batch, s.horizontal_cores);
}

bool stable_load(const std::deque<double>& rates, double band) {
  if (rates.empty()) return false;
  double mean = 0;
  for (auto r : rates) mean += r;
  mean /= static_cast<double>(rates.size());
  auto [lo, hi] = std::minmax_element(rates.begin(), rates.end());
  if (mean <= 0) return true;
  return *hi <= (1 + band) * mean && *lo >= (1 - band) * mean;
}

}  // namespace sloserve::sched
