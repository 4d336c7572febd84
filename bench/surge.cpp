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
#include <vector>

#include "apps/child_process.hpp"
#include "bench/harness.hpp"
#include "bench/workloads.hpp"
#include "sim/simulator.hpp"

using namespace sloserve;
namespace fs = std::filesystem;

namespace {

int fleet_devices = 1000;
std::string only;  // --only NAME: the sim rows of that setting alone

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

figures sim_figures(const std::string& yaml, const std::string& pipeline, double rate) {
  auto cfg = parse(yaml);
  auto step = simulate(cfg, pipeline, step_trace(rate));
  auto lull = simulate(cfg, pipeline, lull_trace(rate));
  auto& s = step.summary.series;
  auto& l = lull.summary.series;

  return {within(s, 30, 31),
          within(s, 30, 35),
          within(s, 30, 40),
          within(s, 50, 60),
          within(l, 35, 36),
          within(l, 35, 45),
          step.summary.lost + lull.summary.lost};
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

// One `sloserve up` cluster of the file, loaded with both traces in turn (a fresh cluster each).
figures cluster_figures(const std::string& yaml, double rate) {
  figures f;
  for (int which = 0; which < 2; ++which) {
    auto dir = fs::temp_directory_path() / ("sloserve-surge-" + std::to_string(getpid()));
    fs::create_directories(dir);
    std::ofstream(dir / "cluster.yaml") << yaml;
    {
      std::ofstream trace(dir / "trace.txt");
      for (auto r : which == 0 ? step_trace(rate) : lull_trace(rate)) trace << r << "\n";
    }
    auto up = spawn_up(SLOSERVE_BIN, dir);
    if (up.output().find("cluster up") == std::string::npos) {
      fprintf(stderr, "cluster did not start:\n%s", up.output().c_str());
      std::exit(1);
    }
    auto load = spawn_child(SLOSERVE_BIN,
                            {"sloserve", "load", "-c", (dir / "resolved.yaml").string(), "--pipeline", "traffic",
                             "--trace", (dir / "trace.txt").string(), "--json", (dir / "load.json").string()},
                            dir / "load.log");
    int status = 0;
    if (!load.wait_for(std::chrono::seconds(180), status) || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      fprintf(stderr, "load failed:\n%s", load.output().c_str());
      std::exit(1);
    }
    up.stop();
    auto s = nlohmann::json::parse(read_file((dir / "load.json").string()));
    auto& series = s["series"];
    if (which == 0)
      f.step1 = within(series, 30, 31), f.step5 = within(series, 30, 35), f.step10 = within(series, 30, 40),
      f.steady = within(series, 50, 60);
    else
      f.lull1 = within(series, 35, 36), f.lull10 = within(series, 35, 45);
    f.lost += s["lost"].get<uint64_t>();
    fs::remove_all(dir);
  }
  return f;
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
  print_header("sloserve up, 3 processes, 12 emulated devices, traffic at 150 queries/s");
  print_row("nexus", cluster_figures(yaml, 150));
  print_row("nexus (without)", cluster_figures(without_spares(yaml), 150));
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
