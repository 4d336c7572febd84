// bench/images: what stacking a batch of JPEG images costs a device, on one thread against
// several, in one run. A batch of camera-sized JPEGs (640x480, the load client's frames) goes through a cpu
// device's execute() for small_cnn with `preprocess: {from: image}`: each image is decoded,
// resized to 64x64 and normalized into its row, then the (small) model runs; the time is almost
// all the stacking. The device stacks a batch's rows on its `threads` at once.
//
// Then the same JPEGs served: ResNet-18 (resnet18_from_0.pt, 64x64 input, `preprocess: {from:
// image}`) on a cpu device of `threads` threads in a one-node cluster (`sloserve up`), sent by the
// load client (closed loop, 2·batch in flight), against a raw loop that decodes and runs the same
// batches on an executor of the same threads. The node's profile is the raw loop's own l(1) and
// l(batch), so that it plans the batches the loop runs.
//
// Usage: bench_images MODELS_DIR [batch=16] [threads=2] [seconds=3]
// small_cnn.pt and resnet18_from_0.pt are test models (tools/export_models.py writes them into
// build/models).

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "apps/child_process.hpp"
#include "config/cluster_config.hpp"
#include "gpu/executor.hpp"
#include "loadgen/clients.hpp"
#include "loadgen/load.hpp"

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

// ResNet-18 on `threads` threads fed JPEGs: the raw loop's images/s against the served ones,
// printed; false when either could not run.
bool served_against_raw(const std::string& dir, const std::vector<std::vector<tensor>>& reqs, int threads,
                        double seconds) {
  model_spec m;
  m.name = "r18";
  m.path = std::filesystem::absolute(dir + "/resnet18_from_0.pt").string();
  m.input = {dtype::float32, {3, 64, 64}};
  m.output = {dtype::float32, {1000}};
  m.max_batch = static_cast<int>(reqs.size());
  m.preprocess = image_preprocess{};
  auto ex = make_executor(device_kind::cpu, 0, threads);
  if (!ex || !(*ex)->load(m)) {
    fprintf(stderr, "cannot load %s on a cpu executor\n", m.path.c_str());
    return false;
  }
  std::vector<const std::vector<tensor>*> all, one;
  for (auto& r : reqs) all.push_back(&r);
  one.push_back(&reqs.front());
  int b = static_cast<int>(reqs.size());
  double raw_one = batches_per_s(**ex, m, one, std::min(seconds, 1.0));
  double raw = batches_per_s(**ex, m, all, seconds) * b;
  ex->reset();  // its threads are the node's now
  if (raw_one <= 0 || raw <= 0) return false;
  double l1 = 1e3 / raw_one, lb = std::max(l1, 1e3 * b / raw);
  namespace fs = std::filesystem;
  auto work = fs::temp_directory_path() / ("sloserve-bench-images-" + std::to_string(getpid()));
  fs::create_directories(work);
  std::ofstream(work / "cluster.yaml")
      << "nodes:\n  - {name: n, address: \"tcp://127.0.0.1:0\", roles: [controller, frontend, worker], devices: "
         "[{kind: "
         "cpu, count: 1, threads: "
      << threads << "}]}\nmodels:\n  - {name: r18, path: " << m.path
      << ", input: {dtype: float32, shape: [3, 64, 64]}, output: {dtype: float32, shape: [1000]}, max_batch: " << b
      << ", preprocess: {from: image}, profile: {batch: [1, " << b << "], latency_ms: [" << l1 << ", " << lb
      << "]}}\npipelines:\n  - {name: p, slo_ms: 5000, stages: [{name: s, model: r18}]}\n";
  auto up = spawn_up(SLOSERVE_BIN, work);
  auto resolved = load_cluster_config((work / "resolved.yaml").string());
  bool ok = resolved.config.has_value();
  double served = 0;
  uint64_t lost = 0, not_ok = 0;
  if (ok) {
    load_options o;
    o.address = resolved.config->find_node("n")->address;
    o.pipeline = "p";
    o.slo_ms = 5000;
    o.concurrency = 2 * b;
    o.threads = 1;
    o.duration_s = seconds;
    o.warmup_s = 1;
    o.wait_ready_s = 60;
    for (auto& r : reqs) o.images.push_back(r.front());
    auto s = run_load(o);
    ok = s.has_value();
    if (ok) {
      served = static_cast<double>(s->ok) / seconds;
      lost = s->lost;
      not_ok = s->sent - s->ok;
      if (not_ok) fprintf(stderr, "%s", s->to_text().c_str());
    } else {
      fprintf(stderr, "%s\n", s.error().c_str());
    }
  } else {
    fprintf(stderr, "the node did not start: %s\n", up.output().c_str());
  }
  up.stop();
  fs::remove_all(work);
  if (!ok) return false;
  printf("\nResNet-18 (64x64) fed those JPEGs on a cpu device of %d threads, batches of %d\n", threads, b);
  printf("%-28s %12s %12s %10s\n", "", "raw loop", "served", "ratio");
  printf("%-28s %12.1f %12.1f %9.2fx\n", "images/s", raw, served, served / raw);
  printf("served: %lu not OK, %lu lost; target: served >= 0.9x the raw loop (%s)\n", (unsigned long)not_ok,
         (unsigned long)lost, served >= 0.9 * raw ? "met" : "NOT met");
  return true;
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
  one->reset();
  many->reset();
  bool served = served_against_raw(dir, reqs, threads, seconds);
  return a > 0 && b > 0 && served ? 0 : 1;
}
