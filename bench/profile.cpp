// bench/profile: how stable start-up profiles are on a real device. Profiles a model several
// times in a row with the settings a worker profiles with at start-up, and prints each profile
// and, per batch, the spread of the planned latency across them (target: within 10%).
//
// Usage: bench_profile MODELS_DIR [runs=4] [cpu|cuda] [model=small_cnn]
// small_cnn.pt is one of the test models (float32[3, 64, 64] -> [10]); resnet18 and resnet50
// come from `/usr/bin/python3 tools/export_models.py --out build/models --only resnet18,resnet50`.

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "bench/kind_arg.hpp"
#include "gpu/profiler.hpp"

using namespace sloserve;

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s MODELS_DIR [runs=4] [cpu|cuda] [model=small_cnn]\n", argv[0]);
    return 2;
  }
  std::string dir = argv[1];
  int runs = argc > 2 ? std::atoi(argv[2]) : 4;
  std::string kind_name;
  auto parsed_kind = bench::kind_arg(argc, argv, 3, kind_name);
  if (!parsed_kind) return 2;
  auto kind = *parsed_kind;
  std::string name = argc > 4 ? argv[4] : "small_cnn";
  model_spec m;
  m.name = name;
  m.path = dir + "/" + name + ".pt";
  bool small = name == "small_cnn";
  m.input = {dtype::float32, small ? std::vector<int64_t>{3, 64, 64} : std::vector<int64_t>{3, 224, 224}};
  m.output = {dtype::float32, {small ? 10 : 1000}};
  m.max_batch = kind == device_kind::cuda ? 32 : 8;
  if (!std::filesystem::exists(m.path)) {
    fprintf(stderr, "%s is missing\n", m.path.c_str());
    return 2;
  }
  auto made = make_executor(kind, 0, 1);
  if (!made) {
    fprintf(stderr, "%s\n", made.error().c_str());
    return 1;
  }
  auto ex = std::move(*made);
  profile_options o;  // what a worker uses at start-up
  o.min_runs = 10;
  o.max_seconds = 1;
  std::vector<std::vector<profile_point>> all;
  for (int r = 0; r < runs; ++r) {
    auto measured = profile_model(*ex, m, o);
    if (!measured) {
      fprintf(stderr, "%s\n", measured.error().c_str());
      return 1;
    }
    auto& points = *measured;
    printf("profile %d:", r + 1);
    for (auto& p : points)
      printf("  b=%d %.3f ms (+-%.3f, %d runs, %d outliers%s)", p.batch, p.ms, p.error_ms, p.runs, p.outliers,
             p.disagreed ? ", third pass" : "");
    printf("\n");
    all.push_back(points);
  }
  double worst = 0;
  printf("%s on %s, %d start-up profiles in a row: spread (max/min - 1) of the planned latency per batch:",
         name.c_str(), kind_name.c_str(), runs);
  for (size_t i = 0; i < all[0].size(); ++i) {
    double lo = 1e18, hi = 0;
    for (auto& pts : all) lo = std::min(lo, pts[i].ms), hi = std::max(hi, pts[i].ms);
    double spread = hi / lo - 1;
    worst = std::max(worst, spread);
    printf("  b=%d %.1f%%", all[0][i].batch, 100 * spread);
  }
  printf("\nworst %.1f%% (target <= 10%%: %s)\n", 100 * worst, worst <= 0.10 ? "met" : "NOT met");
  // The same for the p99 of every run (outliers included): what profiles planned with before.
  double worst_p99 = 0;
  for (size_t i = 0; i < all[0].size(); ++i) {
    double lo = 1e18, hi = 0;
    for (auto& pts : all) lo = std::min(lo, pts[i].p99_ms), hi = std::max(hi, pts[i].p99_ms);
    worst_p99 = std::max(worst_p99, hi / lo - 1);
  }
  printf("the p99 of all runs, outliers included, spreads up to %.1f%%\n", 100 * worst_p99);
  return 0;
}
