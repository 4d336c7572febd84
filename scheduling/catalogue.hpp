#pragma once
// MCDNN's catalogue under memory (thesis 002, ch. 4): variants compete for the cluster's device
// memory. Every stage that names `variants` runs its most accurate one when the plan that makes
// fits the cluster (every device within its slot's memory, none missing); otherwise the choice
// of variants with the highest rate-weighted accuracy, sum over those stages of
// rate x accuracy / 100, whose plan fits.
//
// Exact while the combinations are few (`exact_limit`): they are tried best first, so the first
// whose plan fits is the best one. Beyond that, MCDNN's greedy degradation: from the most
// accurate choice, again and again the stage whose next smaller variant loses the least
// rate-weighted accuracy per MB saved steps down to it, until the plan fits.

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "pipelines/pipeline.hpp"

namespace sloserve::sched {

struct catalogue_choice {
  std::vector<pipeline> pipelines;    // the input's, each stage with variants on its chosen one
  double accuracy = 0;                // sum over stages with variants of rate x accuracy / 100
  double best_accuracy = 0;           // the same for the most accurate choice
  bool fits = true;                   // false: no choice fits; the smallest variants are kept
  bool exact = true;                  // the combinations were all searched (else MCDNN's greedy)
  size_t plans = 0;                   // plans tried
  std::vector<std::string> degraded;  // per stage on a less accurate variant: what and why
};

// `rates`: per pipeline and stage, requests/s (after fan-out). `fits(pipelines)` plans with those
// stage models and says whether the plan fits the cluster.
catalogue_choice choose_variants(const std::vector<pipeline>& pipelines, const std::vector<model_spec>& models,
                                 const std::vector<std::vector<double>>& rates,
                                 const std::function<bool(const std::vector<pipeline>&)>& fits,
                                 size_t exact_limit = 512);

// Whether any stage of `pipelines` has more than one variant to choose from.
bool has_variants(const std::vector<pipeline>& pipelines);

}  // namespace sloserve::sched
