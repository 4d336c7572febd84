// `sloserve trace`: synthetic per-second traces for `sloserve load`.
//
//   sloserve trace bursty --base 100 [--factor 5 --burst-s 5 --period-s 60] --duration-s 600 --out rates.txt
//       requests/s for --trace: `base`, times `factor` for the first `burst-s` seconds of every
//       `period-s` (thesis 004's bursty workload), each second Poisson around that mean
//   sloserve trace stepped --levels 7,3,1,0.5 [--step-s 60] --duration-s 600 --out mbps.txt
//       uplink Mbps for --bandwidth-trace: the levels in turn, each held `step-s` seconds

#include <fstream>
#include <iostream>
#include <sstream>

#include "apps/commands.hpp"
#include "loadgen/load.hpp"
#include "pipelines/write_file.hpp"

namespace sloserve {

void add_trace_command(CLI::App& app, int& rc) {
  struct opts {
    std::string out;
    double base = 100, factor = 5;
    int burst_s = 5, period_s = 60, step_s = 60, duration_s = 600;
    uint64_t seed = 1;
    std::vector<double> levels;
  };
  auto o = std::make_shared<opts>();
  auto* cmd = app.add_subcommand("trace", "Write a synthetic per-second trace for `sloserve load`");
  cmd->require_subcommand(1);
  auto write = [o, &rc](const std::vector<double>& values, const std::string& what) {
    std::ostringstream out;
    out << "# " << what << "\n";
    for (auto v : values) out << v << "\n";
    if (auto written = write_file(o->out, out.str()); !written) {
      std::cerr << "sloserve trace: " << written.error() << "\n";
      rc = 1;
    }
  };
  auto* bursty = cmd->add_subcommand("bursty", "requests/s with periodic bursts (for load --trace)");
  bursty->add_option("--base", o->base, "requests/s between bursts")->capture_default_str();
  bursty->add_option("--factor", o->factor, "burst rate = base x factor")->capture_default_str();
  bursty->add_option("--burst-s", o->burst_s, "seconds each burst lasts")->capture_default_str();
  bursty->add_option("--period-s", o->period_s, "a burst starts every this many seconds")->capture_default_str();
  bursty->add_option("--duration-s", o->duration_s, "seconds of trace")->capture_default_str();
  bursty->add_option("--seed", o->seed, "seed of the Poisson noise")->capture_default_str();
  bursty->add_option("--out", o->out, "file to write")->required();
  bursty->callback([o, write] {
    write(bursty_trace(o->base, o->factor, o->burst_s, o->period_s, o->duration_s, o->seed),
          "bursty: base " + std::to_string(o->base) + "/s, x" + std::to_string(o->factor) + " for " +
              std::to_string(o->burst_s) + " s every " + std::to_string(o->period_s) + " s");
  });
  auto* stepped = cmd->add_subcommand("stepped", "stepped uplink bandwidth in Mbps (for load --bandwidth-trace)");
  stepped->add_option("--levels", o->levels, "Mbps levels, in turn")->delimiter(',')->required();
  stepped->add_option("--step-s", o->step_s, "seconds each level holds")->capture_default_str();
  stepped->add_option("--duration-s", o->duration_s, "seconds of trace")->capture_default_str();
  stepped->add_option("--out", o->out, "file to write")->required();
  stepped->callback([o, write] { write(stepped_trace(o->levels, o->step_s, o->duration_s), "stepped Mbps"); });
}

}  // namespace sloserve
