#pragma once
// When requests are sent: inter-arrival gaps of an arrival process, and per-second rate traces
// (read from a file, or synthetic for `sloserve trace`).

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "config/knob_option.hpp"
#include "config/knobs.hpp"
#include "pipelines/expected.hpp"

namespace sloserve {

// Inter-arrival gaps of `kind` (gamma: with coefficient of variation `cv`) at a given rate.
class arrivals {
 public:
  arrivals(arrival_kind kind, double cv, uint64_t seed) : kind_(kind), cv_(cv), rng_(seed) {}
  double gap_s(double rate);

 private:
  arrival_kind kind_;
  double cv_;
  std::mt19937_64 rng_;
};

// The next arrival after `t_s` seconds into a per-second trace of rates (× `scale`): seconds at 0
// are silent, and a gap that reaches a second of another rate starts again there (exact for
// Poisson arrivals, which forget). Times before 0 (a warm-up) run at the first second's rate.
// Infinity when the trace has no arrival left.
double next_arrival_s(arrivals& gen, const std::vector<double>& trace, double scale, double t_s);

// Reads a per-second trace: one number per line, in `unit` (requests/s, or Mbps for a bandwidth
// trace), which errors name; '#' starts a comment.
expected<std::vector<double>> read_rate_trace(const std::string& path, const std::string& unit = "requests/s");

// bursty: `base` requests/s, times `factor` for `burst_s` seconds at the start of every
// `period_s` (thesis 004's ×5 for 5 s every 60 s), with Poisson noise of the given seed.
std::vector<double> bursty_trace(double base, double factor, int burst_s, int period_s, int duration_s, uint64_t seed);
// stepped: the levels in turn, each held for `step_s` seconds, cycling (a 4G uplink's steps).
std::vector<double> stepped_trace(const std::vector<double>& levels, int step_s, int duration_s);

}  // namespace sloserve
