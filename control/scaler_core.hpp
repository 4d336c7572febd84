#pragma once
// The scaler's decisions apart from any actor: every poll of the monitor's view it feeds the
// policy (fa2, sponge or biscale: scheduling/autoscaler; ipa: scheduling/ipa, which also picks
// each stage's variant) and brings the provisioner's instances to the shapes that come back. The scaler actor polls it
// on its timer; `sloserve sim` polls it in simulated time.

#include <chrono>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "config/cluster_config.hpp"
#include "control/provisioner.hpp"
#include "scheduling/autoscaler.hpp"
#include "scheduling/ipa.hpp"
#include "scheduling/placement.hpp"
#include "scheduling/predictor.hpp"
#include "scheduling/profile_drift.hpp"

namespace sloserve {

// The monitor's view: smoothed rate and latency per (node, device, model).
struct session_rate {
  std::string node;
  uint32_t device = 0;
  std::string model;
  double rate = 0;       // requests/s, moving average over beacons
  double last_rate = 0;  // requests/s over the latest report alone
  double budget_ms = 0;  // mean time left to the deadline at arrival, latest report
  double drop_rate = 0;
  double mean_latency_ms = 0;
  uint32_t queue_length = 0;
  std::vector<double> queue_budgets_ms;    // time left of each queued request, EDF order, latest report
  std::vector<double> arrival_budgets_ms;  // time left on arrival of the latest requests
};
struct cluster_load {
  std::vector<session_rate> sessions;
};

// From the controller to the scaler whenever either changes: the workers that are up, and the
// instances whose workers have acknowledged (loaded) them.
struct worker_set {
  std::vector<std::string> up;
  std::vector<instance_key> acknowledged{};
};

// What the scaler has run so far: its cost, and what it runs now.
struct scaler_stats {
  double instance_seconds = 0;
  double core_seconds = 0;
  double seconds = 0;
  uint32_t instances = 0;
  uint32_t cores = 0;
  uint64_t vertical_changes = 0;    // resizes in place
  uint64_t horizontal_changes = 0;  // instances started or stopped
};

class scaler_core {
 public:
  scaler_core(const cluster_config& cfg, std::unique_ptr<provisioner> prov, std::string name);

  // How often to poll: at each load report, or each vertical period if that is shorter.
  std::chrono::milliseconds poll_period() const;
  // The first budgets (sponge, biscale: the query analyzer's split at one request/s a stage).
  void start();
  // One look at the monitor's view, `dt` seconds after the last. Every polls-per-period-th is
  // a vertical period (and every so many of those a horizontal one); in between, the vertical
  // policies may only add capacity.
  void decide(const cluster_load& load, double dt);
  // The controller says which workers are up and which instances it routes to.
  void on_workers(const worker_set& w);
  // The online profile refresh: `model` runs at its profile x `scale` (sched::profile_drift);
  // the next decisions size it so.
  void rescale(const std::string& model, double scale);
  // An apply changed the scaler's (or the scheduler's) knobs: `cfg` from now on, with the same
  // policy, pipelines and models. Periods and limits follow; the predictors start afresh when
  // their kind or horizon changed.
  void retune(const cluster_config& cfg);
  scaler_stats stats() const;
  const provisioner& placement() const { return *prov_; }

 private:
  struct stage_info {
    size_t pipeline = 0, stage = 0;
    // A stage over model versions (a canary) has an entry per version with weight, each sized for
    // its own traffic; the first (its largest weight) stands for the stage where a policy plans
    // the pipeline's SLO split, at the stage's whole rate.
    bool primary = true;
    const model_spec* model = nullptr;        // the variant it runs now (a cascade's first or second)
    std::vector<const model_spec*> variants;  // every model it may run (a cascade's second too)
    // A cascade stage (IPA only): its second model; `cascading` while the stage runs the cascade
    // (model is its first, and second_shape sizes the second for what falls through), else the
    // second runs alone as `model`. The fraction that falls through, as measured (< 0: none yet),
    // and the share of the stage's budget planned for the first model.
    const model_spec* second = nullptr;
    bool cascading = false;
    sched::stage_shape second_shape;
    double fallthrough = -1;
    double first_share = 0;
    core_latency l;
    double split_budget_ms = 0;  // the stage's share of the SLO: the budget when nothing was measured
    std::unique_ptr<sched::rate_predictor> predictor;
    std::deque<double> recent;  // per-period rates over the last horizontal period
    double peak = 0;            // the largest rate sized for of late, halved every scheduler.peak_half_life_s
    double poll_sum = 0;        // rates seen by the polls of the current vertical period
    int poll_count = 0;
    // The latest arrivals' time left on arrival (at most arrivals_kept), over reports: one report
    // holds a few requests at low rates, too few for a quantile.
    std::deque<double> arrivals;
    static constexpr size_t arrivals_kept = 512;
    sched::stage_shape shape;
    sched::scale_stage last;           // what the policy saw last
    bool told_no_room = false;         // warned that its next instance found no place
    bool told_no_room_second = false;  // so for a cascade's second
  };

