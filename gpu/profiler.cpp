#include "gpu/profiler.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <sstream>

namespace sloserve {

double robust_quantile(std::vector<double> runs, double q, double& error_ms, int& outliers) {
  error_ms = 0;
  outliers = 0;
  if (runs.empty()) return 0;
  std::sort(runs.begin(), runs.end());
  auto median_of = [](const std::vector<double>& v) { return v[v.size() / 2]; };
  double median = median_of(runs);
  std::vector<double> dev;
  for (auto x : runs) dev.push_back(std::abs(x - median));
  std::sort(dev.begin(), dev.end());
  double mad = 1.4826 * median_of(dev);
  double cutoff = median + std::max(6 * mad, 0.2 * median);
  auto kept = static_cast<size_t>(std::upper_bound(runs.begin(), runs.end(), cutoff) - runs.begin());
  outliers = static_cast<int>(runs.size() - kept);
  runs.resize(kept);
  auto n = static_cast<double>(kept);
  auto rank = [&](double r) { return runs[static_cast<size_t>(std::clamp(std::ceil(r), 1.0, n)) - 1]; };
  // Ranks n·q ± 1.96·sqrt(n·q·(1 - q)) bound the quantile with 95% confidence.
  double spread = 1.96 * std::sqrt(n * q * (1 - q));
  error_ms = (rank(n * q + spread + 1) - rank(n * q - spread)) / 2;
  return rank(n * q);
}

namespace {

using clock_type = std::chrono::steady_clock;

// One pass at batch `b`: warm-up, then runs until the quantile is tight or the budget is spent.
status measure_pass(device_executor& ex, const model_spec& m, const profile_options& o, int b, profile_point& p,
                    std::vector<double>& all) {
  std::string error;
  std::vector<std::vector<tensor>> reqs;
  for (int i = 0; i < b; ++i)
    reqs.push_back({o.inputs.empty() ? make_tensor(m.input, static_cast<uint64_t>(i), "input")
                                     : o.inputs[static_cast<size_t>(i) % o.inputs.size()]});
  std::vector<const std::vector<tensor>*> in;
  for (auto& r : reqs) in.push_back(&r);
  auto run = [&]() -> double {
    auto t0 = clock_type::now();
    auto res = ex.execute(m, in);
    auto wall = std::chrono::duration<double, std::milli>(clock_type::now() - t0).count();
    if (!res.error.empty()) error = res.error;
    return wall + std::chrono::duration<double, std::milli>(res.busy).count();
  };
  // Warm up this shape on its own: allocator, caches, and on cuda cuDNN's choice for the shape.
  double warm = 0;
  for (int i = 0; i < o.warmup_runs || (warm < o.warmup_ms && i < 10 * o.warmup_runs); ++i) {
    warm += run();
    if (!error.empty()) return fail(error);
  }
  std::vector<double> ms;
  auto start = clock_type::now();
  double err = 0, q = 0;
  int outliers = 0;
  while (static_cast<int>(ms.size()) < o.max_runs) {
    ms.push_back(run());
    if (!error.empty()) return fail(error);
    auto n = static_cast<int>(ms.size());
    auto elapsed = std::chrono::duration<double>(clock_type::now() - start).count();
    if (n < o.min_runs || elapsed < o.min_seconds) continue;
    if (elapsed >= o.max_seconds) break;
    if (n % 10 == 0) {
      q = robust_quantile(ms, o.quantile, err, outliers);
      if (err <= o.target_error * q) break;
    }
  }
  q = robust_quantile(ms, o.quantile, err, outliers);
  p.passes_ms.push_back(q);
  p.error_ms = std::max(p.error_ms, err);
  p.outliers += outliers;
  p.runs += static_cast<int>(ms.size());
  all.insert(all.end(), ms.begin(), ms.end());
  return {};
}

}  // namespace

expected<std::vector<profile_point>> profile_model(device_executor& ex, const model_spec& m, const profile_options& o) {
  if (auto loaded = ex.load(m); !loaded) return fail(loaded.error());
  auto batches = o.batches;
  if (batches.empty())
    for (int b = 1; b <= m.max_batch; b *= 2) batches.push_back(b);
  for (int b : batches)
    if (b < 1 || b > m.max_batch)
      return fail("batch " + std::to_string(b) + " is outside 1.." + std::to_string(m.max_batch) + " (max_batch of " +
                  m.name + ")");
  std::vector<profile_point> points(batches.size());
  std::vector<std::vector<double>> all(batches.size());
  // Whole passes over every size, so that a slow spell of the machine hits one pass, not a size.
  for (int pass = 0; pass < std::max(1, o.passes); ++pass)
    for (size_t i = 0; i < batches.size(); ++i) {
      points[i].batch = batches[i];
      if (auto pass = measure_pass(ex, m, o, batches[i], points[i], all[i]); !pass) return fail(pass.error());
    }
  for (size_t i = 0; i < batches.size(); ++i) {
    auto& p = points[i];
    auto& v = p.passes_ms;
    if (v.size() >= 2 && std::abs(v[0] - v[1]) > o.agree * std::min(v[0], v[1])) {
      p.disagreed = true;  // a third pass settles it: the median of three
      if (auto pass = measure_pass(ex, m, o, p.batch, p, all[i]); !pass) return fail(pass.error());
    }
    auto sorted = v;
    std::sort(sorted.begin(), sorted.end());
    p.ms =
        sorted.size() % 2 ? sorted[sorted.size() / 2] : (sorted[sorted.size() / 2 - 1] + sorted[sorted.size() / 2]) / 2;
    auto& runs = all[i];
    std::sort(runs.begin(), runs.end());
    for (auto x : runs) p.mean_ms += x / static_cast<double>(runs.size());
    p.p50_ms = runs[runs.size() / 2];
    p.p99_ms = runs[std::min(runs.size() - 1, static_cast<size_t>(std::ceil(0.99 * runs.size())) - 1)];
  }
  return points;
}

latency_profile profile_of(const std::vector<profile_point>& points, bool step) {
  latency_profile p;
  p.step = step;
  double running = 0;
  for (auto& pt : points) {
    running = std::max(running, pt.ms);
    p.batch.push_back(pt.batch);
    p.latency_ms.push_back(running);
  }
  return p;
}

std::string to_profile_yaml(const std::vector<profile_point>& points, bool step) {
  auto p = profile_of(points, step);
  std::ostringstream b, l;
  l.precision(6);
  for (size_t i = 0; i < p.batch.size(); ++i) {
    b << (i ? ", " : "") << p.batch[i];
    l << (i ? ", " : "") << p.latency_ms[i];
  }
  return "profile: {batch: [" + b.str() + "], latency_ms: [" + l.str() + "]" + (step ? ", step: true" : "") + "}";
}

}  // namespace sloserve
