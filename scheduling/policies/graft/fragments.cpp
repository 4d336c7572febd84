#include "scheduling/policies/graft/fragments.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <tuple>

namespace sloserve::sched::graft {
namespace {

constexpr double inf = std::numeric_limits<double>::infinity();

}  // namespace

alloc allocate(const model& m, int a, int b, double q, double d) {
  alloc best;
  if (a >= b || q <= 0) {
    best.feasible = true;
    return best;
  }
  best.resources = inf;
  for (double s : m.shares)
    for (int batch = 1; batch <= m.max_batch; ++batch) {
      double l = m.latency_s(a, b, batch, s);
      if (l > d) break;  // larger batches take longer
      double per = batch / l;
      int instances = static_cast<int>(std::ceil(q / per - 1e-9));
      // Each instance's batch fills while it runs the last one (queueing within one execution,
      // as the budget of t/2 per part assumes): its share of the rate brings b - 1 more in l.
      if (batch > 1 && q / instances * l < batch - 1) continue;
      double r = instances * s;
      if (r < best.resources - 1e-12 || (r <= best.resources + 1e-12 && instances * per > best.throughput)) {
        best = {true, r, s, batch, instances, instances * per};
      }
    }
  if (!best.feasible) best.resources = 0;
  return best;
}

std::vector<fragment> merge_fragments(const model& m, std::vector<fragment> fragments, double theta) {
  std::stable_sort(fragments.begin(), fragments.end(),
                   [](auto& x, auto& y) { return std::make_tuple(x.p, x.t, -x.q) < std::make_tuple(y.p, y.t, -y.q); });
  std::vector<fragment> out;
  for (auto& f : fragments) {
    if (!out.empty() && out.back().p == f.p && out.back().t == f.t) {
      auto& cur = out.back();
      auto a = allocate(m, cur.p, m.layers, cur.q, cur.t / 2);
      // What the merged fragment's instances carry beyond its demand: room for this one.
      if (a.feasible && cur.q > 0 && (a.throughput - cur.q) / cur.q > theta) {
        cur.q += f.q;
        cur.count += f.count;
        continue;
      }
    }
    out.push_back(f);
  }
  return out;
}

std::vector<std::vector<size_t>> group_fragments(const std::vector<fragment>& fragments, size_t size, weights w) {
  size_t n = fragments.size();
  if (n == 0) return {};
  size = std::max<size_t>(1, size);
  size_t k = std::max<size_t>(1, (n + size / 2) / size);  // groups of about `size`
  if (k == 1) {
    std::vector<size_t> all(n);
    std::iota(all.begin(), all.end(), 0);
    return {all};
  }
  // <p, t, q> normalised by their ranges.
  double lo[3] = {inf, inf, inf}, hi[3] = {-inf, -inf, -inf};
  auto v = [&](size_t i, int c) { return c == 0 ? fragments[i].p : c == 1 ? fragments[i].t : fragments[i].q; };
  for (size_t i = 0; i < n; ++i)
    for (int c = 0; c < 3; ++c) lo[c] = std::min(lo[c], v(i, c)), hi[c] = std::max(hi[c], v(i, c));
  double weight[3] = {w.p, w.t, w.q};
  auto dist = [&](size_t i, size_t j) {
    double s = 0;
    for (int c = 0; c < 3; ++c) {
      double range = hi[c] > lo[c] ? hi[c] - lo[c] : 1;
      s += weight[c] * std::pow((v(i, c) - v(j, c)) / range, 2);
    }
    return std::sqrt(s);
  };
  // Seeds spread over the fragments: the first, then each the farthest from those taken.
  std::vector<std::vector<size_t>> groups;
  std::vector<bool> taken(n, false);
  groups.push_back({0});
  taken[0] = true;
  while (groups.size() < k) {
    size_t far = n;
    double best = -1;
    for (size_t i = 0; i < n; ++i) {
      if (taken[i]) continue;
      double near = inf;
      for (auto& g : groups) near = std::min(near, dist(i, g.front()));
      if (near > best) best = near, far = i;
    }
    groups.push_back({far});
    taken[far] = true;
  }
  // Formula (1) with similarities for weights (s = 1 - distance / the largest distance), as its
  // signs read: a grouping costs the variance of each group's internal weights plus the weights
  // of the edges between groups. Each fragment goes to the group whose cost grows least: the
  // variance it adds there, and its similarity to the fragments already in the other groups.
  double far_d = 0;
  for (size_t i = 0; i < n; ++i)
    for (size_t j = i + 1; j < n; ++j) far_d = std::max(far_d, dist(i, j));
  auto sim = [&](size_t i, size_t j) { return far_d > 0 ? 1 - dist(i, j) / far_d : 1.0; };
  auto variance = [&](const std::vector<size_t>& g) {
    std::vector<double> w;
    for (size_t x = 0; x < g.size(); ++x)
      for (size_t y = x + 1; y < g.size(); ++y) w.push_back(sim(g[x], g[y]));
    if (w.empty()) return 0.0;
    double mean = std::accumulate(w.begin(), w.end(), 0.0) / static_cast<double>(w.size()), var = 0;
    for (double x : w) var += (x - mean) * (x - mean);
    return var / static_cast<double>(w.size());
  };
  size_t cap = (n + k - 1) / k;
  for (size_t i = 0; i < n; ++i) {
    if (taken[i]) continue;
    size_t pick = k;
    double grow = inf;
    for (size_t g = 0; g < k; ++g) {
      if (groups[g].size() >= cap) continue;
      auto with = groups[g];
      with.push_back(i);
      double d = variance(with) - variance(groups[g]);
      for (size_t h = 0; h < k; ++h)
        if (h != g)
          for (auto j : groups[h]) d += sim(i, j);
      if (d < grow) grow = d, pick = g;
    }
    groups[pick].push_back(i);
  }
  return groups;
}

namespace {

// allocate() memoised: re-alignments of overlapping groups ask for the same ranges, rates and
// budgets many times over.
struct alloc_cache {
  const model& m;
  std::map<std::tuple<int, int, double, double>, alloc> memo;
  alloc operator()(int a, int b, double q, double d) {
    auto key = std::make_tuple(a, b, q, d);
    if (auto it = memo.find(key); it != memo.end()) return it->second;
    return memo[key] = allocate(m, a, b, q, d);
  }
};

// The fragments of `group` with p > `above`, re-aligned (memoised by `above`).
struct realigner {
  const model& m;
  const std::vector<fragment>& group;
  int sweep;
  alloc_cache& allocate;
  std::map<int, plan> memo;

