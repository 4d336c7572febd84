#include "scheduling/fa2.hpp"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <functional>

namespace sloserve::sched {
namespace {
constexpr int never = INT_MAX / 4;
}

int fa2_slots(const fa2_stage& s, int b) {
  double d = s.d.at(b);
  if (b > 1 && s.rate <= 0) return never;
  double q = b > 1 ? (b - 1) * 1000.0 / s.rate : 0;
  return static_cast<int>(std::ceil(d + q - 1e-9));
}

int fa2_instances(const fa2_stage& s, int b) {
  double d = s.d.at(b);
  if (s.rate <= 0) return 0;
  double h = d > 0 ? b * 1000.0 / d : INFINITY;
  return static_cast<int>(std::ceil(s.rate / h - 1e-9));
}

namespace {

// Mean d(b) over b = 1..16: how much of a path's time a stage tends to take.
double intensity(const fa2_stage& s) {
  double sum = 0;
  for (int b = 1; b <= 16; ++b) sum += std::max(0.0, s.d.at(b));
  return sum / 16;
}

struct piece {
  std::vector<size_t> nodes;
  double slo = 0;
};

// The DP of fa2_tree with the transformation's caps and floors; `root` is the forest's root.
fa2_plan solve(const std::vector<fa2_stage>& stages, const std::vector<std::vector<size_t>>& children,
               const std::vector<int>& cap, const std::vector<int>& floor_left, size_t root, int slo_ms) {
  fa2_plan plan;
  if (slo_ms < 0 || root >= stages.size()) return plan;
  auto T = static_cast<size_t>(slo_ms);
  std::vector<std::vector<int>> opt(stages.size()), pick(stages.size());
  // The budget a stage works with when its parent leaves it t. A capped leaf keeps the true
  // budget and takes at most its cap itself: its floor (a per-path SLO, counted from t_max) then
  // holds exactly, where a capped budget would count it from the cap.
  auto given = [&](size_t s, size_t t) {
    return cap[s] >= 0 && !children[s].empty() ? std::min(t, static_cast<size_t>(cap[s])) : t;
  };
  std::function<void(size_t)> fill = [&](size_t s) {
    for (auto c : children[s]) fill(c);
    opt[s].assign(T + 1, never);
    pick[s].assign(T + 1, 0);
    for (int b = 1; b <= stages[s].max_batch; ++b) {
      auto slots = fa2_slots(stages[s], b);
      if (slots < 0 || static_cast<size_t>(slots) > T) continue;
      if (children[s].empty() && cap[s] >= 0 && slots > cap[s]) continue;
      auto n = fa2_instances(stages[s], b);
      for (auto t = static_cast<size_t>(slots); t <= T; ++t) {
        auto left = t - static_cast<size_t>(slots);
        if (static_cast<long>(left) < floor_left[s]) continue;
        long cost = n;
        for (auto c : children[s]) cost += opt[c][given(c, left)];
        if (cost < opt[s][t]) opt[s][t] = static_cast<int>(std::min<long>(cost, never)), pick[s][t] = b;
      }
    }
  };
  fill(root);
  auto top = given(root, T);
  if (opt[root][top] >= never) return plan;
  plan.feasible = true;
  plan.total = opt[root][top];
  plan.batch.assign(stages.size(), 0);
  plan.instances.assign(stages.size(), 0);
  std::function<void(size_t, size_t)> back = [&](size_t s, size_t t) {
    int b = pick[s][t];
    plan.batch[s] = b;
    plan.instances[s] = fa2_instances(stages[s], b);
    for (auto c : children[s]) back(c, given(c, t - static_cast<size_t>(fa2_slots(stages[s], b))));
  };
  back(root, top);
  return plan;
}

}  // namespace

fa2_plan fa2_tree(const std::vector<fa2_stage>& stages, size_t root, int slo_ms) {
  std::vector<std::vector<size_t>> children;
  std::vector<int> floor_left(stages.size(), 0);
  for (size_t k = 0; k < stages.size(); ++k) {
    children.push_back(stages[k].children);
    // A leaf with its own SLO leaves the rest of t_max unspent.
    if (auto own = stages[k].slo_ms; own > 0 && stages[k].children.empty())
      floor_left[k] = std::max(0, slo_ms - static_cast<int>(std::floor(own + 1e-9)));
  }
  return solve(stages, children, std::vector<int>(stages.size(), -1), floor_left, root, slo_ms);
}

namespace {

// Every root-to-leaf path of the DAG `children`, each with its SLO: its leaf's, else the whole.
std::vector<piece> root_to_leaf(const std::vector<fa2_stage>& stages, const std::vector<std::vector<size_t>>& children,
                                const std::vector<size_t>& roots, int slo_ms) {
  std::vector<piece> pieces;
  std::function<void(std::vector<size_t>&)> walk = [&](std::vector<size_t>& path) {
    auto s = path.back();
    auto own = stages[s].slo_ms;
    if (children[s].empty())
      pieces.push_back({path, own > 0 ? std::min(own, static_cast<double>(slo_ms)) : static_cast<double>(slo_ms)});
    for (auto c : children[s]) {
      path.push_back(c);
      walk(path);
      path.pop_back();
    }
  };
  for (auto r : roots) {
    std::vector<size_t> path{r};
    walk(path);
  }
  return pieces;
}

// Where piece `p` takes edge u -> v: the index of v in it; 0: it does not.
size_t uses(const piece& p, size_t u, size_t v) {
  for (size_t i = 0; i + 1 < p.nodes.size(); ++i)
    if (p.nodes[i] == u && p.nodes[i + 1] == v) return i + 1;
  return size_t{0};
}

// Cuts edge u -> v out of every piece that takes it: the two halves share its SLO in proportion
// to their intensity (their length where none has any).
std::vector<piece> cut_pieces(std::vector<piece> pieces, size_t u, size_t v, const std::vector<fa2_stage>& stages) {
  std::vector<piece> next;
  for (auto& p : pieces) {
    auto at = uses(p, u, v);
    if (!at) {
      next.push_back(std::move(p));
      continue;
    }
    piece a{{p.nodes.begin(), p.nodes.begin() + static_cast<long>(at)}, 0};
    piece b{{p.nodes.begin() + static_cast<long>(at), p.nodes.end()}, 0};
    double ia = 0, ib = 0;
    for (auto s : a.nodes) ia += intensity(stages[s]);
    for (auto s : b.nodes) ib += intensity(stages[s]);
    double share =
        ia + ib > 0 ? ia / (ia + ib) : static_cast<double>(a.nodes.size()) / static_cast<double>(p.nodes.size());
    a.slo = p.slo * share;
    b.slo = p.slo - a.slo;
    next.push_back(std::move(a));
    next.push_back(std::move(b));
  }
  return next;
}

}  // namespace

fa2_transform fa2_make_tree(const std::vector<fa2_stage>& stages, int slo_ms) {
  fa2_transform out;
  size_t n = stages.size();
  out.children.resize(n);
  std::vector<std::vector<size_t>> parents(n);
  for (size_t s = 0; s < n; ++s)
    for (auto c : stages[s].children)
      if (c < n && std::find(out.children[s].begin(), out.children[s].end(), c) == out.children[s].end()) {
        out.children[s].push_back(c);
        parents[c].push_back(s);
      }
  for (size_t s = 0; s < n; ++s)
    if (parents[s].empty()) out.roots.push_back(s);
  auto pieces = root_to_leaf(stages, out.children, out.roots, slo_ms);
  for (;;) {
    auto join = std::find_if(parents.begin(), parents.end(), [](auto& ps) { return ps.size() > 1; });
    if (join == parents.end()) break;
    auto v = static_cast<size_t>(join - parents.begin());
    // Its incoming edge used by the fewest pieces (first in parent order on ties).
    size_t best = 0, best_count = SIZE_MAX;
    for (size_t k = 0; k < join->size(); ++k) {
      size_t count = 0;
      for (auto& p : pieces) count += uses(p, (*join)[k], v) != 0;
      if (count < best_count) best = k, best_count = count;
    }
    auto u = (*join)[best];
    join->erase(join->begin() + static_cast<long>(best));
    std::erase(out.children[u], v);
    out.cuts.push_back({u, v});
    pieces = cut_pieces(std::move(pieces), u, v, stages);
  }
  out.cap_ms.assign(n, -1);
  out.floor_ms.assign(n, 0);
  std::vector<bool> is_root(n, false);
  for (auto r : out.roots) is_root[r] = true;
  for (auto& p : pieces) {
    auto share = static_cast<int>(std::floor(p.slo + 1e-9));
    if (is_root[p.nodes.front()]) {
      if (share < slo_ms) out.floor_ms[p.nodes.back()] = std::max(out.floor_ms[p.nodes.back()], slo_ms - share);
    } else {
      auto& cap = out.cap_ms[p.nodes.front()];
      cap = cap < 0 ? share : std::min(cap, share);
    }
  }
  return out;
}

fa2_plan fa2_dag(const std::vector<fa2_stage>& stages, int slo_ms) {
  auto tr = fa2_make_tree(stages, slo_ms);
  if (tr.roots.empty()) return {};
  if (tr.roots.size() == 1) return solve(stages, tr.children, tr.cap_ms, tr.floor_ms, tr.roots[0], slo_ms);
  // Several roots: a virtual root that takes no time and needs no instance.
  auto all = stages;
  all.push_back({});
  auto children = tr.children;
  children.push_back(tr.roots);
  auto cap = tr.cap_ms, floor_left = tr.floor_ms;
  cap.push_back(-1);
  floor_left.push_back(0);
  auto plan = solve(all, children, cap, floor_left, stages.size(), slo_ms);
  if (plan.feasible) plan.batch.pop_back(), plan.instances.pop_back();
  return plan;
}

}  // namespace sloserve::sched
