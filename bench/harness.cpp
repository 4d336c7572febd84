#include "bench/harness.hpp"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "actors/node_runtime.hpp"

namespace sloserve::bench {

void log_to_stderr(bool info) {
  spdlog::set_default_logger(spdlog::stderr_color_mt("bench"));
  spdlog::set_level(info ? spdlog::level::info : spdlog::level::warn);
}

cluster_config parse_or_exit(const std::string& yaml, const std::string& file) {
  auto parsed = parse_cluster_config(yaml, file);
  if (!parsed) {
    fprintf(stderr, "%s\n", parsed.error_text().c_str());
    std::exit(1);
  }
  return std::move(*parsed.config);
}

started_node start_node(const std::string& yaml, const std::string& file) {
  started_node out;
  out.cfg = std::make_shared<cluster_config>(parse_or_exit(yaml, file));
  out.node = std::make_shared<node_runtime>(out.cfg, out.cfg->nodes.front().name);
  if (auto started = out.node->start(); !started) {
    fprintf(stderr, "node: %s\n", started.error().c_str());
    std::exit(1);
  }
  return out;
}

load_summary trial(std::shared_ptr<cluster_config> cfg, double rate, double warmup_s, double measure_s,
                   arrival_kind arrival, bool equal_weights, std::vector<mix_entry> mix) {
  node_runtime node(cfg, cfg->nodes.front().name);
  if (auto started = node.start(); !started) {
    fprintf(stderr, "node: %s\n", started.error().c_str());
    std::exit(1);
  }
  load_options o;
  o.address = node.endpoint();
  double zipf_total = 0;
  for (size_t i = 0; i < cfg->pipelines.size(); ++i) zipf_total += 1 / std::pow(i + 1, 0.9);
  for (size_t i = 0; i < cfg->pipelines.size(); ++i) {
    auto& p = cfg->pipelines[i];
    double w = equal_weights ? 1.0 / cfg->pipelines.size() : 1 / std::pow(i + 1, 0.9) / zipf_total;
    o.mix.push_back({p.name, w, p.slo_ms, cfg->models[p.stages[p.roots().front()].model_index].input});
  }
  if (!mix.empty()) o.mix = std::move(mix);
  o.pipeline = o.mix.front().pipeline;
  o.slo_ms = 0;
  for (auto& m : o.mix) o.slo_ms = std::max(o.slo_ms, m.slo_ms);
  o.rate = rate;
  o.arrival = arrival;
  o.warmup_s = warmup_s;
  o.duration_s = measure_s;
  o.grace_ms = 1000;
  load_summary s;
  if (auto ran = run_load(o))
    s = std::move(*ran);
  else
    fprintf(stderr, "load: %s\n", ran.error().c_str());
  node.stop();
  return s;
}

double max_rate(const std::function<bool(double)>& ok, double start, int bisections) {
  double lo = 0, hi = start;
  while (ok(hi)) {
    lo = hi;
    hi *= 2;
    if (hi > 64 * start) break;
  }
  for (int i = 0; i < bisections; ++i) {
    double mid = lo + (hi - lo) / 2;
    if (ok(mid))
      lo = mid;
    else
      hi = mid;
  }
  return lo;
}

}  // namespace sloserve::bench