  void route_budgets(const std::function<double(const stage_info&)>& budget);
  void ipa_shapes();
  // What stage `s` sees in one poll (`full`: the last of a vertical period): its rate, its
  // requests' budget, instance 0's queue, the recent peak it is sized for; into s.last.
  void observe(stage_info& s, const cluster_load& load, const std::vector<placed_instance>& instances, bool full,
               double dt);
  // Each stage's next shape by the scaler's policy.
  void choose_shapes(bool full, bool horizontal, bool surge);
  std::vector<stage_info*> stages_of(size_t pipeline);  // indexed by stage: the primary entries
  // What stage `s` sees in all: the rates (and predictions) of its entries summed, for a policy
  // that plans the pipeline's split.
  sched::scale_stage whole_stage(const stage_info& s) const;
  // The entries of stage `s`'s stage beside it (its versions'), itself included.
  std::vector<stage_info*> entries_of(const stage_info& s);
  bool is_variant_of(const stage_info& s, const std::string& model) const;
  void split_budgets();
  void fa2_plan();
  void reconcile(stage_info& s);
  // Brings the instances of `model` (one a stage runs) to `shape`; false while one is missing or
  // not yet serving. `told`: whether the log has said that its next instance finds no place.
  bool bring_to(const model_spec& model, const sched::stage_shape& shape, bool& told);
  void mark_serving();
  void apply();
  // Vertical polls per period and vertical periods per horizontal one, from the knobs; the
  // horizon (in vertical periods) a stage's predictor forecasts.
  void set_periods();
  double horizon() const;

  const cluster_config* cfg_;
  // The file's models, each at its latest refreshed profile (rescale); stages point into it.
  std::vector<model_spec> models_;
  std::map<std::string, double> scales_;
  std::unique_ptr<provisioner> prov_;
  std::string name_;  // for the log
  std::vector<stage_info> stages_;
  uint64_t ticks_ = 0;  // vertical periods
  int ticks_per_horizontal_ = 10;
  uint64_t polls_ = 0;  // looks at the monitor: every load report, several per vertical period
  int polls_per_tick_ = 1;
  scaler_stats stats_;
  // Instances that have served: their workers acknowledged them (loaded the model). One that
  // has not yet carries nothing, so instance 0 of its stage keeps its cores until it does.
  std::set<uint64_t> serving_;
  std::vector<std::string> up_;          // workers up, as the controller last said
  std::set<instance_key> acknowledged_;  // instances the controller routes to
};

// l(b, c) of a model: its `cores` entry, else its profile at any core count.
core_latency latency_of(const model_spec& m);

// IPA's problem for pipeline `p` at per-stage rates `rates` (after fan-out, > 0): every stage's
// variants with their accuracy (100 when a lone model declares none), base cores R, and l(b)
// of one replica at R cores (`replica_cores`: R rounded, at least 1).
int replica_cores(const model_spec& m);
// IPA's base allocations (thesis P3.1, sched::ipa_base_allocation) written into the `base_cores`
// of every model with `cores:` that a stage of `pipelines` may run. Stage s's SLA is its share of
// its pipeline's SLO in proportion to the mean l(1, 1) of its variants (the thesis' SLA_s is five
// times that mean, and its SLA_P their sum), over the path of the largest sum; the largest batch
// is the model's limit. A model several stages run takes the most any needs; one no R serves
// gets `max_cores`. Returns, per model changed, "name: R".
std::vector<std::string> apply_base_allocation(std::vector<model_spec>& models, const std::vector<pipeline>& pipelines,
                                               double threshold_rps, int max_cores);
// A cascade stage has two options: the cascade (its first model, then its second on the
// fraction `fallthrough[stage]` of requests; missing or < 0: declared_fallthrough) and its second
// model alone.
std::vector<sched::ipa_stage> ipa_problem(const std::vector<model_spec>& models, const pipeline& p,
                                          const std::vector<double>& rates,
                                          const std::vector<double>& fallthrough = {});
// Stage budgets for IPA's choices: their latencies stretched so that the longest path takes the
// whole SLO (every path stays within it).
std::vector<double> ipa_stage_budgets(const pipeline& p, const std::vector<sched::ipa_choice>& choices);
// A cascade stage's budget `budget_ms` split for choice `c`: the first model's share, its planned
// part (l1(b) + (b - 1)/lambda) and half the stage's slack (the budget beyond the planned latency),
// so that a burst queued at the first model has room as the second's does; 0 when no budget.
double ipa_first_share(const sched::ipa_choice& c, double budget_ms);

}  // namespace sloserve
