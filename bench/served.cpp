// bench/served: ResNet-18 on a cpu (or cuda) device through a one-worker sloserve node against a
// raw loop over the same executor at the same batch size, in one run.
//
// Usage: bench_served MODELS_DIR [threads] [seconds] [cpu|cuda]
// MODELS_DIR must hold resnet18.pt:
//   /usr/bin/python3 tools/export_models.py --out build/models --only resnet18
//
// 1. Profile ResNet-18 (batches 1, 2, 4, 8, and 16, 32 on cuda; p99) and set SLO = 4 x l(1).
// 2. The batch both sides use is the saturating batch under that SLO (largest b, 2·l(b) <= SLO).
// 3. Raw: execute that batch back to back; rate = requests per second.
// 4. Served: the highest rate with >= 99% attainment (constant arrivals; Poisson reported at
//    that rate too), the node's single cpu device capped at that batch.

#include <chrono>
#include <cstdio>
#include <filesystem>

#include "bench/harness.hpp"
#include "bench/kind_arg.hpp"
#include "gpu/profiler.hpp"
#include "scheduling/query_analyzer.hpp"

using namespace sloserve;

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s MODELS_DIR [threads] [seconds] [cpu|cuda]\n", argv[0]);
    return 2;
  }
  std::string dir = argv[1];
  int threads = argc > 2 ? std::atoi(argv[2]) : 2;
  double seconds = argc > 3 ? std::atof(argv[3]) : 8;
  std::string kind_name;
  auto parsed_kind = bench::kind_arg(argc, argv, 4, kind_name);
  if (!parsed_kind) return 2;
  auto kind = *parsed_kind;
  auto path = dir + "/resnet18.pt";
  if (!std::filesystem::exists(path)) {
    fprintf(stderr, "%s is missing: /usr/bin/python3 tools/export_models.py --out %s --only resnet18\n", path.c_str(),
            dir.c_str());
    return 2;
  }
  bench::log_to_stderr();
  model_spec m;
  m.name = "resnet18";
  m.path = path;
  m.input = {dtype::float32, {3, 224, 224}};
  m.output = {dtype::float32, {1000}};
  m.max_batch = kind == device_kind::cuda ? 32 : 8;
  auto made = make_executor(kind, 0, threads);
  if (!made) {
    fprintf(stderr, "%s\n", made.error().c_str());
    return 1;
  }
  auto ex = std::move(*made);
  profile_options po;
  for (int b = 1; b <= m.max_batch; b *= 2) po.batches.push_back(b);
  po.min_runs = 8;
  po.max_seconds = 2;
  auto measured = profile_model(*ex, m, po);
  if (!measured) {
    fprintf(stderr, "%s\n", measured.error().c_str());
    return 1;
  }
  auto& points = *measured;
  for (auto& p : points) {
    m.profile.batch.push_back(p.batch);
    m.profile.latency_ms.push_back(std::max(p.ms, m.profile.latency_ms.empty() ? 0 : m.profile.latency_ms.back()));
  }
  double slo = 4 * m.profile.latency_ms[0];
  int b = saturating_batch(m, slo);
  printf("resnet18 on %s, %d threads: l(1) = %.2f ms p99, SLO = 4 x l(1) = %.2f ms, batch %d (l = %.2f ms)\n",
         kind_name.c_str(), threads, m.profile.latency_ms[0], slo, b, m.profile.latency_ms_at(b));

  // Raw: the same executor, the same batch, back to back.
  std::vector<std::vector<tensor>> reqs;
  for (int i = 0; i < b; ++i) reqs.push_back({make_tensor(m.input, static_cast<uint64_t>(i))});
  std::vector<const std::vector<tensor>*> in;
  for (auto& r : reqs) in.push_back(&r);
  auto t0 = std::chrono::steady_clock::now();
  long iters = 0;
  while (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < seconds) {
    ex->execute(m, in);
    ++iters;
  }
  double raw = b * iters / std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ex.reset();

  auto yaml =
      "nodes:\n  - {name: local, address: \"tcp://127.0.0.1:0\", roles: [controller, frontend, worker], devices: "
      "[{kind: " +
      kind_name + ", count: 1, threads: " + std::to_string(threads) +
      "}]}\nmodels:\n  - {name: resnet18, path: " + path +
      ", input: {dtype: float32, shape: [3, 224, 224]}, output: {dtype: float32, shape: [1000]}, max_batch: " +
      std::to_string(b) + ", " + to_profile_yaml(points, pads_batches(kind)) +
      "}\npipelines:\n  - {name: classify, slo_ms: " + std::to_string(slo) +
      ", stages: [{name: s, model: resnet18}]}\nscheduler: {policy: static}\n";
  auto parsed = parse_cluster_config(yaml, "served.yaml");
  if (!parsed) {
    fprintf(stderr, "%s", parsed.error_text().c_str());
    return 1;
  }
  auto cfg = std::make_shared<cluster_config>(std::move(*parsed.config));
  auto ok = [&](double r) {
    auto s = bench::trial(cfg, r, 3, seconds, arrival_kind::constant);
    fprintf(stderr,
            "    served %6.1f req/s -> attainment %.4f (ok %lu, within SLO %lu, dropped %lu, lost %lu, p99 %.1f ms)\n",
            r, s.attainment, (unsigned long)s.ok, (unsigned long)s.ok_within_slo, (unsigned long)s.dropped,
            (unsigned long)s.lost, s.p99);
    return s.attainment >= 0.99 && s.lost == 0;
  };
  double served = bench::max_rate(ok, raw / 2, 5);
  auto poisson = bench::trial(cfg, served, 3, seconds, arrival_kind::poisson);
  printf("raw loop at batch %d: %.1f req/s\n", b, raw);
  printf("served, >= 99%% attainment, constant arrivals: %.1f req/s = %.2fx raw (target >= 0.9x)\n", served,
         served / raw);
  printf("served at that rate with Poisson arrivals: attainment %.4f\n", poisson.attainment);
  return 0;
}
