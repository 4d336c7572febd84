// bench/ingress: every ingress of a frontend against the ZeroMQ one, in one run.
//
// A no-op model (l(b) = 0.001·b + 0.01 ms) on one emulated device, a controller-and-frontend node
// with the KServe v2 HTTP and gRPC ingresses and a worker node (`sloserve up`), and the load
// client on the same machine (`sloserve load --protocol zmq|http|grpc`, closed loop). For each
// ingress: p50 at concurrency 1 and throughput at concurrency N; then each ratio to ZeroMQ. Then
// 602 KB inputs (a 224x224 float image, the same no-op cost) at 16 in flight over each ingress,
// their bytes in the request and then through a registered shared-memory region.
// Then a slowloris: 1,000 connections from another loopback address (127.0.0.2), each sending
// half a request header and holding on (the file lets one address hold them all), and the HTTP
// p99 at concurrency 8 with them against without them.
//
// usage: bench_ingress [seconds per run, default 5] [concurrency, default 64]

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "apps/child_process.hpp"
#include "config/cluster_config.hpp"

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace std::chrono_literals;

const char* cluster_yaml = R"(cluster: {name: ingress-bench}
nodes:
  - {name: ctl, address: tcp://127.0.0.1:0, roles: [controller, frontend], http: "127.0.0.1:0", grpc: "127.0.0.1:0"}
  - {name: w1, address: tcp://127.0.0.1:0, roles: [worker], devices: [{kind: emulated, count: 1}]}
models:
  - name: noop
    input: {dtype: float32, shape: [16]}
    output: {dtype: float32, shape: [4]}
    max_batch: 64
    profile: {alpha_ms: 0.001, beta_ms: 0.01}
  - name: image
    input: {dtype: float32, shape: [3, 224, 224]}
    output: {dtype: float32, shape: [4]}
    max_batch: 64
    profile: {alpha_ms: 0.001, beta_ms: 0.01}
pipelines:
  - {name: noop, slo_ms: 100, stages: [{name: s, model: noop}]}
  - {name: image, slo_ms: 100, stages: [{name: s, model: image}]}
runtime: {http_connections_per_address: 2000, client_shared_memory: true}
)";

// `n` connections from 127.0.0.2 to HOST:PORT, each having sent half a request header.
std::vector<int> half_open(const std::string& host_port, int n) {
  std::vector<int> out;
  auto colon = host_port.rfind(':');
  for (int i = 0; i < n; ++i) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in from{}, to{};
    from.sin_family = to.sin_family = AF_INET;
    inet_pton(AF_INET, "127.0.0.2", &from.sin_addr);
    inet_pton(AF_INET, host_port.substr(0, colon).c_str(), &to.sin_addr);
    to.sin_port = htons(static_cast<uint16_t>(std::stoi(host_port.substr(colon + 1))));
    const char half[] = "POST /v2/models/noop/infer HTTP/1.1\r\nHost: x\r\nContent-Le";
    if (bind(fd, reinterpret_cast<sockaddr*>(&from), sizeof from) != 0 ||
        connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to) != 0 ||
        send(fd, half, sizeof half - 1, MSG_NOSIGNAL) < 0) {
      close(fd);
      continue;
    }
    out.push_back(fd);
  }
  return out;
}

struct result {
  double rps = 0, p50 = 0, p99 = 0;
  int64_t lost = 0, errors = 0;
};

// A closed loop of `concurrency` requests to `pipeline` over `protocol`; `shared`: their tensors
// through a registered shared-memory region.
result load(const fs::path& dir, const std::string& protocol, int concurrency, int seconds,
            const std::string& pipeline = "noop", bool shared = false) {
  auto out = dir / ("load-" + protocol + "-" + std::to_string(concurrency) + ".json");
  std::vector<std::string> args{"sloserve",
                                "load",
                                "-c",
                                (dir / "resolved.yaml").string(),
                                "--pipeline",
                                pipeline,
                                "--protocol",
                                protocol,
                                "--concurrency",
                                std::to_string(concurrency),
                                "--duration",
                                std::to_string(seconds),
                                "--warmup",
                                "1",
                                "--json",
                                out.string()};
  if (shared) args.push_back("--shared-memory");
  auto p = sloserve::spawn_child(SLOSERVE_BIN, args, dir / "load.log");
  int status = 0;
  if (!p.wait_for(std::chrono::seconds(seconds + 60), status) || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::fprintf(stderr, "load --protocol %s failed:\n%s\n", protocol.c_str(), p.output().c_str());
    std::exit(1);
  }
  auto s = json::parse(std::ifstream(out));
  return {s["goodput_rps"].get<double>(), s["latency_ms"]["p50"].get<double>(), s["latency_ms"]["p99"].get<double>(),
          s["lost"].get<int64_t>(), s["errors"].get<int64_t>()};
}

}  // namespace

