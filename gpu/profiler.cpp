#include "gpu/profiler.hpp"

#include <algorithm>
#include <chrono>
#include <sstream>
#include <cmath>

namespace sloserve {

bool profile_model(device_executor& ex, const model_spec& m, const profile_options& o,
                   std::vector<profile_point>& out, std::string& error) {
  if (auto e = ex.load(m); !e.empty()) {
    error = e;
    return false;
  }
  auto batches = o.batches;
  if (batches.empty())
    for (int b = 1; b <= m.max_batch; b *= 2) batches.push_back(b);
  using clock = std::chrono::steady_clock;
  for (int b : batches) {
    if (b < 1 || b > m.max_batch) {
      error = "batch " + std::to_string(b) + " is outside 1.." + std::to_string(m.max_batch) + " (max_batch of " + m.name + ")";
      return false;
    }
    std::vector<std::vector<tensor>> reqs;
    for (int i = 0; i < b; ++i) reqs.push_back({make_tensor(m.input, static_cast<uint64_t>(i), "input")});
    std::vector<const std::vector<tensor>*> in;
    for (auto& r : reqs) in.push_back(&r);
    auto run = [&]() -> double {
      auto t0 = clock::now();
      auto res = ex.execute(m, in);
      auto wall = std::chrono::duration<double, std::milli>(clock::now() - t0).count();
      if (!res.error.empty()) error = res.error;
      return wall + std::chrono::duration<double, std::milli>(res.busy).count();
    };
    for (int i = 0; i < o.warmup_runs; ++i) run();
    std::vector<double> ms;
    auto start = clock::now();
    while (static_cast<int>(ms.size()) < o.max_runs &&
           (static_cast<int>(ms.size()) < o.min_runs ||
            std::chrono::duration<double>(clock::now() - start).count() < o.max_seconds)) {
      ms.push_back(run());
      if (!error.empty()) return false;
    }
    std::sort(ms.begin(), ms.end());
    profile_point p;
    p.batch = b;
    p.runs = static_cast<int>(ms.size());
    for (auto x : ms) p.mean_ms += x / ms.size();
    p.p50_ms = ms[ms.size() / 2];
    p.p99_ms = ms[std::min(ms.size() - 1, static_cast<size_t>(std::ceil(0.99 * ms.size())) - 1)];
    out.push_back(p);
  }
  return true;
}

latency_profile profile_of(const std::vector<profile_point>& points, bool step) {
  latency_profile p;
  p.step = step;
  double running = 0;
  for (auto& pt : points) {
    running = std::max(running, pt.p99_ms);
    p.batch.push_back(pt.batch);
    p.latency_ms.push_back(running);
  }
  return p;
}

std::string to_profile_yaml(const std::vector<profile_point>& points, bool step) {
  auto p = profile_of(points);
  std::ostringstream b, l;
  l.precision(6);
  for (size_t i = 0; i < p.batch.size(); ++i) {
    b << (i ? ", " : "") << p.batch[i];
    l << (i ? ", " : "") << p.latency_ms[i];
  }
  return "profile: {batch: [" + b.str() + "], latency_ms: [" + l.str() + "]" + (step ? ", step: true" : "") + "}";
}

}  // namespace sloserve
