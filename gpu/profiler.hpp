#pragma once
// Measuring l(b) of a model on a device executor, for the profiles the planner uses.

#include <string>
#include <string_view>
#include <vector>

#include "gpu/executor.hpp"

namespace sloserve {

struct profile_options {
  std::vector<int> batches;  // empty: 1, 2, 4, ... up to the model's max_batch
  int warmup_runs = 3;       // per batch size, not measured
  int min_runs = 20;         // per batch size
  int max_runs = 200;        // enough for a stable p99 when the model is fast
  double max_seconds = 3;    // per batch size, once min_runs are done
};

struct profile_point {
  int batch = 0;
  int runs = 0;
  double mean_ms = 0, p50_ms = 0, p99_ms = 0;
};

// Runs each batch size on `ex` and measures it. A run's time is its wall time plus the time
// the executor reports the device stays busy (an emulated device runs in zero wall time).
// Returns false with `error` set when the model fails to load or run.
bool profile_model(device_executor& ex, const model_spec& m, const profile_options& o,
                   std::vector<profile_point>& out, std::string& error);

// The measured p99 per batch as a tabular profile, made non-decreasing (measured tails can dip
// between neighbouring sizes; the planner needs l(b) non-decreasing).
// `step`: the device pads batches to the measured sizes (the cuda kind), so partial batches cost
// the next measured size.
latency_profile profile_of(const std::vector<profile_point>& points, bool step = false);

// The same as the cluster file's `profile:` key.
std::string to_profile_yaml(const std::vector<profile_point>& points, bool step = false);

// Whether a device of this kind pads batches to the profiled sizes (see torch_executor.cpp).
inline bool pads_batches(std::string_view kind) { return kind == "cuda"; }

}  // namespace sloserve
