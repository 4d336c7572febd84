// sloserve: serve DNN pipelines under end-to-end latency SLOs on a cluster of nodes.

#include <malloc.h>
#include <signal.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <csignal>
#include <iostream>

#include "apps/commands.hpp"

namespace sloserve {

std::shared_ptr<cluster_config> load_config_or_report(const std::string& path) {
  auto res = path.empty() ? default_config() : load_cluster_config(path);
  if (!res) {
    std::cerr << res.error_text();
    return nullptr;
  }
  return std::make_shared<cluster_config>(std::move(*res.config));
}

void block_stop_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

int wait_for_stop() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  int sig = 0;
  sigwait(&set, &sig);
  return sig;
}

}  // namespace sloserve

namespace sloserve {
std::string the_command_line;
const std::string& command_line() {
  return the_command_line;
}
}  // namespace sloserve

int main(int argc, char** argv) {
  for (int i = 0; i < argc; ++i) sloserve::the_command_line += (i ? " " : "") + std::string(argv[i]);
  // A peer that hangs up while a TLS reply is written must not take the process with it: writes
  // report EPIPE instead (ZeroMQ and plain sockets never raise it).
  std::signal(SIGPIPE, SIG_IGN);
  // Request payloads are hundreds of KB. glibc would map and unmap each one afresh (a page fault
  // and a page clear per 4 KB, on every hop); keep them on the heap and keep the heap's pages.
  mallopt(M_MMAP_THRESHOLD, 256 << 20);
  mallopt(M_TRIM_THRESHOLD, 512 << 20);
  CLI::App app{"sloserve: serve pipelines of DNNs under end-to-end latency SLOs"};
  app.require_subcommand(1);
  std::string level = "info";
  app.add_option("--log-level", level, "trace, debug, info, warn, error, off")->capture_default_str();
  bool check = false;
  app.add_flag("--check", check,
               "only parse the command line: exit 0 when sloserve accepts its subcommand and flags "
               "(deployment files are checked this way)");
  int rc = 0;
  sloserve::add_run_command(app, rc);
  sloserve::add_up_command(app, rc);
  sloserve::add_node_command(app, rc);
  sloserve::add_load_command(app, rc);
  sloserve::add_plan_command(app, rc);
  sloserve::add_profile_command(app, rc);
  sloserve::add_keys_command(app, rc);
  sloserve::add_trace_command(app, rc);
  sloserve::add_sim_command(app, rc);
  sloserve::add_apply_command(app, rc);
  app.parse_complete_callback([&] {
    if (check) throw CLI::Success();
    auto logger = spdlog::stderr_color_mt("sloserve");
    spdlog::set_default_logger(logger);
    spdlog::set_pattern("[%H:%M:%S.%e] [%^%l%$] %v");
    spdlog::set_level(spdlog::level::from_str(level));
  });
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  return rc;
}
