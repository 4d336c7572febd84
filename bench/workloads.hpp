#pragma once
// The workloads the benchmarks share, as cluster-file text: the nodes, and the models and
// pipelines of thesis 002's traffic and game analyses.

#include <string>

namespace sloserve::bench {

// `devices` emulated devices: on one node with every role (`one_node`), or on workers of 8
// devices behind a controller-and-frontend node.
std::string nodes_yaml(int devices, bool one_node);

// Profiles as config/examples/cluster.yaml: SSD from thesis 002 Table 3.6, car and face
// recognisers from Table 3.2 (models A and B). One pipeline, `traffic`, SLO 400 ms.
std::string traffic_workload();

// Thesis 002 §3.6 game analysis: per frame, LeNet over 6 digit regions and the game's own
// ResNet-50 variant; SLO 50 ms. Batch-1 latencies from Table 3.1; slopes assumed (see
// config/examples/game.yaml). Frames are 3x60x80 to keep the client cheap. Pipelines game0...
std::string game_workload(int games);

}  // namespace sloserve::bench
