#pragma once
// What the benchmarks share: one load trial against a fresh in-process node, and the search
// for the highest rate that still meets a target.

#include <functional>
#include <memory>
#include <string>

#include "config/cluster_config.hpp"
#include "loadgen/load.hpp"

namespace sloserve {
class node_runtime;
}

namespace sloserve::bench {

// Logs go to stderr, from warnings up (from info with `info`): stdout keeps the bench's table.
void log_to_stderr(bool info = false);

// A cluster file given as text, parsed; exits with the error when it is wrong.
cluster_config parse_or_exit(const std::string& yaml, const std::string& file);

// A node of a cluster file given as text, started: its first node, every role it names. Exits
// with the reason when the file is wrong or the node cannot start.
struct started_node {
  std::shared_ptr<cluster_config> cfg;
  std::shared_ptr<node_runtime> node;
};
started_node start_node(const std::string& yaml, const std::string& file);

// Starts a node for `cfg` (one node, every role), sends load for warmup + measure seconds over
// every pipeline (Zipf-0.9 weights in file order, or equal; one pipeline gets all), or by `mix`
// when given, stops the node.
load_summary trial(std::shared_ptr<cluster_config> cfg, double rate, double warmup_s, double measure_s,
                   arrival_kind arrival = arrival_kind::poisson, bool equal_weights = false,
                   std::vector<mix_entry> mix = {});

// Highest rate for which `ok` holds: doubling from `start` (at most 64x), then `bisections`
// halvings of the bracket.
double max_rate(const std::function<bool(double)>& ok, double start, int bisections);

}  // namespace sloserve::bench
