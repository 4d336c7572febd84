#pragma once
// Piccolo's cost-minimising configuration (seed 001), as pure functions.
//
// A module runs on machines of several hardware types with prices; a configuration is a type at
// a batch size b, with execution duration d and throughput t = b/d. Throughput-cost (TC)
// dispatch ranks machines by t/price and hands requests to them in that order in whole batches,
// so machine i collects its batch at w_i, the rate of every machine ranked no higher than it,
// and its worst case is d_i + b_i/w_i (Theorem 1; a batch of one runs on arrival: d_i). The cost of a set of machines
// is the sum of price x occupancy (rate carried over throughput): a machine at partial capacity costs its share.
//
// - generate_configs is Algorithm 1: configurations in descending t/price; whole machines of the
//   first whose worst case fits while the rate covers one, else one machine at partial capacity;
//   a configuration whose worst case no longer fits gives way to the next. A residual that no
//   configuration carries within the budget (its batch would not fill in time) is padded with
//   dummy requests up to the rate the cheapest configuration needs.
// - plan_module adds the dummy generator: for each configuration c_i of the profile, with
//   leftover u_i below it (requests, not dummies), dum_i = b_i/(L - d_i) - u_i >= 0 of dummies
//   let c_i take the leftover itself; the cheapest set wins (Table I: 285 req/s at L = 2 s
//   costs 3.1, 3.0 with 15 req/s of dummies). The greedy generator's first choice can strand a
//   residual, so plan_module also starts it from each configuration in turn, and lets each
//   configuration it took whole machines of take one fewer; the cheapest set stands.
// - split_latency is Algorithm 2 on a DAG of modules: every module starts at its configuration
//   of least worst case; then, repeatedly, the change of one module's configuration with the
//   largest latency-cost efficiency (cost saved per second of worst case added) that keeps the
//   critical path within the SLO, a change both faster and cheaper taken at once; budgets are
//   the worst cases scaled so that the critical path through each module spends the SLO.
// - plan_app runs the splitter, then plan_module per module, then hands each module's unused
//   budget (the slack of the paths through it) back to it where a larger budget is cheaper.
//   The splitter weighs a module as one configuration; the sets cost in steps of their own.
//   So on a chain, a DP over a grid of 60 steps of the SLO, with plan_module's cost at each,
//   gives a second split, and the cheaper stands. On other DAGs budget moves between modules
//   while that lowers the sets' total cost: to each module's breakpoints (where its set
//   changes), by what another frees moving to one of its own, and by sampled amounts between
//   them (dummies make costs fall smoothly with budget), from the splitter's budgets and from
//   budgets in proportion to each module's cheapest configuration. The test: all of 200 random
//   small applications come within 1% of the brute force.
// - two_config_plan is the baseline the paper compares with: one configuration for the majority
//   on whole machines, one for the residual, and per machine a worst case of d + b/(its own
//   rate) (round-robin dispatch collects each machine's batch from its own share).
// - brute_force_chain: the cheapest plan over every set of machines per module (with the
//   dummies the last machine needs) and every split of a chain's SLO on a grid: the reference
//   the tests and bench_planners compare with.

#include <cstddef>
#include <limits>
#include <vector>

namespace sloserve::sched::piccolo {

struct config {
  size_t type = 0;  // the hardware type (for reports)
  int batch = 1;
  double duration_s = 0;  // d: one batch
  double price = 1;       // per machine
  double throughput() const { return batch / duration_s; }
  double ratio() const { return throughput() / price; }
  // Collecting a batch at w requests/s, then running it: d + b/w (Theorem 1). A batch of one is
  // the request itself: it runs on arrival.
  double worst_case(double w) const { return duration_s + (batch > 1 ? batch / w : 0); }
  // The rate at which a batch collects within `budget_s`: b/(L - d); infinity when d alone
  // exceeds it.
  double rate_needed(double budget_s) const {
    if (budget_s <= duration_s) return std::numeric_limits<double>::infinity();
    return batch > 1 ? batch / (budget_s - duration_s) : 0;
  }
};

// Descending t/price; among equals, the shorter batch first.
std::vector<config> by_ratio(std::vector<config> configs);

struct machine {
  size_t config = 0;  // index into the configurations the plan was made from
  double rate = 0;    // requests/s it carries (dummies included), <= its throughput
};

struct module_plan {
  bool feasible = false;
  std::vector<machine> machines;            // in dispatch order
  double dummy = 0;                         // requests/s of dummies among the rates carried
  size_t padded = static_cast<size_t>(-1);  // the configuration whose machine the generator padded
  double cost = 0;                          // sum of price x rate / throughput
  double worst_case_s = 0;                  // the largest d + b/w over its machines
  size_t devices() const { return machines.size(); }
};

// Theorem 1 for machines in dispatch order: the worst case of each, and of the module.
std::vector<double> worst_cases(const std::vector<config>& configs, const std::vector<machine>& machines);
// Price x occupancy, summed.
double cost_of(const std::vector<config>& configs, const std::vector<machine>& machines);

// `configs` in dispatch order (by_ratio).
module_plan generate_configs(const std::vector<config>& configs, double rate, double budget_s);
module_plan plan_module(const std::vector<config>& configs, double rate, double budget_s);
module_plan two_config_plan(const std::vector<config>& configs, double rate, double budget_s);

// Cost saved per second of worst case added, moving a module of `rate` from `from` to `to`,
// each as one configuration carrying the whole rate (worst case d + b/rate, cost price x
// rate/t). §III-C: at 100 req/s from batch 5, batch 20 scores 2.50 and batch 100 0.54.
double latency_cost_efficiency(const config& from, const config& to, double rate);

struct app_module {
  double rate = 0;  // requests/s reaching it
  std::vector<config> configs;
  std::vector<size_t> next;  // modules its output feeds
};

struct app {
  std::vector<app_module> modules;
  double slo_s = 0;
};

struct split {
  bool feasible = false;
  std::vector<double> budget_s;  // per module
  std::vector<size_t> config;    // Algorithm 2's configuration per module (index into its configs)
};
split split_latency(const app& app);

struct app_plan {
  bool feasible = false;
  std::vector<double> budget_s;
  std::vector<module_plan> modules;  // machines index each module's configs in by_ratio order
  double cost = 0;
  double dummy = 0;
};
app_plan plan_app(const app& app);

// The least cost of module `configs` (by_ratio) at `rate` within `budget_s`, over every set of
// machines; infinity when none fits.
double brute_force_module(const std::vector<config>& configs, double rate, double budget_s);
// For a chain of modules (each feeding the next): the least cost over every split of the SLO in
// steps of slo/grid.
double brute_force_chain(const app& app, int grid);

}  // namespace sloserve::sched::piccolo
