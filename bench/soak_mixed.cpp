// bench_soak --mixed: a week of an operator's changes in half an hour. Beside honest load at 80%
// of what the workers that stay up carry: a rolling worker restart every --restart-every
// seconds, an `apply` every --apply-every seconds (the canary's weights flipped, the SLO
// changed, a pipeline added, the pipeline removed, in turn), a lull of --lull seconds every
// --lull-every seconds (the load sends nothing), and hostile clients throughout
// (loadgen/hostile.hpp). Reports what the load got (outside the lulls' first second), what each
// apply answered, the resident memory of every node at minute 5 and at the end, and the log lines
// a minute.

#include "bench/soak_mixed.hpp"

#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "apps/child_process.hpp"
#include "loadgen/hostile.hpp"

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using sloserve::child_process;

namespace sloserve::bench {

namespace {

size_t log_lines(const fs::path& dir) {
  size_t n = 0;
  for (auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".log" && e.path().filename() != "load.log") {
      std::ifstream in(e.path());
      n += static_cast<size_t>(std::count(std::istreambuf_iterator<char>(in), {}, '\n'));
    }
  return n;
}

// The cluster file at apply step `step` (0: as started). The pipeline of two_stage.yaml, its
// classifier in two versions behind a canary; each step changes one thing from the step before.
std::string cluster_yaml(int workers, int step) {
  std::string y =
      "cluster: {name: soak}\nnodes:\n"
      "  - {name: ctl, address: tcp://127.0.0.1:0, roles: [controller, frontend], http: \"127.0.0.1:0\"}\n";
  for (int w = 1; w <= workers; ++w)
    y += "  - {name: w" + std::to_string(w) +
         ", address: tcp://127.0.0.1:0, roles: [worker], devices: [{kind: emulated, count: 1}]}\n";
  int phase = step % 4;  // 0 as started, 1 canary flipped, 2 SLO changed, 3 a pipeline added
  bool flipped = phase >= 1, slower = phase >= 2, extra = phase == 3;
  y += R"(models:
  - {name: det, input: {dtype: float32, shape: [3, 32, 32]}, output: {dtype: float32, shape: [8, 6]}, max_batch: 8,
     profile: {batch: [1, 2, 4, 8], latency_ms: [8, 10, 14, 22]}}
  - {name: cls, input: {dtype: float32, shape: [6]}, output: {dtype: float32, shape: [10]}, max_batch: 16,
     profile: {alpha_ms: 0.5, beta_ms: 4}}
  - {name: cls, version: 2, input: {dtype: float32, shape: [6]}, output: {dtype: float32, shape: [10]}, max_batch: 16,
     profile: {alpha_ms: 0.5, beta_ms: 4}}
pipelines:
  - name: traffic
    slo_ms: )" +
       std::string(slower ? "250" : "200") +
       R"(
    stages:
      - {name: detect, model: det}
      - {name: classify, model: cls, after: [detect], fanout: 1.5,
         versions: [{version: 1, weight: )" +
       (flipped ? "10" : "90") + "}, {version: 2, weight: " + (flipped ? "90" : "10") + "}]}\n";
  if (extra) y += "  - {name: extra, slo_ms: 300, stages: [{name: detect, model: det}]}\n";
  y += "runtime: {heartbeat_ms: 100, peer_timeout_ms: 500, max_payload_bytes: 1048576, max_client_queued_replies: "
       "1000}\n"
       "scheduler: {epoch_s: 20, min_epoch_s: 5}\n";
  return y;
}

bool in_lull(const mixed_options& o, double t) {
  double at = std::fmod(t, o.lull_every_s);
  double from = o.lull_every_s / 2 - o.lull_s / 2;  // mid-interval
  return t >= o.lull_every_s / 2 && at >= from && at < from + o.lull_s;
}

std::string address_of(const fs::path& resolved, const std::string& key) {
  std::ifstream in(resolved);
  std::stringstream text;
  text << in.rdbuf();
  std::smatch m;
  auto s = text.str();
  std::regex re(key == "http" ? "http: \"?(127\\.0\\.0\\.1:[0-9]+)" : "(tcp://127\\.0\\.0\\.1:[0-9]+)");
  return std::regex_search(s, m, re) ? std::string(m[1]) : std::string();
}

}  // namespace

long rss_kb(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  return -1;
}

void restart_worker(const fs::path& dir, const std::string& name, int k, std::map<std::string, pid_t>& pids,
                    std::vector<child_process>& restarted) {
  kill(pids[name], SIGTERM);
  std::this_thread::sleep_for(1s);
  for (auto& r : restarted)
    if (r.pid == pids[name]) r.stop();
  auto again = spawn_child(SLOSERVE_BIN, {"sloserve", "node", "-c", (dir / "resolved.yaml").string(), "--name", name},
                           dir / (name + "-" + std::to_string(k) + ".log"));
  pids[name] = again.pid;
  restarted.push_back(again);
}

int mixed_soak(const mixed_options& o) {
  double rate = 0.8 * 250 * (o.workers - 1), seconds = o.minutes * 60;
  auto dir = fs::temp_directory_path() / ("sloserve-soak-" + std::to_string(getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "cluster.yaml") << cluster_yaml(o.workers, 0);
  auto up = spawn_up(SLOSERVE_BIN, dir);
  if (up.output().find("cluster up") == std::string::npos) {
    fprintf(stderr, "cluster did not start:\n%s", up.output().c_str());
    return 1;
  }
  std::map<std::string, pid_t> pids;
  auto text = up.output();
  std::regex re("node (\\w+) pid ([0-9]+)");
  for (std::sregex_iterator it(text.begin(), text.end(), re), end; it != end; ++it)
    pids[(*it)[1]] = std::stoi((*it)[2]);
  auto ctl = address_of(dir / "resolved.yaml", "zmq"), http = address_of(dir / "resolved.yaml", "http");

  // The load: a trace of per-second rates, 0 in the lulls.
  std::ofstream trace(dir / "trace.txt");
  for (int t = 0; t < static_cast<int>(seconds); ++t) trace << (in_lull(o, t) ? 0 : rate) << "\n";
  trace.close();
  fprintf(stderr,
          "soak: mixed, %d workers, %.0f queries/s for %.0f s; a restart every %.0f s, an apply every %.0f s, a lull "
          "of %.0f s every %.0f s, hostile clients throughout (logs in %s)\n",
          o.workers, rate, seconds, o.restart_every_s, o.apply_every_s, o.lull_s, o.lull_every_s, dir.c_str());
  auto load =
      spawn_child(SLOSERVE_BIN,
                  {"sloserve", "load", "-c", (dir / "resolved.yaml").string(), "--pipeline", "traffic", "--trace",
                   (dir / "trace.txt").string(), "--arrival", "poisson", "--json", (dir / "load.json").string()},
                  dir / "load.log");
  hostile_clients attack({ctl, http});

  std::vector<child_process> restarted;
  std::map<std::string, long> rss_5min, rss_end;
  auto start = std::chrono::steady_clock::now();
  int next = 1, restarts = 0, applies = 0, applied = 0;
  std::map<std::string, int> apply_answers;
  size_t lines_start = 0;
  int status = 0;
  while (!load.wait_for(200ms, status)) {
    auto t = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (rss_5min.empty() && t >= std::min(300.0, seconds / 3)) {
      for (auto& [n, p] : pids) rss_5min[n] = rss_kb(p);
      lines_start = log_lines(dir);
    }
    if (t >= (applies + 1) * o.apply_every_s && t < seconds - o.apply_every_s / 2) {
      ++applies;
      auto file = dir / ("apply-" + std::to_string(applies) + ".yaml");
      std::ofstream(file) << cluster_yaml(o.workers, applies);
      auto a = spawn_child(SLOSERVE_BIN, {"sloserve", "apply", "-c", file.string(), "--address", ctl},
                           dir / ("apply-" + std::to_string(applies) + ".out"));
      int code = 0;
      bool done = a.wait_for(60s, code);
      bool ok = done && WIFEXITED(code) && WEXITSTATUS(code) == 0;
      applied += ok;
      auto said = a.output();
      apply_answers[ok ? "applied" : said.substr(0, said.find('\n'))]++;
      fprintf(stderr, "soak: t=%.0f s apply %d (step %d): %s", t, applies, applies % 4,
              ok ? "applied\n" : said.c_str());
    }
    if (t < (restarts + 1) * o.restart_every_s || t > seconds - o.restart_every_s / 2) continue;
    auto name = "w" + std::to_string(next);
    next = next % o.workers + 1;
    ++restarts;
    restart_worker(dir, name, restarts, pids, restarted);
    fprintf(stderr, "soak: t=%.0f s restarted %s\n", t, name.c_str());
  }
  auto elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (auto& [n, p] : pids) rss_end[n] = rss_kb(p);
  auto lines = log_lines(dir) - lines_start;
  attack.stop();
  for (auto& r : restarted) r.stop();
  up.stop();

  std::ifstream in(dir / "load.json");
  if (!in) {
    fprintf(stderr, "load wrote no summary:\n%s", load.output().c_str());
    return 1;
  }
  auto s = nlohmann::json::parse(in);
  // Attainment outside the lulls' first second (the second after each lull ends).
  uint64_t sent = 0, within = 0;
  auto& series = s["series"];
  for (size_t t = 0; t < series.size(); ++t) {
    if (t > 0 && in_lull(o, static_cast<double>(t - 1)) && !in_lull(o, static_cast<double>(t))) continue;
    sent += series[t]["sent"].get<uint64_t>();
    within += series[t]["ok_within_slo"].get<uint64_t>();
  }
  printf(
      "soak     mixed %.0f s at %.0f queries/s: %d rolling restarts, %d applies (%d applied), lulls of %.0f s every "
      "%.0f s, %lu hostile frames and connections\n",
      seconds, rate, restarts, applies, applied, o.lull_s, o.lull_every_s, static_cast<unsigned long>(attack.sent()));
  printf(
      "soak     sent %ld, lost %ld, errors %ld, dropped %ld, overloaded %ld; attainment %.4f, outside the lulls' first "
      "second %.4f\n",
      s["sent"].get<long>(), s["lost"].get<long>(), s["errors"].get<long>(), s["dropped"].get<long>(),
      s["overloaded"].get<long>(), s["attainment"].get<double>(), sent ? double(within) / double(sent) : 0.0);
  for (auto& [reason, n] : s["reasons"].items())
    printf("soak       %6d  %s\n", n.get<int>(), reason.substr(0, 150).c_str());
  for (auto& [answer, n] : apply_answers) printf("soak     apply: %d x %s\n", n, answer.c_str());
  for (auto& [n, kb] : rss_5min)
    printf("soak     RSS %-4s %7.1f MB at minute %.0f, %7.1f MB at the end (%+.1f%%)\n", n.c_str(), kb / 1024.0,
           std::min(300.0, seconds / 3) / 60, rss_end[n] / 1024.0, 100.0 * (rss_end[n] - kb) / std::max(1L, kb));
  double minutes_measured = std::max(1.0, (elapsed - std::min(300.0, seconds / 3)) / 60);
  printf("soak     log %.0f lines a minute after minute %.0f\n", lines / minutes_measured,
         std::min(300.0, seconds / 3) / 60);
  fs::remove_all(dir);
  return s["lost"].get<long>() == 0 ? 0 : 3;
}

}  // namespace sloserve::bench
