// bench/soak: a long run at 80% of capacity with a rolling worker restart. Reports the resident
// memory (RSS) of every node at the start and at the end, attainment and lost.
//
// Usage: bench_soak [--minutes 10] [--restart-every 60] [--workers 4]
//        bench_soak --mixed [--minutes 30] [--restart-every 120] [--apply-every 180]
//                   [--lull-every 600] [--lull 60] [--workers 4]   (bench/soak_mixed.cpp)
//
// The cluster: a controller + frontend node and N worker nodes with one emulated device each,
// started by `sloserve up` on loopback. One device carries about 250 queries/s of the pipeline
// in tests/integration/two_stage.yaml (the derivation is there); the load is 80% of what the
// N - 1 workers that stay up during a restart carry. Every `--restart-every` seconds the next
// worker gets SIGTERM and is started again with `sloserve node` a second later.

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "apps/child_process.hpp"
#include "bench/soak_mixed.hpp"

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using sloserve::child_process;

namespace {

std::string cluster_yaml(int workers) {
  std::string y = "nodes:\n  - {name: ctl, address: tcp://127.0.0.1:0, roles: [controller, frontend]}\n";
  for (int w = 1; w <= workers; ++w)
    y += "  - {name: w" + std::to_string(w) +
         ", address: tcp://127.0.0.1:0, roles: [worker], devices: [{kind: emulated, count: 1}]}\n";
  std::ifstream in(SLOSERVE_TWO_STAGE_YAML);
  std::stringstream shared;
  shared << in.rdbuf();
  return y + shared.str() + "scheduler: {epoch_s: 20, min_epoch_s: 5}\n";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && !std::strcmp(argv[1], "--mixed")) {
    sloserve::bench::mixed_options o;
    for (int i = 2; i + 1 < argc; i += 2) {
      std::string k = argv[i];
      double v = std::atof(argv[i + 1]);
      if (k == "--minutes")
        o.minutes = v;
      else if (k == "--restart-every")
        o.restart_every_s = v;
      else if (k == "--apply-every")
        o.apply_every_s = v;
      else if (k == "--lull-every")
        o.lull_every_s = v;
      else if (k == "--lull")
        o.lull_s = v;
      else if (k == "--workers")
        o.workers = static_cast<int>(v);
      else {
        fprintf(stderr, "bench_soak --mixed: unknown option '%s'\n", argv[i]);
        return 2;
      }
    }
    if ((argc - 2) % 2 || o.workers < 2 || o.minutes <= 0 || o.lull_s >= o.lull_every_s) {
      fprintf(stderr,
              "usage: bench_soak --mixed [--minutes M] [--restart-every S] [--apply-every S] [--lull-every S] "
              "[--lull S] [--workers N>=2]; a lull shorter than its period\n");
      return 2;
    }
    return sloserve::bench::mixed_soak(o);
  }
  double minutes = 10, restart_every = 60;
  int workers = 4;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--minutes"))
      minutes = std::atof(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--restart-every"))
      restart_every = std::atof(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--workers"))
      workers = std::atoi(argv[i + 1]);
    else {
      fprintf(stderr, "usage: bench_soak [--minutes M] [--restart-every S] [--workers N]\n");
      return 2;
    }
  }
  double rate = 0.8 * 250 * (workers - 1);
  auto dir = fs::temp_directory_path() / ("sloserve-soak-" + std::to_string(getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "cluster.yaml") << cluster_yaml(workers);
  auto up = sloserve::spawn_child(
      SLOSERVE_BIN,
      {"sloserve", "up", "-c", (dir / "cluster.yaml").string(), "--write-config", (dir / "resolved.yaml").string()},
      dir / "up.log");
  for (int i = 0; i < 300 && up.output().find("cluster up") == std::string::npos; ++i)
    std::this_thread::sleep_for(50ms);
  if (up.output().find("cluster up") == std::string::npos) {
    fprintf(stderr, "cluster did not start:\n%s", up.output().c_str());
    return 1;
  }
  std::map<std::string, pid_t> pids;
  auto text = up.output();
  std::regex re("node (\\w+) pid ([0-9]+)");
  for (std::sregex_iterator it(text.begin(), text.end(), re), end; it != end; ++it)
    pids[(*it)[1]] = std::stoi((*it)[2]);

  auto seconds = minutes * 60;
  fprintf(stderr, "soak: %d workers, %.0f queries/s for %.0f s, a worker restarts every %.0f s (logs in %s)\n", workers,
          rate, seconds, restart_every, dir.c_str());
  auto load = sloserve::spawn_child(SLOSERVE_BIN,
                                    {"sloserve", "load", "-c", (dir / "resolved.yaml").string(), "--pipeline",
                                     "traffic", "--rate", std::to_string(rate), "--duration", std::to_string(seconds),
                                     "--arrival", "poisson", "--json", (dir / "load.json").string()},
                                    dir / "load.log");
  std::this_thread::sleep_for(5s);
  std::map<std::string, long> rss_start;
  for (auto& [n, p] : pids) rss_start[n] = sloserve::bench::rss_kb(p);

  std::vector<child_process> restarted;
  std::set<std::string> was_restarted;
  auto start = std::chrono::steady_clock::now();
  int next = 1, restarts = 0;
  int status = 0;
  while (!load.wait_for(200ms, status)) {
    auto t = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (t < (restarts + 1) * restart_every || t > seconds - restart_every / 2) continue;
    auto name = "w" + std::to_string(next);
    next = next % workers + 1;
    ++restarts;
    sloserve::bench::restart_worker(dir, name, restarts, pids, restarted);
    was_restarted.insert(name);
    fprintf(stderr, "soak: t=%.0f s restarted %s\n", t, name.c_str());
  }
  std::map<std::string, long> rss_end;
  for (auto& [n, p] : pids) rss_end[n] = sloserve::bench::rss_kb(p);
  for (auto& r : restarted) r.stop();
  up.stop();

  std::ifstream in(dir / "load.json");
  if (!in) {
    fprintf(stderr, "load wrote no summary:\n%s", load.output().c_str());
    return 1;
  }
  auto s = nlohmann::json::parse(in);
  printf(
      "soak     %.0f s at %.0f queries/s, %d rolling restarts: sent %ld, attainment %.4f, lost %ld, errors %ld, "
      "dropped %ld\n",
      seconds, rate, restarts, s["sent"].get<long>(), s["attainment"].get<double>(), s["lost"].get<long>(),
      s["errors"].get<long>(), s["dropped"].get<long>());
  for (auto& [n, kb] : rss_start)
    printf("soak     RSS %-4s %7.1f MB at start, %7.1f MB at end%s\n", n.c_str(), kb / 1024.0, rss_end[n] / 1024.0,
           was_restarted.count(n) ? " (a restarted process at the end)" : " (the same process throughout)");
  fs::remove_all(dir);
  return s["lost"].get<long>() == 0 ? 0 : 3;
}
