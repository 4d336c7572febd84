// Past what the path to a worker carries: ResNet-50-sized requests (3x224x224 float32, 600 KB)
// to one emulated device with ResNet-50's profile as an H200 measured it (3,575 requests/s at batch
// 64), so that the host path (the client's sends, the frontend's copies, the worker's intake)
// gives out first. On a real `sloserve up` cluster, each rate in turn with Poisson arrivals, side
// by side: as shipped (the frontend refuses what would queue on a backed-up path, and sends
// budgets less the path's one-way delay) and with `runtime.path_guard: false`. Per rate: what was
// answered within the SLO per second, the attainment, the refusals, the drops, and how often a
// node took a peer for dead.
//
// Usage: bench_path_overload [rates=500,1000,1500,2000] [seconds=6] [client_threads=2]

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "apps/child_process.hpp"

using namespace sloserve;
namespace fs = std::filesystem;

namespace {

const char* yaml = R"(cluster: {name: path}
nodes:
  - {name: fe, address: tcp://127.0.0.1:0, roles: [controller, frontend]}
  - {name: gpu, address: tcp://127.0.0.1:0, roles: [worker], devices: [{kind: emulated, count: 1}]}
models:
  - name: r50
    input: {dtype: float32, shape: [3, 224, 224]}
    output: {dtype: float32, shape: [1000]}
    max_batch: 64
    profile: {batch: [1, 2, 4, 8, 16, 32, 64], latency_ms: [4.03, 4.25, 4.29, 4.55, 5.86, 9.40, 17.92]}
pipelines:
  - {name: classify, slo_ms: 100, stages: [{name: s, model: r50}]}
)";

struct row {
  double in_time_rps = 0, attainment = 0;
  uint64_t sent = 0, overloaded = 0, dropped = 0, errors = 0, lost = 0;
  size_t marked_down = 0;
};

size_t count_of(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// A fresh cluster (guarded or not), each rate in turn.
std::vector<row> run(bool guarded, const std::vector<double>& rates, double seconds, int threads) {
  auto dir = fs::temp_directory_path() / ("sloserve-path-" + std::to_string(getpid()) + (guarded ? "-on" : "-off"));
  fs::create_directories(dir);
  std::ofstream(dir / "cluster.yaml") << yaml << "runtime: {path_guard: " << (guarded ? "true" : "false") << "}\n";
  auto up = spawn_up(SLOSERVE_BIN, dir);
  if (up.output().find("cluster up") == std::string::npos) {
    fprintf(stderr, "cluster did not start:\n%s", up.output().c_str());
    std::exit(1);
  }
  std::vector<row> out;
  for (auto rate : rates) {
    auto down_before = count_of(up.output(), "marked down");
    auto json = dir / "load.json";
    std::vector<std::string> args{"sloserve",   "--log-level",
                                  "warn",       "load",
                                  "-c",         (dir / "resolved.yaml").string(),
                                  "--pipeline", "classify",
                                  "--rate",     std::to_string(rate),
                                  "--duration", std::to_string(seconds),
                                  "--arrival",  "poisson",
                                  "--warmup",   "1",
                                  "--threads",  std::to_string(threads),
                                  "--json",     json.string()};
    auto load = spawn_child(SLOSERVE_BIN, args, dir / "load.log");
    int status = 0;
    if (!load.wait_for(std::chrono::seconds(120), status) || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      fprintf(stderr, "load failed:\n%s", load.output().c_str());
      std::exit(1);
    }
    std::ifstream in(json);
    auto j = nlohmann::json::parse(in);
    row r;
    r.in_time_rps = j["goodput_rps"].get<double>();
    r.attainment = j["attainment"].get<double>();
    r.sent = j["sent"].get<uint64_t>();
    r.overloaded = j["overloaded"].get<uint64_t>();
    r.dropped = j["dropped"].get<uint64_t>();
    r.errors = j["errors"].get<uint64_t>();
    r.lost = j["lost"].get<uint64_t>();
    r.marked_down = count_of(up.output(), "marked down") - down_before;
    out.push_back(r);
    std::this_thread::sleep_for(std::chrono::seconds(2));  // what is in flight drains
  }
  up.stop();
  fs::remove_all(dir);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<double> rates{500, 1000, 1500, 2000};
  if (argc > 1) {
    rates.clear();
    std::stringstream ss(argv[1]);
    for (std::string r; std::getline(ss, r, ',');) rates.push_back(std::stod(r));
  }
  double seconds = argc > 2 ? std::atof(argv[2]) : 6;
  int threads = argc > 3 ? std::atoi(argv[3]) : 2;
  printf(
      "600 KB requests to one emulated ResNet-50 device (H200 profile), SLO 100 ms, Poisson, %.0f s a rate, "
      "%d client threads\n",
      seconds, threads);
  auto on = run(true, rates, seconds, threads);
  auto off = run(false, rates, seconds, threads);
  printf("%8s | %-55s | %-55s | %s\n", "req/s", "as shipped: in time/s, attainment, refused, dropped, errors, down",
         "path_guard off: the same", "in time, shipped/off");
  for (size_t i = 0; i < rates.size(); ++i) {
    auto cell = [](const row& r) {
      char b[128];
      snprintf(b, sizeof b, "%7.1f %6.1f%% %6llu %6llu %6llu %3zu (lost %llu)", r.in_time_rps, 100 * r.attainment,
               static_cast<unsigned long long>(r.overloaded), static_cast<unsigned long long>(r.dropped),
               static_cast<unsigned long long>(r.errors), r.marked_down, static_cast<unsigned long long>(r.lost));
      return std::string(b);
    };
    double ratio = off[i].in_time_rps > 0 ? on[i].in_time_rps / off[i].in_time_rps : 0;
    printf("%8.0f | %-55s | %-55s | %s\n", rates[i], cell(on[i]).c_str(), cell(off[i]).c_str(),
           off[i].in_time_rps > 0 ? (std::to_string(ratio).substr(0, 5) + "x").c_str() : "(none in time off)");
  }
  return 0;
}
