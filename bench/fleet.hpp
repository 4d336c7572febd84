#pragma once
// A synthetic fleet for planning at scale: many pipelines of random linear profiles, as an
// operator of a large cluster would declare them, and the rates to plan them for.

#include <cstdint>
#include <string>
#include <vector>

namespace sloserve::bench {

struct fleet_spec {
  int sessions = 1000;             // stages in all (each stage has a model of its own)
  double three_stage_share = 0.5;  // of the sessions, the share in 3-stage pipelines (the rest single-stage)
  double devices_per_session = 0.4;
  int devices_per_node = 8;
  uint64_t seed = 1;
};

struct fleet {
  std::string yaml;                    // a cluster file: nodes with emulated devices, models, pipelines
  std::vector<std::string> pipelines;  // names, in file order
  std::vector<double> rates;           // queries/s per pipeline
  int devices = 0;
};

// Models: l(b) = α·b + β with α in [0.3, 3] ms and β in [2, 15] ms, max batch 64. Single-stage
// pipelines: SLO 50-400 ms. 3-stage pipelines (a root and two children, fan-out 1 and 0.5): SLO
// 100-400 ms. Rates log-uniform in 5-300 queries/s.
fleet make_fleet(const fleet_spec& spec);

}  // namespace sloserve::bench
