#pragma once
// A request of a partitioned model (models[].layers) that starts at a later layer carries what the
// layers before made: the model its input must fit is the model's rest from there.

#include <cstdint>
#include <string>

#include "config/cluster_config.hpp"

namespace sloserve {

// The model whose input a request of pipeline `p` starting at `start` carries: the pipeline's root
// model at 0, else the rest [start, end) of its partitioned model. The error, naming the request's
// field as `field`, when the pipeline runs no partitioned model or the start is beyond its layers.
inline expected<const model_spec*> start_model(const cluster_config& cfg, const pipeline& p, uint32_t start,
                                               const std::string& field) {
  auto& root = cfg.models[p.stages[p.roots().front()].model_index];
  if (start == 0) return &root;
  auto layers = static_cast<uint32_t>(root.layers.size());
  if (!root.partitioned() || p.stages.size() != 1)
    return fail(field + " " + std::to_string(start) + ": pipeline '" + p.name +
                "' does not run a partitioned model (models[].layers)");
  if (start >= layers)
    return fail(field + " " + std::to_string(start) + " is not below the " + std::to_string(layers) +
                " layers of model '" + root.name + "'");
  return cfg.find_model(fragment_name(root, static_cast<int>(start), static_cast<int>(layers)));
}

}  // namespace sloserve