  plan above(int x) {
    if (auto it = memo.find(x); it != memo.end()) return it->second;
    std::vector<size_t> idx;
    for (size_t i = 0; i < group.size(); ++i)
      if (group[i].p > x) idx.push_back(i);
    plan best;
    if (idx.empty()) {
      best.feasible = true;
      return memo[x] = best;
    }
    best.resources = inf;
    int pmin = m.layers;
    for (auto i : idx) pmin = std::min(pmin, group[i].p);
    for (int ps = pmin; ps <= m.layers; ++ps) {
      std::vector<size_t> a;
      for (auto i : idx)
        if (group[i].p <= ps) a.push_back(i);
      auto mine = at(ps, a);
      if (!mine.feasible) continue;
      auto rest = above(ps);
      if (!rest.feasible || mine.resources + rest.resources >= best.resources - 1e-12) continue;
      best = mine;
      best.resources += rest.resources;
      best.stages.insert(best.stages.end(), rest.stages.begin(), rest.stages.end());
    }
    if (!std::isfinite(best.resources)) best = {};
    return memo[x] = best;
  }

  // Fragments `a` (p_i <= ps) re-aligned at ps: each runs [p_i, ps) within t_i/2 - d_s, one
  // shared stage [ps, end) within d_s over their traffic; ps = end: each runs alone. The
  // tightest budget bounds d_s, so the tightest fragments may instead run alone.
  plan at(int ps, std::vector<size_t> a) {
    std::stable_sort(a.begin(), a.end(), [&](size_t x, size_t y) { return group[x].t < group[y].t; });
    plan best = shared_at(ps, a);
    for (size_t k = 1; k < a.size() && ps < m.layers; ++k) {
      std::vector<size_t> alone(a.begin(), a.begin() + static_cast<std::ptrdiff_t>(k)),
          rest(a.begin() + static_cast<std::ptrdiff_t>(k), a.end());
      auto x = shared_at(m.layers, alone);
      if (!x.feasible) continue;
      auto y = shared_at(ps, rest);
      if (!y.feasible || x.resources + y.resources >= (best.feasible ? best.resources : inf) - 1e-12) continue;
      x.resources += y.resources;
      x.stages.insert(x.stages.end(), y.stages.begin(), y.stages.end());
      best = std::move(x);
    }
    return best;
  }

