// Jellyfish's comparison (seed 000, §7.3-7.4), served: video clients on stepped and bursty uplink
// traces (each client its own trace), 15 frames/s each (or as `fps` says), against one node with
// four emulated devices and a zoo of one detector at five input sizes (128 to 608 pixels,
// YOLOv4-like latency and accuracy). The ways of serving them, side by side in one run:
//
//   jellyfish  scheduler.policy jellyfish; clients send the size replies advise (or less, when
//              their uplink cannot carry it)
//   paper      the same in scheduler.jellyfish.mode paper: the algorithms as printed (no lift
//              onto spare compute, uploads timed at the estimate), clients that send every frame
//   B_L, B_M, B_H  the paper's §7.3 baselines: one fixed DNN (128, 352, 608) on every device
//              (scheduler.policy static), each device serving earliest deadline first with
//              batching and dropping what cannot finish (deadlines count the upload), requests
//              to the least busy device; clients send that DNN's size. (Clockwork's one global
//              queue per batch size is a queue per device here.)
//   DA_off     §7.4: DNN adaptation without data adaptation: Jellyfish's scheduler, clients that
//              always send the middle size (352), which the scheduler knows (jellyfish.client_side);
//              it and the DA_bw and DA_slo ways run extended mode's defaults (headroom included)
//   DA_bw50, DA_bw75  §7.4: clients send the largest size their uplink carries whatever they
//              are told (data adaptation that knows nothing of the DNNs), and the scheduler,
//              knowing nothing of the network, selects DNNs for a compute budget of 50% (75%) of
//              each SLO
//   DA_slo50, DA_slo75  §7.4: SLO-aware data adaptation: clients send the largest size their
//              uplink carries that uploads within the rest of the SLO (50%, 25%), the scheduler
//              selecting DNNs for a compute budget of 50% (75%) of each SLO
//   nexus      today's Nexus on the whole zoo (deadlines count the upload from the clients' send
//              times), clients adapting to bandwidth alone
//
// For 4, 8 and 16 clients at SLOs of 75, 100 and 150 ms: the miss rate (requests not answered OK
// within their SLO), the accuracy of the answers within the SLO (rate-weighted: per answer), and
// the devices' utilisation (device time of the answers over device time available).
//
//   build/bench/bench_jellyfish_serve [measure_s=10] [clients=4,8,16] [slos=75,100,150] [traces=stepped,bursty]
//                                     [warmup_s=4] [runs=1] [fps=15]
//
// fps: the clients' frame rates, cycled over the clients (15,25: half at each, the
// heterogeneous clients of the paper's Table 2).
//
// Traces: stepped, bursty, and the paper's steps, wifi and lte (see traces() below).
//
// Each run starts a node afresh and measures after `warmup_s`: what Jellyfish learns of its
// clients' misses (the dip quantile, from the estimate itself, a step a second) takes some 7 s to
// settle where links are changeable enough to need deeper dips, so warm-ups of 4 s measure part of
// its start.
// With runs > 1 each way runs that many times per setting (each on a fresh node): the figures are
// the means, then the spread of the accuracy (largest less smallest), and the verdict compares the
// means; a baseline that leads by less than the larger of the two spreads is reported as within
// the spread.
//
// SLOSERVE_BENCH_PROFILE=paper runs the variants at the paper's latencies (see alpha_ms()).
// SLOSERVE_BENCH_P99_SPREAD=S takes the profiles as p99s, as the paper's are: batches run in l(b)
// scaled by a factor in [1 - S, 1] (models[].p99_spread; default 0: exactly l(b)).
// SLOSERVE_BENCH_VERBOSE=1 prints each run's load summary (reasons, per-client figures) on stderr.
// SLOSERVE_BENCH_WAYS=DA_bw50,nexus runs jellyfish and those baselines alone (default: all).
// SLOSERVE_BENCH_SEND_EVERY_FRAME=1 has clients send the frames that cannot cross in time too.
// SLOSERVE_BENCH_UPLINK_QUANTILE=Q sets jellyfish's scheduler.jellyfish.uplink_quantile (default:
// the file's default), SLOSERVE_BENCH_MISS_TARGET=M its scheduler.jellyfish.miss_target,
// SLOSERVE_BENCH_USE_SPARE=0 its scheduler.jellyfish.use_spare, SLOSERVE_BENCH_LIFT_MARGIN=M its
// scheduler.jellyfish.lift_margin, SLOSERVE_BENCH_HEADROOM=H its scheduler.jellyfish.headroom,
// SLOSERVE_BENCH_MIN_WAIT_SHARE=W its scheduler.jellyfish.min_wait_share.

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "actors/node_runtime.hpp"
#include "bench/harness.hpp"
#include "loadgen/arrivals.hpp"
#include "loadgen/clients.hpp"

