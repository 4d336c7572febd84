#pragma once
// Measuring l(b) of a model on a device executor, for the profiles the planner uses.

#include <string>
#include <string_view>
#include <vector>

#include "gpu/executor.hpp"

namespace sloserve {

struct profile_options {
  std::vector<int> batches;  // empty: 1, 2, 4, ... up to the model's max_batch
  int warmup_runs = 3;       // per batch size and pass, not measured (and at least warmup_ms of them)
  double warmup_ms = 20;
  int min_runs = 20;         // per batch size and pass
  double min_seconds = 0.2;  // and at least this long: a fast model gets enough runs for its tail
  int max_runs = 500;
  double max_seconds = 3;      // per batch size and pass, once min_runs are done
  double quantile = 0.95;      // the latency planned with: this quantile of the runs, outliers set aside
  double target_error = 0.03;  // stop early once the quantile's 95% confidence bound is this tight
  int passes = 2;              // independent passes over all sizes; a third settles a disagreement
  double agree = 0.10;         // passes agree when within this fraction of each other
  // What the requests carry, in turn: for a model with `preprocess:`, the images its clients send
  // (raw uint8[H, W, 3] or JPEG), so that decoding and resizing count in l(b); empty: tensors of
  // its declared input.
  std::vector<tensor> inputs;
};

struct profile_point {
  int batch = 0;
  int runs = 0;
  double mean_ms = 0, p50_ms = 0, p99_ms = 0;  // of every run, outliers included
  double ms = 0;                               // the latency to plan with: the quantile, the median of the passes
  double error_ms = 0;                         // half-width of its 95% confidence interval (distribution-free)
  int outliers = 0;                            // runs set aside (far above the median: preemption, page faults)
  std::vector<double> passes_ms;               // the quantile of each pass
  bool disagreed = false;                      // the first two passes differed by more than `agree`
};

// Runs each batch size on `ex` and measures it: warm-up runs of each size on its own, then
// runs until the quantile is tight or the budget is spent, in `passes` passes over all sizes.
// A run's time is its wall time plus the time the executor reports the device stays busy (an
// emulated device runs in zero wall time). An error when the model fails to load or run.
expected<std::vector<profile_point>> profile_model(device_executor& ex, const model_spec& m, const profile_options& o);

// The quantile `q` of `runs` with outliers set aside: runs above median + max(6 MAD, 20% of the
// median). `error_ms` gets the half-width of its 95% confidence interval by order statistics,
// `outliers` how many were set aside.
double robust_quantile(std::vector<double> runs, double q, double& error_ms, int& outliers);

// The planned latency (`ms`) per batch as a tabular profile, made non-decreasing (measured tails can dip
// between neighbouring sizes; the planner needs l(b) non-decreasing).
// `step`: the device pads batches to the measured sizes (the cuda kind), so partial batches cost
// the next measured size.
latency_profile profile_of(const std::vector<profile_point>& points, bool step = false);

// The same as the cluster file's `profile:` key.
std::string to_profile_yaml(const std::vector<profile_point>& points, bool step = false);

// Whether a device of this kind pads batches to the profiled sizes (see torch_executor.cpp).
inline bool pads_batches(device_kind kind) {
  return kind == device_kind::cuda;
}

}  // namespace sloserve
