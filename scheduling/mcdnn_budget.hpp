#pragma once
// MCDNN's scheduler under a long-term resource budget (thesis 002, Algorithm 4.1): a cost budget
// for a horizon is shared out among the stages with variants as per-request budgets that favour
// the frequently used ones, and each stage runs its most accurate variant whose cost per request
// is within its budget. As the budget drains faster than the horizon passes, variants step down;
// as it is saved, they step up again ("backing in" and "backing out" models by their use).
//
// Per-request budget of stage n (lines 16-21):
//   r_n = (r - dr_n T / dt_n) f_n / (T sum_i f_i^2)
// r: the budget left; T: the time left of the horizon; f_i: each budgeted stage's requests/s;
// dr_n: what loading n's variant cost; dt_n: how long ago it was loaded (infinite: never, no
// discount). Every future request getting its stage's budget spends sum_i r_i f_i T = r (less
// the reloads). Costs are the profile's: a request's device time at the batch a plan would run
// it at, times the device's price per hour.

#include <cstddef>
#include <limits>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "pipelines/pipeline.hpp"

namespace sloserve::sched {

struct pipeline_rates;
struct device_slot;

// One budgeted stage's use (f_n, dr_n, dt_n above).
struct budget_use {
  double frequency = 0;  // requests/s
  double load_cost = 0;  // what loading its variant costs, in the budget's unit
  double since_load_s = std::numeric_limits<double>::infinity();
};

// r_n for every stage of `uses` (line 18): 0 for a stage without requests, and where the
// reloads' discount exceeds what is left.
std::vector<double> per_request_budgets(double remaining, double remaining_s, const std::vector<budget_use>& uses);

// What one request on `m` costs: its device time at the largest batch whose l(b) is within half
// of `slo_ms` (a duty cycle fits twice in the SLO), at `price` per device-hour.
double cost_per_request(const model_spec& m, double slo_ms, double price);
// What loading `m` costs: its `load_ms` of a device at `price` per device-hour.
double load_cost(const model_spec& m, double price);

// Line 13 with line 23: of `options` (model indices), the most accurate whose cost is within
// `budget` (costs[k] for options[k]); the cheapest when none is.
size_t variant_within(const std::vector<size_t>& options, const std::vector<double>& costs,
                      const std::vector<model_spec>& models, double budget);

// The mean price per device-hour of `slots` (1 when there are none).
double mean_price(const std::vector<device_slot>& slots);

// What a plan is given: the budget left, the horizon's time left, and per stage with variants
// (pipeline, stage) how long ago its variant was loaded.
struct cost_budget {
  double remaining = 0;
  double remaining_s = 0;
  std::map<std::pair<size_t, size_t>, double> since_load_s;
};

// The budget's account, as the controller (and the simulator) keep it: what was spent, by the
// profile, and when each stage's variant was loaded.
class budget_account {
 public:
  budget_account(double total, double horizon_s) : total_(total), horizon_s_(horizon_s) {}

  // Charges the use since the last charge: per pipeline and stage, its invocations/s (`rates`)
  // on the model `running` runs it with, each at cost_per_request, until `now_s`.
  void charge(double now_s, const std::vector<pipeline>& running, const std::vector<model_spec>& models,
              const pipeline_rates& rates, double price);
  // A plan made at `now_s` runs `chosen`: a stage whose model changed is loaded then.
  void adopt(double now_s, const std::vector<pipeline>& chosen);
  cost_budget view(double now_s) const;
  double spent() const { return spent_; }

 private:
  double total_, horizon_s_;
  double spent_ = 0;
  std::optional<double> started_s_, charged_s_;
  std::map<std::pair<size_t, size_t>, std::pair<size_t, double>> loaded_;  // stage: model, when
};

}  // namespace sloserve::sched