using namespace sloserve;

namespace {

const int sides[] = {128, 256, 352, 480, 608};
const double accuracies[] = {38, 52, 59, 63, 65};  // F1 of a detector at that input size, in percent

enum class way { jellyfish, paper, b_l, b_m, b_h, da_off, da_bw50, da_bw75, da_slo50, da_slo75, nexus };
const char* name_of(way w) {
  switch (w) {
    case way::jellyfish:
      return "jellyfish";
    case way::paper:
      return "paper";
    case way::b_l:
      return "B_L";
    case way::b_m:
      return "B_M";
    case way::b_h:
      return "B_H";
    case way::da_off:
      return "DA_off";
    case way::da_bw50:
      return "DA_bw50";
    case way::da_bw75:
      return "DA_bw75";
    case way::da_slo50:
      return "DA_slo50";
    case way::da_slo75:
      return "DA_slo75";
    case way::nexus:
      return "nexus";
  }
  return "";
}
// The compute share of the SLO of the DA_bw and DA_slo ways; 0 for the others.
double compute_share(way w) {
  return w == way::da_bw50 || w == way::da_slo50 ? 0.5 : w == way::da_bw75 || w == way::da_slo75 ? 0.75 : 0;
}
// The one DNN of a fixed baseline; empty for the ways that adapt.
std::string fixed_model(way w) {
  return w == way::b_l ? "v128" : w == way::b_m ? "v352" : w == way::b_h ? "v608" : "";
}

// The variants' l(b) = alpha·b + beta, f their side over 608. By default a fast GPU's (the
// smallest 3 ms a frame: uploads dominate, a network-bound regime); SLOSERVE_BENCH_PROFILE=paper:
// at the paper's scale (its smallest DNN's p99 is 23 ms on an RTX 2080 Ti, the largest some 60:
// a compute-bound regime).
bool paper_profile() {
  auto* p = std::getenv("SLOSERVE_BENCH_PROFILE");
  return p && std::string(p) == "paper";
}
double alpha_ms(double f) {
  return paper_profile() ? 5 + 17 * f * f : 0.4 + 10 * f * f;
}
double beta_ms(double f) {
  return paper_profile() ? 18 + 20 * f * f : 2 + 4 * f * f;
}

std::string config_yaml(way w, double slo_ms) {
  std::ostringstream y;
  y << "cluster: {name: jellyfish-bench}\n"
       "nodes:\n"
       "  - {name: n, address: tcp://127.0.0.1:0, roles: [controller, frontend, worker],\n"
       "     devices: [{kind: emulated, count: 4, memory_mb: 1100}]}\n"
       "models:\n";
  std::string spread;
  if (auto* s = std::getenv("SLOSERVE_BENCH_P99_SPREAD"); s && std::atof(s) > 0)
    spread = ", p99_spread: " + std::to_string(std::atof(s));
  for (size_t i = 0; i < 5; ++i) {
    double f = static_cast<double>(sides[i]) / 608;
    y << "  - {name: v" << sides[i] << ", input: {dtype: float32, shape: [3, " << sides[i] << ", " << sides[i]
      << "]}, output: {dtype: float32, shape: [100]}, preprocess: {from: image}, max_batch: 8, memory_mb: 200,\n"
      << "     load_ms: 300, accuracy: " << accuracies[i] << ", profile: {alpha_ms: " << alpha_ms(f)
      << ", beta_ms: " << beta_ms(f) << "}" << spread << "}\n";
  }
  y << "pipelines:\n  - {name: video, slo_ms: " << slo_ms << ", stages: [{name: detect, "
    << (!fixed_model(w).empty() ? "model: " + fixed_model(w) : std::string("variants: [v128, v256, v352, v480, v608]"))
    << "}]}\n";
  y << "runtime: {beacon_ms: 500}\n";
  // The zoo is one network's weights at five input sizes: every device keeps all five loaded.
  if (w == way::jellyfish) {
    y << "scheduler: {policy: jellyfish, jellyfish: {resident: 5";
    if (auto* q = std::getenv("SLOSERVE_BENCH_UPLINK_QUANTILE")) y << ", uplink_quantile: " << std::atof(q);
    if (auto* m = std::getenv("SLOSERVE_BENCH_MISS_TARGET")) y << ", miss_target: " << std::atof(m);
    if (auto* u = std::getenv("SLOSERVE_BENCH_USE_SPARE")) y << ", use_spare: " << (std::atoi(u) ? "true" : "false");
    if (auto* m = std::getenv("SLOSERVE_BENCH_LIFT_MARGIN")) y << ", lift_margin: " << std::atof(m);
    if (auto* h = std::getenv("SLOSERVE_BENCH_HEADROOM")) y << ", headroom: " << std::atof(h);
    if (auto* w = std::getenv("SLOSERVE_BENCH_MIN_WAIT_SHARE")) y << ", min_wait_share: " << std::atof(w);
    y << "}}\n";
  } else if (w == way::paper) {
    y << "scheduler: {policy: jellyfish, jellyfish: {resident: 5, mode: paper}}\n";
  } else if (w == way::da_off) {
    y << "scheduler: {policy: jellyfish, jellyfish: {resident: 5, client_side: 352}}\n";
  } else if (compute_share(w) > 0) {
    y << "scheduler: {policy: jellyfish, jellyfish: {resident: 5, compute_share: " << compute_share(w) << "}}\n";
  } else if (!fixed_model(w).empty())
    y << "scheduler: {policy: static}\n";
  else
    y << "scheduler: {policy: nexus, epoch_s: 4, min_epoch_s: 2}\n";
  return y.str();
}

// A synthetic cellular or WiFi uplink, per second: log-normal around `median` Mbps, its log an
// AR(1) series (correlation `rho` from one second to the next, stationary spread `sigma`), with a
// fixed seed.
std::vector<double> lognormal_trace(double median, double sigma, double rho, int seconds, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> z(0, 1);
  std::vector<double> out;
  double x = sigma * z(rng);
  for (int s = 0; s < seconds; ++s) {
    out.push_back(median * std::exp(x));
    x = rho * x + sigma * std::sqrt(1 - rho * rho) * z(rng);
  }
  return out;
}

// Per client: its uplink, per second, in Mbps. Stepped: 25, 10, 4 and 1.5 Mbps for 5 s each, each
// client starting at another level; bursty: around 4 Mbps with 20 Mbps bursts of 4 s every 10 s,
// each client with its own noise and phase. The paper's (seed 000, §7): steps: 20, 15, 10 and
// 7.5 Mbps for 20 s each, each client from another point; wifi and lte: log-normal with the
// medians of its real traces (53.1 and 22.8 Mbps), spread sigma 0.45 and 0.6 in log space,
// second-to-second correlation 0.8, each client its own seed.
std::vector<std::vector<double>> traces(const std::string& kind, int clients, int seconds) {
  std::vector<std::vector<double>> out;
  for (int k = 0; k < clients; ++k) {
    std::vector<double> t;
    if (kind == "steps") {
      std::vector<double> levels{20, 15, 10, 7.5};
      auto all = stepped_trace(levels, 20, seconds + 80);
      int from = (k * 37) % 80;  // each client from another point of the 80 s cycle
      t.assign(all.begin() + from, all.begin() + from + seconds);
    } else if (kind == "wifi" || kind == "lte") {
      bool wifi = kind == "wifi";
      t = lognormal_trace(wifi ? 53.1 : 22.8, wifi ? 0.45 : 0.6, 0.8, seconds, 500 + static_cast<uint64_t>(k));
    } else if (kind == "stepped") {
      std::vector<double> levels{25, 10, 4, 1.5};
      std::rotate(levels.begin(), levels.begin() + k % 4, levels.end());
      t = stepped_trace(levels, 5, seconds);
    } else {
      auto b = bursty_trace(4, 5, 4, 10, seconds + 10, 100 + static_cast<uint64_t>(k));
      t.assign(b.begin() + (k * 3) % 10, b.begin() + (k * 3) % 10 + seconds);
      for (auto& x : t) x = std::max(x, 0.5);
    }
    out.push_back(std::move(t));
  }
  return out;
}

struct outcome {
  double miss = 1, accuracy = 0, utilisation = 0;
  uint64_t lost = 0;
  double spread = 0;  // over several runs: of the accuracy, largest less smallest
};

// The mean of several runs' outcomes, with the spread of their accuracy.
outcome mean_of(const std::vector<outcome>& runs) {
  outcome m{0, 0, 0, 0, 0};
  double lo = 1e9, hi = -1e9;
  for (auto& r : runs) {
    m.miss += r.miss / static_cast<double>(runs.size());
    m.accuracy += r.accuracy / static_cast<double>(runs.size());
    m.utilisation += r.utilisation / static_cast<double>(runs.size());
    m.lost += r.lost;
    lo = std::min(lo, r.accuracy), hi = std::max(hi, r.accuracy);
  }
  m.spread = runs.empty() ? 0 : hi - lo;
  return m;
}

outcome run(way w, int clients, double slo_ms, const std::string& trace, double warmup_s, double measure_s,
            const std::vector<double>& fps) {
  auto [cfg, node] = bench::start_node(config_yaml(w, slo_ms), "jellyfish-bench.yaml");
  load_options o;
  o.address = node->endpoint();
  o.pipeline = "video";
  o.slo_ms = slo_ms;
  o.warmup_s = warmup_s;
  o.duration_s = measure_s;
  o.grace_ms = 1000;
  client_options co;
  co.clients = clients;
  co.fps = fps;
  co.slo_ms = {slo_ms};
  co.rtt_ms = 10;
  co.skip_hopeless = w != way::paper && !std::getenv("SLOSERVE_BENCH_SEND_EVERY_FRAME");
  co.bandwidth = traces(trace, clients, static_cast<int>(std::ceil(warmup_s + measure_s)) + 2);
  co.adaptation = w == way::jellyfish || w == way::paper        ? data_adaptation::jellyfish
                  : w == way::da_off || !fixed_model(w).empty() ? data_adaptation::off
                  : w == way::da_slo50 || w == way::da_slo75    ? data_adaptation::slo
                                                                : data_adaptation::bandwidth;
  co.network_share = 1 - compute_share(w);
  if (auto sized = set_image_sizes(*cfg, cfg->pipelines[0], co); !sized) {
    fprintf(stderr, "%s\n", sized.error().c_str());
    std::exit(2);
  }
  outcome out;
  if (auto ran = run_clients(o, co)) {
    if (std::getenv("SLOSERVE_BENCH_VERBOSE")) fprintf(stderr, "%s: %s", name_of(w), ran->to_text().c_str());
    auto captured = ran->sent + ran->skipped;  // a frame the client skipped is missed
    out.miss = captured ? 1 - static_cast<double>(ran->ok_within_slo) / static_cast<double>(captured) : 1;
    out.accuracy = ran->accuracy;
    out.utilisation = ran->device_busy_s / (4 * measure_s);
    out.lost = ran->lost;
  } else {
    fprintf(stderr, "load: %s\n", ran.error().c_str());
  }
  node->stop();
  return out;
}

template <class T>
std::vector<T> list_arg(int argc, char** argv, int i, std::vector<T> fallback) {
  if (argc <= i) return fallback;
  std::vector<T> out;
  std::stringstream in(argv[i]);
  for (std::string x; std::getline(in, x, ',');) {
    std::istringstream v(x);
    T t{};
    v >> t;
    out.push_back(t);
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  bench::log_to_stderr();
  double measure_s = argc > 1 ? std::atof(argv[1]) : 10;
  auto counts = list_arg<int>(argc, argv, 2, {4, 8, 16});
  auto slos = list_arg<double>(argc, argv, 3, {75, 100, 150});
  auto kinds = list_arg<std::string>(argc, argv, 4, {"stepped", "bursty"});
  double warmup_s = argc > 5 ? std::atof(argv[5]) : 4;
  int runs = argc > 6 ? std::max(1, std::atoi(argv[6])) : 1;
  auto fps = list_arg<double>(argc, argv, 7, {15});
  std::vector<way> ways{way::jellyfish, way::paper,   way::b_l,      way::b_m,      way::b_h,  way::da_off,
                        way::da_bw50,   way::da_bw75, way::da_slo50, way::da_slo75, way::nexus};
  if (auto only = std::getenv("SLOSERVE_BENCH_WAYS")) {  // jellyfish and the baselines named
    std::vector<way> picked{way::jellyfish};
    for (auto& name : list_arg<std::string>(2, std::array<char*, 2>{nullptr, only}.data(), 1, {}))
      for (auto w : ways)
        if (w != way::jellyfish && name == name_of(w)) picked.push_back(w);
    ways = picked;
  }
  printf("%-8s %7s %4s |", "trace", "clients", "SLO");
  for (auto w : ways) printf(" %-25s|", name_of(w));
  if (runs > 1)
    printf("  (means of %d runs: miss%% acc%% util%% \u00b1acc spread)\n", runs);
  else
    printf("  (miss%% acc%% util%%)\n");
  int settings = 0, within = 0, best = 0, close = 0;
  uint64_t lost = 0;
  for (auto& kind : kinds)
    for (int n : counts)
      for (double slo : slos) {
        printf("%-8s %7d %4.0f |", kind.c_str(), n, slo);
        fflush(stdout);
        std::vector<outcome> got;
        for (auto w : ways) {
          std::vector<outcome> each;
          for (int k = 0; k < runs; ++k) each.push_back(run(w, n, slo, kind, warmup_s, measure_s, fps));
          got.push_back(mean_of(each));
          auto& g = got.back();
          lost += g.lost;
          if (runs > 1)
            printf(" %5.1f %6.2f %5.1f \u00b1%4.2f|", 100 * g.miss, g.accuracy, 100 * g.utilisation, g.spread);
          else
            printf(" %5.1f %6.2f %5.1f       |", 100 * g.miss, g.accuracy, 100 * g.utilisation);
          fflush(stdout);
        }
        // Jellyfish within 3% misses, and as accurate as every baseline that also is (or behind
        // by less than the spread of their runs).
        bool ok = got[0].miss <= 0.03;
        bool top = ok, near = ok;
        for (size_t i = 1; i < got.size(); ++i)
          if (got[i].miss <= 0.03 && got[i].accuracy > got[0].accuracy) {
            top = false;
            near = near && runs > 1 && got[i].accuracy - got[0].accuracy < std::max(got[0].spread, got[i].spread);
          }
        printf(" %s%s\n", ok ? "misses<=3%" : "MISSES>3%", top ? ", most accurate" : near ? ", within the spread" : "");
        ++settings;
        within += ok;
        best += top;
        close += !top && near;
      }
  printf(
      "jellyfish: misses <= 3%% in %d of %d settings; at least as accurate as every baseline within 3%% misses in "
      "%d",
      within, settings, best);
  if (runs > 1) printf(", behind one by less than the spread of the runs in %d", close);
  printf("; lost %lu\n", static_cast<unsigned long>(lost));
  return lost == 0 ? 0 : 1;
}
