// bench/cache: what the response cache saves. A stream of which half the requests repeat an
// input sent before (`sloserve load --repeat 0.5`) against one node (every role, one emulated
// device), with the pipeline's response cache and without it, side by side: attainment, the
// requests and batches the device ran (from its /metrics) and the device time they took by the
// model's profile. Then the cost of a lookup (hashing the inputs and finding them) at the bench's
// input size and at 602 KB, as the frontend does it.
//
// usage: bench_cache [seconds per run, default 10] [rate, default 150]

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "actors/node_runtime.hpp"
#include "actors/response_cache.hpp"
#include "bench/harness.hpp"
#include "loadgen/load.hpp"

namespace {

using namespace sloserve;

constexpr double alpha_ms = 2.0, beta_ms = 0.2;

std::string cluster(bool cached) {
  return std::string(R"(cluster: {name: cache-bench}
nodes:
  - {name: n, address: tcp://127.0.0.1:0, roles: [controller, frontend, worker], metrics: "127.0.0.1:0",
     devices: [{kind: emulated, count: 1}]}
models:
  - name: m
    input: {dtype: float32, shape: [256]}
    output: {dtype: float32, shape: [16]}
    max_batch: 8
    profile: {alpha_ms: 2.0, beta_ms: 0.2}
pipelines:
  - {name: p, slo_ms: 100, response_cache: )") +
         (cached ? "true" : "false") + ", stages: [{name: s, model: m}]}\n";
}

// GET http://127.0.0.1:`port``path`: the body, or empty.
std::string http_get(int port, const std::string& path) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
  std::string out;
  if (connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to) == 0) {
    auto req = "GET " + path + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    if (send(fd, req.data(), req.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(req.size())) {
      char buf[65536];
      for (ssize_t n; (n = recv(fd, buf, sizeof buf, 0)) > 0;) out.append(buf, static_cast<size_t>(n));
    }
  }
  close(fd);
  auto body = out.find("\r\n\r\n");
  return body == std::string::npos ? std::string() : out.substr(body + 4);
}

// The value of the sample `series` (its name and labels as written) in `text`; 0 when absent.
double sample(const std::string& text, const std::string& series) {
  auto at = text.find("\n" + series + " ");
  return at == std::string::npos ? 0 : std::stod(text.substr(at + series.size() + 2));
}

struct run_result {
  load_summary load;
  double requests_run = 0, batches_run = 0;
  double device_s() const { return (alpha_ms * requests_run + beta_ms * batches_run) / 1e3; }
};

run_result run(bool cached, double seconds, double rate) {
  auto cfg = std::make_shared<cluster_config>(bench::parse_or_exit(cluster(cached), "cache-bench.yaml"));
  node_runtime node(cfg, "n");
  if (auto started = node.start(); !started) {
    fprintf(stderr, "node: %s\n", started.error().c_str());
    std::exit(1);
  }
  load_options o;
  o.address = node.endpoint();
  o.pipeline = "p";
  o.slo_ms = 100;
  o.input = cfg->models[0].input;
  o.rate = rate;
  o.warmup_s = 2;
  o.duration_s = seconds;
  o.grace_ms = 1000;
  o.repeat = 0.5;
  run_result out;
  if (auto ran = run_load(o))
    out.load = std::move(*ran);
  else
    fprintf(stderr, "load: %s\n", ran.error().c_str());
  auto metrics = http_get(node.metrics_port(), "/metrics");
  out.requests_run = sample(metrics, "sloserve_batch_size_sum{model=\"m\"}");
  out.batches_run = sample(metrics, "sloserve_batch_size_count{model=\"m\"}");
  node.stop();
  return out;
}

// Microseconds of `n` lookups of inputs of `bytes` bytes among 64 kept, half of them hits: p50, p99.
std::pair<double, double> lookups(size_t bytes, int n) {
  response_cache cache(64ULL << 20);
  std::vector<std::vector<tensor>> inputs;
  for (uint64_t i = 0; i < 128; ++i) inputs.push_back({make_tensor({dtype::uint8, {static_cast<int64_t>(bytes)}}, i)});
  std::vector<tensor> outputs{make_tensor({dtype::float32, {16}}, 1, "output")};
  for (size_t i = 0; i < 64; ++i) cache.insert(cache.key_of("model m 1", inputs[i]), outputs);
  std::vector<double> us;
  for (int i = 0; i < n; ++i) {
    auto& in = inputs[static_cast<size_t>(i * 7919) % inputs.size()];
    auto t0 = std::chrono::steady_clock::now();
    auto hit = cache.find(cache.key_of("model m 1", in));
    us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
    if (hit && hit->empty()) std::abort();
  }
  std::sort(us.begin(), us.end());
  return {us[us.size() / 2], us[us.size() * 99 / 100]};
}

}  // namespace

int main(int argc, char** argv) {
  double seconds = argc > 1 ? std::atof(argv[1]) : 10;
  double rate = argc > 2 ? std::atof(argv[2]) : 150;
  bench::log_to_stderr();
  printf("half the requests repeat one of the last 64 inputs; %.0f q/s for %.0f s after 2 s, SLO 100 ms\n", rate,
         seconds);
  printf("cache   attainment   requests run  batches run  device s\n");
  auto off = run(false, seconds, rate);
  auto on = run(true, seconds, rate);
  for (auto* r : {&off, &on})
    printf("%-6s  %9.2f%%   %12.0f %12.0f %9.2f\n", r == &off ? "off" : "on", 100 * r->load.attainment, r->requests_run,
           r->batches_run, r->device_s());
  double ratio = on.device_s() > 0 ? off.device_s() / on.device_s() : 0;
  printf("device time without the cache / with it: %.2fx (target >= 1.8x at the same attainment)\n", ratio);
  auto small = lookups(1024, 100000);
  auto large = lookups(602112, 2000);
  printf("lookup of a 1 KB input: p50 %.2f us, p99 %.2f us (target p99 <= 20 us); 602 KB: p50 %.1f us, p99 %.1f us\n",
         small.first, small.second, large.first, large.second);
  return 0;
}
