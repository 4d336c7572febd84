#pragma once
// bench_soak --mixed (bench/soak_mixed.cpp): restarts, applies, lulls and hostile clients beside
// honest load, for half an hour by default.

namespace sloserve::bench {

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
