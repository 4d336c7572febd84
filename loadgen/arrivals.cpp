#include "loadgen/arrivals.hpp"

#include <algorithm>
#include <fstream>
#include <limits>
#include <sstream>

#include "config/knob_option.hpp"

namespace sloserve {

double arrivals::gap_s(double rate) {
  if (rate <= 0) return 0.1;
  if (kind_ == arrival_kind::constant) return 1 / rate;
  if (kind_ == arrival_kind::gamma) {
    double k = 1 / std::max(cv_ * cv_, 1e-6);
    return std::gamma_distribution<double>(k, 1 / (rate * k))(rng_);
  }
  return std::exponential_distribution<double>(rate)(rng_);
}

double next_arrival_s(arrivals& gen, const std::vector<double>& trace, double scale, double t_s) {
  size_t sec = t_s < 0 ? 0 : static_cast<size_t>(t_s);
  double from = t_s;
  while (sec < trace.size()) {
    double rate = trace[sec] * scale;
    // The end of this run of seconds at one rate.
    size_t end = sec + 1;
    while (end < trace.size() && trace[end] == trace[sec]) ++end;
    if (rate > 0) {
      double next = from + gen.gap_s(rate);
      if (next < static_cast<double>(end) || end >= trace.size()) return next;
    }
    from = static_cast<double>(end);
    sec = end;
  }
  return std::numeric_limits<double>::infinity();
}

std::vector<double> bursty_trace(double base, double factor, int burst_s, int period_s, int duration_s, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<double> out;
  for (int t = 0; t < duration_s; ++t) {
    double mean = base * (period_s > 0 && t % period_s < burst_s ? factor : 1);
    out.push_back(mean > 0 ? static_cast<double>(std::poisson_distribution<long>(mean)(rng)) : 0);
  }
  return out;
}

std::vector<double> stepped_trace(const std::vector<double>& levels, int step_s, int duration_s) {
  std::vector<double> out;
  for (int t = 0; t < duration_s && !levels.empty() && step_s > 0; ++t)
    out.push_back(levels[static_cast<size_t>(t / step_s) % levels.size()]);
  return out;
}

expected<std::vector<double>> read_rate_trace(const std::string& path, const std::string& unit) {
  std::ifstream in(path);
  if (!in) return fail(path + ": cannot open the trace");
  std::vector<double> out;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (auto h = line.find('#'); h != std::string::npos) line.resize(h);
    std::istringstream ss(line);
    double r;
    if (!(ss >> r)) {
      if (line.find_first_not_of(" \t\r") != std::string::npos)
        return fail(path + ":" + std::to_string(n) + ": expected a rate (" + unit + ")");
      continue;
    }
    if (r < 0) return fail(path + ":" + std::to_string(n) + ": a rate cannot be negative");
    out.push_back(r);
  }
  if (out.empty()) return fail(path + ": the trace has no rates");
  return out;
}

}  // namespace sloserve
