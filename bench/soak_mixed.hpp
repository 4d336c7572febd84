#pragma once
// bench_soak --mixed (bench/soak_mixed.cpp): restarts, applies, lulls and hostile clients beside
// honest load, for half an hour by default; and what it shares with the plain soak.

#include <sys/types.h>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "apps/child_process.hpp"

namespace sloserve::bench {

// A process's resident memory (kB); -1 when it cannot be read.
long rss_kb(pid_t pid);

// The rolling restart's step: worker `name` (pid in `pids`) stops with SIGTERM and a second later
// starts again with `sloserve node` on `dir`/resolved.yaml, logging to `dir`/NAME-K.log; `pids`
// and `restarted` (the processes started so far) are brought up to date.
void restart_worker(const std::filesystem::path& dir, const std::string& name, int k,
                    std::map<std::string, pid_t>& pids, std::vector<child_process>& restarted);

struct mixed_options {
  double minutes = 30;
  double restart_every_s = 120;
  double apply_every_s = 180;
  double lull_every_s = 600;
  double lull_s = 60;
  int workers = 4;
};

// Runs it and prints the report; the exit code (0 when nothing was lost).
int mixed_soak(const mixed_options& o);

}  // namespace sloserve::bench
