// bench/images: what stacking a batch of JPEG images costs a device, on one thread against
// several, in one run. A batch of camera-sized JPEGs (640x480, the load client's frames) goes through a cpu
// device's execute() for small_cnn with `preprocess: {from: image}`: each image is decoded,
// resized to 64x64 and normalized into its row, then the (small) model runs; the time is almost
// all the stacking. The device stacks a batch's rows on its `threads` at once.
//
// Usage: bench_images MODELS_DIR [batch=16] [threads=2] [seconds=3]
// small_cnn.pt is one of the test models (tools/export_models.py writes it into build/models).

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "gpu/executor.hpp"
#include "loadgen/clients.hpp"

using namespace sloserve;

namespace {

// Batches per second through `ex` (after one warm-up batch), over `seconds`.
double batches_per_s(device_executor& ex, const model_spec& m, const std::vector<const std::vector<tensor>*>& in,
                     double seconds) {
  auto warm = ex.execute(m, in);
  if (!warm.error.empty()) {
    fprintf(stderr, "%s\n", warm.error.c_str());
    return 0;
  }
  auto start = std::chrono::steady_clock::now();
  int n = 0;
  double elapsed = 0;
  for (; elapsed < seconds; ++n) {
    ex.execute(m, in);
    elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  return n / elapsed;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s MODELS_DIR [batch=16] [threads=2] [seconds=3]\n", argv[0]);
    return 2;
  }
  std::string dir = argv[1];
  int batch = argc > 2 ? std::atoi(argv[2]) : 16;
  int threads = argc > 3 ? std::atoi(argv[3]) : 2;
  double seconds = argc > 4 ? std::atof(argv[4]) : 3;
  model_spec m;
  m.name = "small_cnn";
  m.path = dir + "/small_cnn.pt";
  m.input = {dtype::float32, {3, 64, 64}};
  m.output = {dtype::float32, {10}};
  m.max_batch = batch;
  m.preprocess = image_preprocess{};
  if (!std::filesystem::exists(m.path)) {
    fprintf(stderr, "%s is missing\n", m.path.c_str());
    return 2;
  }
  std::vector<std::vector<tensor>> reqs;
  size_t jpeg_bytes = 0;
  for (int i = 0; i < batch; ++i) {
    auto jpeg = camera_frame_jpeg(480, 640, static_cast<uint64_t>(i));  // what `load --clients` sends
    jpeg_bytes += jpeg.size();
    tensor t;
    t.name = "image";
    t.type = dtype::uint8;
    t.shape = {static_cast<int64_t>(jpeg.size())};
    t.data = std::move(jpeg);
    reqs.push_back({std::move(t)});
  }
  std::vector<const std::vector<tensor>*> in;
  for (auto& r : reqs) in.push_back(&r);
  auto one = make_executor(device_kind::cpu, 0, 1);
  auto many = make_executor(device_kind::cpu, 0, threads);
  if (!one || !many) {
    fprintf(stderr, "no cpu executor: %s\n", (!one ? one.error() : many.error()).c_str());
    return 1;
  }
  if (auto ok = (*one)->load(m); !ok) {
    fprintf(stderr, "%s\n", ok.error().c_str());
    return 1;
  }
  if (auto ok = (*many)->load(m); !ok) return 1;
  printf("a batch of %d JPEGs (640x480, %zu KB in all) into small_cnn's 64x64 rows, cpu device\n", batch,
         jpeg_bytes / 1024);
  double a = batches_per_s(**one, m, in, seconds);
  double b = batches_per_s(**many, m, in, seconds);
  printf("%-28s %12s %12s %10s\n", "", "1 thread", (std::to_string(threads) + " threads").c_str(), "ratio");
  printf("%-28s %12.1f %12.1f %9.2fx\n", "images/s", a * batch, b * batch, b / a);
  printf("%-28s %12.2f %12.2f\n", "ms per batch", 1e3 / a, 1e3 / b);
  return a > 0 && b > 0 ? 0 : 1;
}
