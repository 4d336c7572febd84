#pragma once
// Graft's serving of partitioned DNNs (seed 003), as pure functions.
//
// A mobile client runs layers [0, p) of a DNN and the server the rest: a fragment <p, t, q> is
// the layer where the server starts, the time left to it (s) and its rate (requests/s). The
// server runs layer ranges as instances at a GPU share s in (0, 1] (as MPS gives) and a batch;
// resources are sum of share x instances. A part of a request's work gets, as in the paper,
// half its time budget for execution (the other half is the worst-case queueing).
//
// - allocate: the least share x instances that run layers [a, b) at rate q with every batch
//   done within d, and batches no larger than each instance's share of the rate fills while it
//   runs the previous one (so a slow fragment alone cannot batch: what re-alignment gains).
// - merge_fragments: fragments with the same (p, t) are merged, in descending rate, while the
//   merged fragment's resource margin (achievable over demanded throughput, less 1) stays above
//   theta = 0.2: merging then uses capacity already paid for.
// - group_fragments: groups of about `size` similar fragments, by the greedy balanced graph
//   partitioning the paper describes (seeds spread over the fragments, then each fragment to the
//   group whose cost by Formula (1) grows least: the variance of each group's internal edge
//   weights plus the weights of the edges between groups). The paper weighs edges by the
//   (weighted) Euclidean distance over <p, t, q>, which with those signs would gather dissimilar
//   fragments; here the weight is a similarity, 1 - distance / the largest distance (each
//   factor normalised by its range and weighted by `weights`), so the formula reads as printed.
// - realign: per group, a shared layer p*; fragments with p_i <= p* run [p_i, p*) each and one
//   shared stage runs [p*, end) over their traffic, with d_i + d_s <= t_i / 2; fragments with
//   p_i > p* are re-aligned among themselves (the printed recursion, fixed: p_i <= p*, candidate
//   plans accumulated, compared by sum of share x instances). For a p*, the parts' budgets are
//   t_i/2 - d_s, so the search is a sweep over d_s.
// - gslice_plan: the baseline without re-alignment: every fragment runs [p_i, end) alone within
//   t_i / 2, its share and batch tuned (GSLICE-style).
// - brute_force_plan: every partition of the fragments into groups, each re-aligned: the optimum
//   the tests compare with on small instances.

#include <cstddef>
#include <functional>
#include <vector>

namespace sloserve::sched::graft {

// Shares of `step`, 2·step, ... up to 1.
inline std::vector<double> share_steps(double step) {
  std::vector<double> out;
  for (int k = 1; k * step <= 1 + 1e-9; ++k) out.push_back(k * step);
  return out;
}

struct model {
  int layers = 0;  // the server's last layer is layers - 1; a fragment at p runs [p, layers)
  int max_batch = 32;
  std::vector<double> shares = share_steps(0.05);  // MPS shares a GPU in any percentage
  // l([a, b), batch, share) in seconds, a < b.
  std::function<double(int, int, int, double)> latency_s;
};

struct fragment {
  int p = 0;      // the first layer the server runs
  double t = 0;   // seconds left for the server
  double q = 0;   // requests/s
  int count = 1;  // clients merged into it
};

struct alloc {
  bool feasible = false;
  double resources = 0;  // share x instances
  double share = 0;
  int batch = 0;
  int instances = 0;
  double throughput = 0;  // what those instances carry
};
alloc allocate(const model& m, int a, int b, double q, double d);

std::vector<fragment> merge_fragments(const model& m, std::vector<fragment> fragments, double theta = 0.2);

// The factor weights of the distance: partition point, time budget, rate (equal by default;
// the paper finds little to gain from tuning them, a little more on the time budget at most).
struct weights {
  double p = 1, t = 1, q = 1;
};
std::vector<std::vector<size_t>> group_fragments(const std::vector<fragment>& fragments, size_t size = 5,
                                                 weights w = {});

// One stage of a plan: layers [a, b) for the fragments listed (indices into the group's).
struct stage {
  int a = 0, b = 0;
  std::vector<size_t> fragments;
  double budget_s = 0;
  graft::alloc alloc;
};
struct plan {
  bool feasible = false;
  double resources = 0;
  std::vector<stage> stages;
};
plan realign(const model& m, const std::vector<fragment>& group, int sweep = 64);

// Groups improved by moving one fragment at a time to another group with room (no group over
// max(size, the largest given)) or to a group of its own, or two fragments of two groups trading
// places, while the re-aligned cost (sum of share x instances, re-aligned with `sweep` steps of
// the shared stage's budget) falls; at most `budget` re-alignments are computed.
std::vector<std::vector<size_t>> refine_groups(const model& m, const std::vector<fragment>& fragments,
                                               std::vector<std::vector<size_t>> groups, size_t size, int budget,
                                               int sweep = 16);

// Merge, group, re-align: the whole plan (stage fragment indices refer to `fragments` after
// merging, returned in `merged`). `refine_budget` > 0: the groups are refined (refine_groups)
// before the final re-alignment.
plan plan_graft(const model& m, const std::vector<fragment>& fragments, std::vector<fragment>* merged = nullptr,
                size_t group_size = 5, double theta = 0.2, weights w = {}, int refine_budget = 0);
plan gslice_plan(const model& m, const std::vector<fragment>& fragments);
double brute_force_plan(const model& m, const std::vector<fragment>& fragments);

}  // namespace sloserve::sched::graft
