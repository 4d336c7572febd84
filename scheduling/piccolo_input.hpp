#pragma once
// Piccolo's input from a cluster file: a pipeline's stages as modules, each with a configuration
// per device type that serves the stage's model and per batch size that type's profile plans
// (`models[].profiles`, else `profile`), at the type's price.

#include <string>
#include <vector>

#include "config/cluster_config.hpp"
#include "scheduling/piccolo.hpp"

namespace sloserve {

struct piccolo_types {
  std::vector<std::string> names;  // indexed by pc_config::type; "" for untyped devices
  std::vector<double> price;
  std::vector<size_t> available;  // worker devices of each type
};
piccolo_types piccolo_device_types(const cluster_config& cfg);

// The batch sizes a module's configurations take: a measured profile's listed sizes, else powers
// of two and the sizes halfway between (1, 2, 3, 4, 6, 8, 12, ...); and the model's max_batch
// where the profile reaches it.
std::vector<int> piccolo_batches(const latency_profile& profile, int max_batch);

// Stage s of `p` is module s; `rate`: the pipeline's queries/s. A linear profile also offers the
// largest batches the whole SLO allows at the stage's rate.
sched::pc_app piccolo_app(const cluster_config& cfg, const piccolo_types& types, const pipeline& p, double rate);

}  // namespace sloserve
