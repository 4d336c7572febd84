// bench/prefix: 5 transfer-learned ResNet-18 variants on one device (cpu, or cuda), equal load and
// one SLO, served with prefix batching (one backbone, 5 suffixes) and without (5 full models).
// Prints the highest rate at >= 99% attainment of each, and the memory of each.
//
// Usage: bench_prefix MODELS_DIR [threads] [seconds] [cpu|cuda] [slo_ms]
// The SLO defaults to 4 x l(1) of a full variant.
// MODELS_DIR needs the variants: /usr/bin/python3 tools/export_models.py --out build/models --only variants

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>

#include "bench/harness.hpp"
#include "bench/kind_arg.hpp"
#include "gpu/profiler.hpp"

using namespace sloserve;

namespace {

constexpr int variants = 5;

int max_batch = 8;  // per variant; 16 on cuda, where larger batches still pay

model_spec image_model(std::string name, std::string path, tensor_spec out) {
  model_spec m;
  m.name = std::move(name);
  m.path = std::move(path);
  m.input = {dtype::float32, {3, 224, 224}};
  m.output = std::move(out);
  m.max_batch = max_batch;
  return m;
}

std::string yaml_model(const model_spec& m, const std::vector<profile_point>& prof, const std::string& prefix,
                       bool step) {
  return "  - {name: " + m.name + ", path: " + m.path + (prefix.empty() ? "" : ", prefix: " + prefix) +
         ", input: {dtype: float32, shape: [3, 224, 224]}, output: {dtype: float32, shape: [" +
         std::to_string(m.output.shape[0]) + "]}, max_batch: " + std::to_string(m.max_batch) + ", " +
         to_profile_yaml(prof, step) + "}\n";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s MODELS_DIR [threads] [seconds] [cpu|cuda] [slo_ms]\n", argv[0]);
    return 2;
  }
  std::string dir = argv[1];
  int threads = argc > 2 ? std::atoi(argv[2]) : 1;
  double seconds = argc > 3 ? std::atof(argv[3]) : 6;
  std::string kind_name;
  auto parsed_kind = bench::kind_arg(argc, argv, 4, kind_name);
  if (!parsed_kind) return 2;
  auto kind = *parsed_kind;
  double slo_arg = argc > 5 ? std::atof(argv[5]) : 0;
  if (kind == device_kind::cuda) max_batch = 16;
  if (!std::filesystem::exists(dir + "/resnet18_prefix.pt")) {
    fprintf(stderr, "missing variants: /usr/bin/python3 tools/export_models.py --out %s --only variants\n",
            dir.c_str());
    return 2;
  }
  bench::log_to_stderr();
  // Memory: 5 full models against one backbone and 5 suffixes, each set in a fresh executor.
  auto full = [&](int v) {
    return image_model(std::string("v").append(std::to_string(v)), dir + "/resnet18_v" + std::to_string(v) + ".pt",
                       {dtype::float32, {10}});
  };
  auto backbone = image_model("backbone", dir + "/resnet18_prefix.pt", {dtype::float32, {512}});
  auto variant = [&](int v) {
    auto m = full(v);
    m.path = dir + "/resnet18_v" + std::to_string(v) + "_suffix.pt";
    m.prefix = "backbone";
    m.prefix_path = backbone.path;
    m.prefix_output = backbone.output;
    return m;
  };
  // Model memory is parameters and buffers as the executor accounts them. (Process RSS is not
  // comparable here: the second executor reuses pages the first one freed.)
  double mem_full = 0, mem_prefix = 0;
  auto made = make_executor(kind, 0, threads);
  if (!made) {
    fprintf(stderr, "%s\n", made.error().c_str());
    return 1;
  }
  {
    auto ex = std::move(*make_executor(kind, 0, threads));
    for (int v = 0; v < variants; ++v)
      if (ex->load(full(v))) mem_full += ex->memory_mb(full(v).name);
  }
  {
    auto ex = std::move(*make_executor(kind, 0, threads));
    for (int v = 0; v < variants; ++v)
      if (ex->load(variant(v))) mem_prefix += ex->memory_mb(variant(v).name);
    mem_prefix += ex->memory_mb("backbone");
  }
  // Profiles: a full variant, and the backbone alone (for the family's cost model).
  auto ex = std::move(*made);
  profile_options po;
  for (int b = 1; b <= max_batch; b *= 2) po.batches.push_back(b);
  po.min_runs = 5;
  po.max_seconds = 1;
  auto measured_full = profile_model(*ex, full(0), po);
  auto measured_backbone = measured_full ? profile_model(*ex, backbone, po) : fail(measured_full.error());
  if (!measured_backbone) {
    fprintf(stderr, "%s\n", measured_backbone.error().c_str());
    return 1;
  }
  auto &pf = *measured_full, &pb = *measured_backbone;
  // The mechanism, measured on the executor alone: one pass of the backbone over 5 x k requests
  // (prefix batching) against 5 passes of a full variant over k each (without).
  printf("one family pass of 5 x k against 5 full-variant passes of k (median of 20, ms):\n");
  for (int k = 1; k <= max_batch; k *= 2) {
    std::vector<std::vector<tensor>> reqs(static_cast<size_t>(variants * k), {make_tensor(backbone.input, 1)});
    std::vector<model_spec> vs, fs;
    for (int v = 0; v < variants; ++v) vs.push_back(variant(v)), fs.push_back(full(v));
    auto median_ms = [](const std::function<void()>& f) {
      std::vector<double> t;
      for (int i = 0; i < 22; ++i) {
        auto t0 = std::chrono::steady_clock::now();
        f();
        if (i >= 2)
          t.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
      }
      std::sort(t.begin(), t.end());
      return t[t.size() / 2];
    };
    double fam = median_ms([&] {
      std::vector<family_group> groups;
      for (int v = 0; v < variants; ++v) {
        groups.push_back({&vs[static_cast<size_t>(v)], {}});
        for (int i = 0; i < k; ++i) groups.back().inputs.push_back(&reqs[static_cast<size_t>(v * k + i)]);
      }
      ex->execute_family(groups);
    });
    double sep = median_ms([&] {
      for (int v = 0; v < variants; ++v) {
        std::vector<const std::vector<tensor>*> in;
        for (int i = 0; i < k; ++i) in.push_back(&reqs[static_cast<size_t>(v * k + i)]);
        ex->execute(fs[static_cast<size_t>(v)], in);
      }
    });
    printf("  k=%-2d family %7.2f   separate %7.2f   (%.2fx)\n", k, fam, sep, sep / fam);
  }
  ex.reset();
  double slo = slo_arg > 0 ? slo_arg : 4 * pf[0].ms;
  std::string head =
      "nodes:\n  - {name: local, address: \"tcp://127.0.0.1:0\", roles: [controller, frontend, worker], devices: "
      "[{kind: " +
      kind_name + ", count: 1, threads: " + std::to_string(threads) + "}]}\nmodels:\n";
  std::string pipes = "pipelines:\n";
  for (int v = 0; v < variants; ++v)
    pipes += "  - {name: p" + std::to_string(v) + ", slo_ms: " + std::to_string(slo) + ", stages: [{name: s, model: v" +
             std::to_string(v) + "}]}\n";
  std::string without = head, with = head + yaml_model(backbone, pb, "", pads_batches(kind));
  for (int v = 0; v < variants; ++v) {
    without += yaml_model(full(v), pf, "", pads_batches(kind));
    with += yaml_model(variant(v), pf, "backbone", pads_batches(kind));
  }
  without += pipes + "scheduler: {policy: static}\n";
  with += pipes + "scheduler: {policy: static}\n";
  auto search = [&](const std::string& yaml, const char* label) {
    auto parsed = parse_cluster_config(yaml, "prefix.yaml");
    if (!parsed) {
      fprintf(stderr, "%s", parsed.error_text().c_str());
      std::exit(1);
    }
    auto cfg = std::make_shared<cluster_config>(std::move(*parsed.config));
    auto ok = [&](double r) {
      auto s = bench::trial(cfg, r, 3, seconds, arrival_kind::constant, true);
      fprintf(stderr,
              "    %-22s %6.1f req/s -> attainment %.4f (ok %lu, within SLO %lu, dropped %lu, lost %lu, p99 %.1f ms)\n",
              label, r, s.attainment, (unsigned long)s.ok, (unsigned long)s.ok_within_slo, (unsigned long)s.dropped,
              (unsigned long)s.lost, s.p99);
      return s.attainment >= 0.99 && s.lost == 0;
    };
    // From half the batch-1 rate of one full variant: 8.6 req/s on the 2-core CPU, ~300 on an H100.
    return bench::max_rate(ok, 500 / pf[0].ms, 4);
  };
  double r_without = search(without, "without prefix batching");
  double r_with = search(with, "with prefix batching");
  printf(
      "5 ResNet-18 variants, one %s device (%d threads), SLO %.1f ms (l(1) = %.2f ms p99), equal load, constant "
      "arrivals\n",
      kind_name.c_str(), threads, slo, pf[0].ms);
  printf("profile p99 ms, full variant:");
  for (auto& p : pf) printf(" b=%d %.2f", p.batch, p.ms);
  printf("\nprofile p99 ms, backbone:    ");
  for (auto& p : pb) printf(" b=%d %.2f", p.batch, p.ms);
  printf("\n");
  printf("max rate at >= 99%%: with prefix batching %.1f req/s, without %.1f req/s, ratio %.2fx (target >= 1.5x)\n",
         r_with, r_without, r_with / r_without);
  printf("model memory: with %.1f MB, without %.1f MB (%.2fx)\n", mem_prefix, mem_full, mem_prefix / mem_full);
  return 0;
}
