#pragma once
// Subcommands of the sloserve binary.

#include <CLI/CLI.hpp>
#include <memory>
#include <string>

#include "config/cluster_config.hpp"

namespace sloserve {

// Each adds its subcommand to `app`; the callback stores the exit code in `rc`.
void add_run_command(CLI::App& app, int& rc);
void add_up_command(CLI::App& app, int& rc);
void add_node_command(CLI::App& app, int& rc);
void add_load_command(CLI::App& app, int& rc);
void add_plan_command(CLI::App& app, int& rc);
void add_profile_command(CLI::App& app, int& rc);
void add_keys_command(CLI::App& app, int& rc);
void add_trace_command(CLI::App& app, int& rc);
void add_sim_command(CLI::App& app, int& rc);
void add_apply_command(CLI::App& app, int& rc);

// The command line this process was started with, words joined by spaces (for reports).
const std::string& command_line();

// Loads `path` (or the embedded default when empty) and prints every error on failure.
std::shared_ptr<cluster_config> load_config_or_report(const std::string& path);

// Blocks SIGINT and SIGTERM in this and every later thread, so that wait_for_stop() gets them.
void block_stop_signals();
// Waits for SIGINT or SIGTERM; returns the signal.
int wait_for_stop();

}  // namespace sloserve
