#pragma once
// `sloserve load --report FILE.html`: one self-contained page (no scripts, fonts or images from
// anywhere) that shows a run: the latency CDF, per second the requests sent, answered within
// the SLO, dropped and failed, the p99 and the attainment, and the configuration and command line
// it ran with. The run's data is embedded as JSON too, for tools.

#include <string>

#include "loadgen/options.hpp"
#include "loadgen/tally.hpp"

namespace sloserve {

struct report_inputs {
  const load_summary* summary = nullptr;
  const load_options* options = nullptr;
  std::string command;  // the command line, as typed
  std::string config;   // the cluster file's text
};

std::string html_report(const report_inputs& in);

// The data a report embeds (<script type="application/json" id="sloserve-run">), read back.
nlohmann::json report_data(const std::string& html);

}  // namespace sloserve