int main(int argc, char** argv) {
  int seconds = argc > 1 ? std::atoi(argv[1]) : 5;
  int concurrency = argc > 2 ? std::atoi(argv[2]) : 64;
  auto dir = fs::temp_directory_path() / ("sloserve-bench-ingress-" + std::to_string(getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "cluster.yaml") << cluster_yaml;
  auto up = sloserve::spawn_up(SLOSERVE_BIN, dir);
  if (up.output().find("cluster up") == std::string::npos) {
    std::fprintf(stderr, "the cluster did not come up:\n%s\n", up.output().c_str());
    up.stop();
    return 1;
  }
  std::printf("ingress   conc 1: req/s   p50 ms | conc %d: req/s   p50 ms   p99 ms | lost errors\n", concurrency);
  std::vector<std::string> protocols{"zmq", "http", "grpc"};
  std::vector<std::pair<result, result>> results;
  for (auto& protocol : protocols) {
    auto one = load(dir, protocol, 1, seconds);
    auto many = load(dir, protocol, concurrency, seconds);
    results.emplace_back(one, many);
    std::printf("%-8s  %12.0f %8.3f | %14.0f %8.3f %8.3f | %4lld %6lld\n", protocol.c_str(), one.rps, one.p50, many.rps,
                many.p50, many.p99, static_cast<long long>(one.lost + many.lost),
                static_cast<long long>(one.errors + many.errors));
  }
  auto& zmq = results.front();
  for (size_t i = 1; i < protocols.size(); ++i) {
    auto& r = results[i];
    std::printf(
        "%s vs zmq: p50 at concurrency 1 %.2fx (target <= 2x for http), throughput at %d %.2fx (%.0f req/s; "
        "target >= 15000)\n",
        protocols[i].c_str(), r.first.p50 / zmq.first.p50, concurrency, r.second.rps / zmq.second.rps, r.second.rps);
  }
  // 602 KB inputs (a 224x224 float image) over each ingress: their bytes, then through shared memory.
  std::printf("602 KB inputs, %d in flight: req/s with bytes | through shared memory (ratio) | lost\n", 16);
  double zmq_bytes = 0;
  for (auto& protocol : protocols) {
    auto bytes = load(dir, protocol, 16, seconds, "image");
    auto shared = load(dir, protocol, 16, seconds, "image", true);
    if (protocol == "zmq") zmq_bytes = bytes.rps;
    std::printf("%-8s  %8.0f (%.2fx zmq) | %8.0f (%.2fx) | %lld\n", protocol.c_str(), bytes.rps, bytes.rps / zmq_bytes,
                shared.rps, shared.rps / bytes.rps, static_cast<long long>(bytes.lost + shared.lost));
  }
  // The slowloris. The ingress closes a request not sent whole within its timeout (10 s): the
  // measured run fits within it.
  auto http = sloserve::load_cluster_config(dir / "resolved.yaml").config->find_node("ctl")->http;
  int secs = std::min(seconds, 5);
  auto calm = load(dir, "http", 8, secs);
  auto slow = half_open(http, 1000);
  auto stalled = load(dir, "http", 8, secs);
  for (int fd : slow) close(fd);
  std::printf(
      "http with %zu half-open connections from one address: p99 %.3f ms vs %.3f ms without (%.2fx; target "
      "<= 2x), %.0f vs %.0f req/s, lost %lld\n",
      slow.size(), stalled.p99, calm.p99, stalled.p99 / calm.p99, stalled.rps, calm.rps,
      static_cast<long long>(stalled.lost + calm.lost));
  up.stop();
  fs::remove_all(dir);
  return 0;
}
