#include "bench/fleet.hpp"

#include <cmath>
#include <cstdio>
#include <random>

namespace sloserve::bench {

fleet make_fleet(const fleet_spec& spec) {
  std::mt19937_64 rng(spec.seed);
  auto uniform = [&](double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(rng); };
  fleet out;
  std::string models = "models:\n", pipes = "pipelines:\n";
  int next_model = 0;
  auto model = [&]() {
    char buf[256];
    std::snprintf(buf, sizeof buf,
                  "  - {name: m%d, input: {dtype: float32, shape: [4]}, output: {dtype: float32, shape: [4]}, "
                  "max_batch: 64, profile: {alpha_ms: %.3f, beta_ms: %.3f}}\n",
                  next_model, uniform(0.3, 3), uniform(2, 15));
    models += buf;
    return "m" + std::to_string(next_model++);
  };
  int three = static_cast<int>(std::lround(spec.sessions * spec.three_stage_share / 3));
  int single = spec.sessions - 3 * three;
  for (int i = 0; i < single + three; ++i) {
    bool chain = i >= single;
    std::string name = (chain ? "p3_" : "p1_") + std::to_string(i);
    double slo = chain ? uniform(100, 400) : uniform(50, 400);
    char buf[512];
    if (!chain) {
      std::snprintf(buf, sizeof buf, "  - {name: %s, slo_ms: %.1f, stages: [{name: s, model: %s}]}\n", name.c_str(),
                    slo, model().c_str());
    } else {
      auto a = model(), b = model(), c = model();
      std::snprintf(buf, sizeof buf,
                    "  - {name: %s, slo_ms: %.1f, stages: [{name: a, model: %s}, {name: b, model: %s, after: [a]}, "
                    "{name: c, model: %s, after: [a], fanout: 0.5}]}\n",
                    name.c_str(), slo, a.c_str(), b.c_str(), c.c_str());
    }
    pipes += buf;
    out.pipelines.push_back(name);
    out.rates.push_back(std::exp(uniform(std::log(5.0), std::log(300.0))));
  }
  out.devices = static_cast<int>(std::lround(spec.sessions * spec.devices_per_session));
  std::string nodes = "nodes:\n";
  for (int left = out.devices, n = 0; left > 0; left -= spec.devices_per_node, ++n) {
    char buf[256];
    std::snprintf(buf, sizeof buf,
                  "  - {name: n%d, address: tcp://127.0.0.1:0, roles: [%sworker], devices: [{kind: emulated, "
                  "count: %d}]}\n",
                  n, n == 0 ? "controller, frontend, " : "", std::min(left, spec.devices_per_node));
    nodes += buf;
  }
  out.yaml = nodes + models + pipes;
  return out;
}

}  // namespace sloserve::bench
