// Traffic as it comes back: the share of requests within the SLO in the first 1, 5 and 10 s
// after a tenfold step that follows 30 s of a trickle, and after 25 s of silence, per policy,
// beside its steady state. Each setting runs twice side by side: as shipped (devices a plan
// leaves free stay loaded as spares, plans hold the recent peak) and without either
// (`scheduler: {spares: false, peak_half_life_s: 0}`, the plan follows the measured rate alone).
// In `sloserve sim` at 1,000 devices (the traffic workload; Graft and the scaler on their
// example clusters), and on a real `sloserve up` cluster of 12 emulated devices.
//
// Usage: bench_surge [all|sim|cluster] [--quick] [--devices N] [--only POLICY]

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "apps/child_process.hpp"
#include "bench/harness.hpp"
#include "bench/workloads.hpp"
#include "sim/simulator.hpp"

using namespace sloserve;
namespace fs = std::filesystem;

namespace {

int fleet_devices = 1000;
std::string only;  // --only NAME: the rows of that setting alone

bool wanted(const std::string& name) {
  return only.empty() || name == only;
}

// The two traces: a tenth of `rate` for 30 s then `rate` for 30 s (the step at 30, steady state
// measured over 50-60); `rate` for 10 s, silence for 25 s, `rate` for 10 s (it returns at 35).
std::vector<double> step_trace(double rate) {
  std::vector<double> t(30, rate / 10);
  t.resize(60, rate);
  return t;
}
std::vector<double> lull_trace(double rate) {
  std::vector<double> t(10, rate);
  t.resize(35, 0);
  t.resize(45, rate);
  return t;
}

// Share within the SLO over seconds [from, to) of a summary's series (as load --json writes it).
double within(const nlohmann::json& series, size_t from, size_t to) {
  return load_summary::attainment_in(series, from, to);
}

struct figures {
  double step1 = 0, step5 = 0, step10 = 0, steady = 0, lull1 = 0, lull10 = 0;
  uint64_t lost = 0;
};

void print_header(const char* where) {
  printf("\n%s: share within the SLO after a tenfold step from a trickle (1 / 5 / 10 s), at steady state,\n", where);
  printf("and after 25 s of silence (1 / 10 s); as shipped vs without spares and peak\n");
  printf("%-34s %8s %8s %8s %8s  %8s %8s  %5s\n", "setting", "step 1s", "5s", "10s", "steady", "lull 1s", "10s",
         "lost");
}

void print_row(const std::string& name, const figures& f) {
  printf("%-34s %8.4f %8.4f %8.4f %8.4f  %8.4f %8.4f  %5lu\n", name.c_str(), f.step1, f.step5, f.step10, f.steady,
         f.lull1, f.lull10, static_cast<unsigned long>(f.lost));
  fflush(stdout);
}

// The scheduler options that turn spares and the peak off, spliced into a cluster file's text:
// into its `scheduler: {` where it has one, else as a line of their own.
std::string without_spares(std::string yaml) {
  const std::string off = "spares: false, peak_half_life_s: 0";
  if (auto at = yaml.find("scheduler: {"); at != std::string::npos) return yaml.insert(at + 12, off + ", ");
  return yaml + "scheduler: {" + off + "}\n";
}

cluster_config parse(const std::string& yaml) {
  return bench::parse_or_exit(yaml, "bench.yaml");
}

sim::result simulate(const cluster_config& cfg, const std::string& pipeline, const std::vector<double>& trace) {
  sim::options o;
  o.pipelines = {pipeline};
  o.trace = trace;
  o.warmup_s = 0;
  auto r = sim::simulate(cfg, o);
  if (!r) {
    fprintf(stderr, "sim: %s\n", r.error().c_str());
    std::exit(1);
  }
  return std::move(*r);
}

// The figures of a step run's and a lull run's per-second series, the step at `step_at` and the
// load back at `back_at`.
figures figures_of(const nlohmann::json& s, const nlohmann::json& l, uint64_t lost, size_t step_at = 30,
                   size_t back_at = 35) {
  return {within(s, step_at, step_at + 1),
          within(s, step_at, step_at + 5),
          within(s, step_at, step_at + 10),
          within(s, step_at + 20, step_at + 30),
          within(l, back_at, back_at + 1),
          within(l, back_at, back_at + 10),
          lost};
}

figures sim_figures(const std::string& yaml, const std::string& pipeline, double rate) {
  auto cfg = parse(yaml);
  auto step = simulate(cfg, pipeline, step_trace(rate));
  auto lull = simulate(cfg, pipeline, lull_trace(rate));
  return figures_of(step.summary.series, lull.summary.series, step.summary.lost + lull.summary.lost);
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    fprintf(stderr, "cannot read %s\n", path.c_str());
    std::exit(1);
  }
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void sim_section(bool quick) {
  int devices = quick ? 100 : fleet_devices;
  print_header(("sim, " + std::to_string(devices) + " devices, the traffic pipeline").c_str());
  // Queries/s per device: about two thirds of what nexus carries; Piccolo's least-cost plans
  // carry about half as much at steady state.
  for (auto [policy, per_device] : {std::pair{"nexus", 10.0}, {"batch-oblivious", 10.0}, {"piccolo", 5.0}}) {
    auto yaml = bench::nodes_yaml(devices, false) + bench::traffic_workload() + "scheduler: {policy: " + policy + "}\n";
    auto name = std::string(policy) + " at " + std::to_string(static_cast<int>(per_device * devices));
    if (!wanted(policy)) continue;
    print_row(name, sim_figures(yaml, "traffic", per_device * devices));
    print_row(name + " (without)", sim_figures(without_spares(yaml), "traffic", per_device * devices));
  }
  // Graft, IPA and the scaler on their example clusters (52 GPU shares; 24 device slots).
  auto example = [](const char* name, const std::string& header, const std::string& yaml, const char* pipeline,
                    double rate) {
    if (!wanted(name)) return;
    printf("-- %s\n", header.c_str());
    print_row(name, sim_figures(yaml, pipeline, rate));
    print_row(std::string(name) + " (without)", sim_figures(without_spares(yaml), pipeline, rate));
  };
  auto examples = std::string(SLOSERVE_EXAMPLES_DIR);
  example("graft", "graft example (4 devices in 52 shares), phones at 200 queries/s",
          read_file(examples + "/graft.yaml"), "phones", 200);
  example("ipa", "ipa example, video at 400 queries/s", read_file(examples + "/ipa.yaml"), "video", 400);
  auto scaled = read_file(examples + "/autoscale.yaml");
  for (auto policy : {"fa2", "biscale"}) {
    auto yaml = scaled;
    yaml.replace(yaml.find("policy: biscale"), 15, std::string("policy: ") + policy);
    example(policy,
            std::string("autoscale example (24 device slots, 48 cores) under ") + policy + ", p at 300 queries/s", yaml,
            "p", 300);
  }
}

// A fresh `sloserve up` cluster of `yaml` in a folder of its own, loaded by each of `loads` in
// turn (`sloserve load -c resolved.yaml` and the arguments given, writing load<k>.json), `pause_s`
// seconds apart; returns each load's summary.
std::vector<nlohmann::json> on_cluster(const std::string& yaml, const std::vector<std::vector<std::string>>& loads,
                                       const std::vector<double>& trace = {}, int pause_s = 0) {
  auto dir = fs::temp_directory_path() / ("sloserve-surge-" + std::to_string(getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "cluster.yaml") << yaml;
  {
    std::ofstream out(dir / "trace.txt");
    for (auto r : trace) out << r << "\n";
  }
  auto up = spawn_up(SLOSERVE_BIN, dir);
  if (up.output().find("cluster up") == std::string::npos) {
    fprintf(stderr, "cluster did not start:\n%s", up.output().c_str());
    std::exit(1);
  }
  std::vector<nlohmann::json> out;
  for (size_t k = 0; k < loads.size(); ++k) {
    if (k > 0) std::this_thread::sleep_for(std::chrono::seconds(pause_s));
    auto json = dir / ("load" + std::to_string(k) + ".json");
    std::vector<std::string> args{"sloserve", "load", "-c", (dir / "resolved.yaml").string()};
    for (auto& a : loads[k]) args.push_back(a == "TRACE" ? (dir / "trace.txt").string() : a);
    args.insert(args.end(), {"--json", json.string()});
    auto load = spawn_child(SLOSERVE_BIN, args, dir / "load.log");
    int status = 0;
    if (!load.wait_for(std::chrono::seconds(180), status) || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      fprintf(stderr, "load failed:\n%s", load.output().c_str());
      std::exit(1);
    }
    out.push_back(nlohmann::json::parse(read_file(json.string())));
  }
  up.stop();
  fs::remove_all(dir);
  return out;
}

// The traffic pipeline on a cluster, with both traces in turn (a fresh cluster each).
figures cluster_figures(const std::string& yaml, double rate) {
  auto step = on_cluster(yaml, {{"--pipeline", "traffic", "--trace", "TRACE"}}, step_trace(rate)).front();
  auto lull = on_cluster(yaml, {{"--pipeline", "traffic", "--trace", "TRACE"}}, lull_trace(rate)).front();
  return figures_of(step["series"], lull["series"], step["lost"].get<uint64_t>() + lull["lost"].get<uint64_t>());
}

// Jellyfish's video clients (15 frames/s, SLO 100 ms, unlimited uplinks) on its example cluster:
// one client for 30 s, then nine more join (a tenfold step); and ten clients for 10 s, 25 s of
// silence, then the ten again for 10 s.
figures jellyfish_figures(std::string yaml) {
  for (size_t at; (at = yaml.find("127.0.0.1:74")) != std::string::npos;) yaml.replace(at, 14, "127.0.0.1:0");
  std::vector<std::string> clients{"--pipeline",   "video", "--clients",       "10",
                                   "--client-fps", "15",    "--client-slo-ms", "100"};
  auto with = [&](std::vector<std::string> more) {
    more.insert(more.begin(), clients.begin(), clients.end());
    return more;
  };
  auto step = on_cluster(yaml, {with({"--duration", "60", "--client-join-s", "0,30,30,30,30,30,30,30,30,30"})});
  auto lull = on_cluster(yaml, {with({"--duration", "10"}), with({"--duration", "10"})}, {}, 25);
  return figures_of(step[0]["series"], lull[1]["series"],
                    step[0]["lost"].get<uint64_t>() + lull[0]["lost"].get<uint64_t>() + lull[1]["lost"].get<uint64_t>(),
                    30, 0);
}

void cluster_section() {
  // The traffic pipeline on 12 emulated devices: six for the detector, six for the classifiers.
  auto yaml = std::string(R"(cluster: {name: surge}
nodes:
  - {name: ctl, address: tcp://127.0.0.1:0, roles: [controller, frontend]}
  - {name: w1, address: tcp://127.0.0.1:0, roles: [worker], devices: [{kind: emulated, count: 6, models: [ssd]}]}
  - {name: w2, address: tcp://127.0.0.1:0, roles: [worker],
     devices: [{kind: emulated, count: 6, models: [car_classifier, face_recognizer]}]}
)") + bench::traffic_workload();
  if (wanted("nexus")) {
    print_header("sloserve up, 3 processes, 12 emulated devices, traffic at 150 queries/s");
    print_row("nexus", cluster_figures(yaml, 150));
    print_row("nexus (without)", cluster_figures(without_spares(yaml), 150));
  }
  if (!wanted("jellyfish")) return;
  print_header("sloserve up, 3 processes, the Jellyfish example (4 devices), 1 then 10 video clients at 15 frames/s");
  print_row("jellyfish", jellyfish_figures(read_file(std::string(SLOSERVE_EXAMPLES_DIR) + "/jellyfish.yaml")));
}

}  // namespace

int main(int argc, char** argv) {
  bench::log_to_stderr();
  std::string what = "all";
  bool quick = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--quick"))
      quick = true;
    else if (!std::strcmp(argv[i], "--devices") && i + 1 < argc)
      fleet_devices = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--only") && i + 1 < argc)
      only = argv[++i];
    else if (argv[i][0] != '-')
      what = argv[i];
    else {
      fprintf(stderr, "usage: bench_surge [all|sim|cluster] [--quick] [--devices N] [--only POLICY]\n");
      return 2;
    }
  }
  if (what == "all" || what == "sim") sim_section(quick);
  if (what == "all" || what == "cluster") cluster_section();
  return 0;
}