  plan shared_at(int ps, const std::vector<size_t>& a) {
    plan best;
    best.resources = inf;
    double half = inf, rate = 0;
    for (auto i : a) half = std::min(half, group[i].t / 2), rate += group[i].q;
    auto parts = [&](double ds, plan& plan) {
      for (auto i : a) {
        if (group[i].p >= ps) continue;
        auto al = allocate(group[i].p, ps, group[i].q, group[i].t / 2 - ds);
        if (!al.feasible) return false;
        plan.resources += al.resources;
        plan.stages.push_back({group[i].p, ps, {i}, group[i].t / 2 - ds, al});
      }
      return true;
    };
    if (ps >= m.layers) {
      plan plan;
      if (parts(0, plan)) plan.feasible = true, best = plan;
    } else {
      for (int k = 1; k <= sweep; ++k) {
        double ds = half * k / sweep;
        auto shared = allocate(ps, m.layers, rate, ds);
        if (!shared.feasible) continue;
        plan plan;
        plan.resources = shared.resources;
        plan.stages.push_back({ps, m.layers, a, ds, shared});
        if (!parts(ds, plan) || plan.resources >= best.resources - 1e-12) continue;
        plan.feasible = true;
        best = std::move(plan);
      }
    }
    if (!best.feasible) best = {};
    return best;
  }
};

plan realign_cached(const model& m, const std::vector<fragment>& group, int sweep, alloc_cache& cache) {
  realigner r{m, group, sweep, cache, {}};
  return r.above(-1);
}

}  // namespace

plan realign(const model& m, const std::vector<fragment>& group, int sweep) {
  alloc_cache cache{m, {}};
  return realign_cached(m, group, sweep, cache);
}

std::vector<std::vector<size_t>> refine_groups(const model& m, const std::vector<fragment>& fragments,
                                               std::vector<std::vector<size_t>> groups, size_t size, int budget,
                                               int sweep) {
  size_t cap = std::max<size_t>(1, size);
  for (auto& g : groups) cap = std::max(cap, g.size());
  std::map<std::vector<size_t>, double> memo;
  alloc_cache cache{m, {}};
  auto cost = [&](std::vector<size_t> g) {
    if (g.empty()) return 0.0;
    std::sort(g.begin(), g.end());
    if (auto it = memo.find(g); it != memo.end()) return it->second;
    if (budget-- <= 0) return inf;  // out of evaluations: no move judged further is taken
    std::vector<fragment> sub;
    for (auto i : g) sub.push_back(fragments[i]);
    auto p = realign_cached(m, sub, sweep, cache);
    return memo[g] = p.feasible ? p.resources : inf;
  };
  auto without = [](std::vector<size_t> g, size_t i) {
    g.erase(std::find(g.begin(), g.end(), i));
    return g;
  };
  for (bool moved = true; moved && budget > 0;) {
    moved = false;
    for (size_t g = 0; g < groups.size() && !moved; ++g)
      for (size_t x = 0; x < groups[g].size() && !moved; ++x) {
        size_t i = groups[g][x];
        auto from = without(groups[g], i);
        double before_g = cost(groups[g]), after_g = cost(from);
        // Into another group with room, or into a group of its own.
        for (size_t h = 0; h <= groups.size() && !moved; ++h) {
          if (h == g || (h < groups.size() && groups[h].size() >= cap) || (h == groups.size() && from.empty()))
            continue;
          auto to = h < groups.size() ? groups[h] : std::vector<size_t>{};
          double before = before_g + cost(to);
          to.push_back(i);
          if (after_g + cost(to) >= before - 1e-9) continue;
          if (h == groups.size()) groups.emplace_back();
          groups[h] = std::move(to);
          groups[g] = from;
          moved = true;
        }
      }
    // Or two fragments of two groups trade places.
    for (size_t g = 0; g < groups.size() && !moved; ++g)
      for (size_t h = g + 1; h < groups.size() && !moved; ++h) {
        double before = cost(groups[g]) + cost(groups[h]);
        for (size_t x = 0; x < groups[g].size() && !moved; ++x)
          for (size_t y = 0; y < groups[h].size() && !moved; ++y) {
            auto a = groups[g], b = groups[h];
            std::swap(a[x], b[y]);
            if (cost(a) + cost(b) >= before - 1e-9) continue;
            groups[g] = std::move(a), groups[h] = std::move(b);
            moved = true;
          }
      }
    groups.erase(std::remove_if(groups.begin(), groups.end(), [](auto& g) { return g.empty(); }), groups.end());
  }
  return groups;
}

plan plan_graft(const model& m, const std::vector<fragment>& fragments, std::vector<fragment>* merged,
                size_t group_size, double theta, weights w, int refine_budget) {
  auto frags = merge_fragments(m, fragments, theta);
  plan out;
  out.feasible = true;
  auto groups = group_fragments(frags, group_size, w);
  if (refine_budget > 0) groups = refine_groups(m, frags, std::move(groups), group_size, refine_budget);
  for (auto& g : groups) {
    std::vector<fragment> sub;
    for (auto i : g) sub.push_back(frags[i]);
    auto p = realign(m, sub);
    if (!p.feasible) return {};
    out.resources += p.resources;
    for (auto& s : p.stages) {
      for (auto& f : s.fragments) f = g[f];
      out.stages.push_back(std::move(s));
    }
  }
  if (merged) *merged = std::move(frags);
  return out;
}

plan gslice_plan(const model& m, const std::vector<fragment>& fragments) {
  plan out;
  out.feasible = true;
  for (size_t i = 0; i < fragments.size(); ++i) {
    auto& f = fragments[i];
    auto a = allocate(m, f.p, m.layers, f.q, f.t / 2);
    if (!a.feasible) return {};
    out.resources += a.resources;
    out.stages.push_back({f.p, m.layers, {i}, f.t / 2, a});
  }
  return out;
}

double brute_force_plan(const model& m, const std::vector<fragment>& fragments) {
  size_t n = fragments.size();
  if (n == 0) return 0;
  size_t full = (size_t{1} << n) - 1;
  std::vector<double> block(full + 1, inf), best(full + 1, inf);
  for (size_t mask = 1; mask <= full; ++mask) {
    std::vector<fragment> sub;
    for (size_t i = 0; i < n; ++i)
      if (mask >> i & 1) sub.push_back(fragments[i]);
    auto p = realign(m, sub);
    if (p.feasible) block[mask] = p.resources;
  }
  best[0] = 0;
  for (size_t mask = 1; mask <= full; ++mask) {
    size_t low = mask & (~mask + 1);
    for (size_t sub = mask; sub; sub = (sub - 1) & mask)
      if (sub & low) best[mask] = std::min(best[mask], block[sub] + best[mask ^ sub]);
  }
  return best[full];
}

}  // namespace sloserve::sched::graft
