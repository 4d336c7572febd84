#pragma once
// Per-pipeline load as the scheduler plans for it: queries/s and invocations/s of every stage,
// smoothed over windows of the frontends' counts, and the fan-out they imply.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "pipelines/pipeline.hpp"

namespace sloserve::sched {

// A partitioned model's queries that start at layer `start` under an SLO of `slo_ms`: Graft's
// fragment, as a share of its pipeline's rate, from `clients` clients.
struct fragment_share {
  int start = 0;
  double slo_ms = 0;
  double share = 0;
  int clients = 1;
  bool operator==(const fragment_share&) const = default;
};

// Queries counted for one fragment in a frontend's window.
struct fragment_count {
  int start = 0;
  double slo_ms = 0;
  uint64_t queries = 0;
  int clients = 1;
};

struct pipeline_rate {
  double rate = 0;                    // queries/s
  std::vector<double> stage;          // invocations/s per stage
  std::vector<double> fallthrough{};  // per stage: invocations/s of a cascade's second model
  // A partitioned model's fragments (those above 1% of its queries), smoothed as the rates are.
  std::vector<fragment_share> fragments{};
  double window = 0;  // queries/s of the last window alone (a surge shows here first)
  double peak = 0;    // the largest rate of late, halved every peak half-life
};

struct pipeline_rates {
  std::vector<pipeline_rate> pipelines;  // in the config's order
  int windows_with_load = 0;             // windows closed so far that counted any query
};

class pipeline_load {
 public:
  // `stages[i]`: stage count of pipeline i. The first `settle_windows` windows with load are
  // averaged plainly, the first of them dropped (load that starts mid-window makes it a fraction
  // of the rate); after them the newest window weighs 0.5. The peak of the rate decays with a
  // half-life of `peak_half_life_s` (0: no memory, the peak is the rate).
  pipeline_load(const std::vector<size_t>& stages, int settle_windows, double peak_half_life_s = 0);

  // A frontend's counts for pipeline `p` since its last report.
  // `fallthroughs`: per stage, invocations of a cascade's second model (may be empty). With a
  // `source` and the `report_s` seconds its counts cover, the counts are that source's rates
  // over its own reports: a window that two of its reports reach counts their mean, one that none
  // reaches its latest (for two windows; then the source is gone), so that reports sent on their
  // own clock do not make one window twice the rate and the next nothing. Without, they count in
  // the window they reach.
  void count(size_t p, uint64_t queries, const std::vector<uint64_t>& stage_invocations,
             const std::vector<uint64_t>& fallthroughs = {}, const std::vector<fragment_count>& fragments = {},
             const std::string& source = {}, double report_s = 0);
  // The pipelines changed (an apply): pipeline i now has `stages[i]` stages and continues pipeline
  // `from[i]` (its rates, peak and sources) when that is set and its stage count is the same;
  // otherwise it starts from nothing.
  void remap(const std::vector<size_t>& stages, const std::vector<std::optional<size_t>>& from);
  // Folds the counts of the last `window_s` seconds into the rates and starts a new window.
  void close_window(double window_s);
  const pipeline_rates& rates() const { return rates_; }

 private:
  int settle_windows_;
  double peak_half_life_s_;
  pipeline_rates rates_;
  std::vector<uint64_t> queries_;
  std::vector<std::vector<uint64_t>> stages_, fallthroughs_;
  // Per pipeline, per source that reports its own windows: counts and seconds since the last
  // window closed, and its latest rates.
  struct source_window {
    double queries = 0, seconds = 0;
    std::vector<double> stages, fallthroughs;
    double rate = 0;
    std::vector<double> stage_rates, fallthrough_rates;
    int missed = 0;  // windows closed without a report from it
  };
  std::vector<std::map<std::string, source_window>> sources_;
  // Per pipeline, per (start, SLO): queries and clients this window, and their smoothed values.
  struct fragment_window {
    double queries = 0, clients = 0;  // this window
    double smoothed = 0, smoothed_clients = 0;
  };
  std::vector<std::map<std::pair<int, double>, fragment_window>> fragments_;
};

// A frontend's counts with the queries it shed for priority or fair share (`shed`) counted as
// offered: the queries, and each stage's invocations and fallthroughs in proportion, so that the
// fanouts stay as measured. Under a quota the plan then sees what is sent, not what it let in.
void add_shed(uint64_t& queries, std::vector<uint64_t>& stage_invocations, std::vector<uint64_t>& fallthroughs,
              uint64_t shed);

// Beacon windows with load before the first plan: one partial window and about a second of full
// ones, so that the rate the first plan is made for is not one window's Poisson noise.
int settle_windows(int beacon_ms);

// The rate a pipeline is planned for: the larger of its rate and its recent peak, so that a lull
// does not take its devices away; the last window's when `surge` and that is larger.
double planning_rate(const pipeline_rate& r, bool surge = false);
// Whether no pipeline has load to plan for (none measured yet, or a peak long decayed): plans are
// then made for what the devices can hold (plan_capacity_epoch).
bool nothing_to_plan_for(const pipeline_rates& rates);

// When the scheduler plans again (scheduler: in the cluster file).
struct epoch_rule {
  double epoch_s = 30;                     // at least this often
  double min_epoch_s = 10;                 // never more often, unless a rate left its band
  double band_low = 0.8, band_high = 1.1;  // of the rate the plan was made for
  int settle_windows = 2;                  // windows with load before the first plan
  double window_s = 1;                     // of the rates (a beacon)
};

// What the plan in force was made for, per pipeline: the planning rate, and the rate it carries
// (with headroom, and the spare multiple a plan takes when devices allow).
struct planned_load {
  std::vector<double> rate;
  std::vector<double> carried;
  // Per pipeline, each stage's invocations/s the plan carries (its rate through the fanouts it
  // was planned with); empty where not known.
  std::vector<std::vector<double>> stage_carried;
};

// Why an epoch is due, if it is.
enum class epoch_reason {
  none,
  first,   // the rates have settled, and there is no plan yet
  period,  // epoch_s since the last
  band,    // a planning rate left its band, min_epoch_s after the last
  surge,   // a window's rate above what the plan carries: at once, whatever min_epoch_s says
};
// Whether an epoch is due `since_s` after the last one: the first once `rates` have settled,
// then every epoch_s, or after min_epoch_s when a pipeline's planning rate left the band around
// the rate it was planned for (`planned`; null before the first plan), or at once when the last
// window brought more than the plan carries (beyond three standard deviations of Poisson noise),
// or the smoothed rate is above it, or a stage's smoothed rate is beyond the noise above what the
// plan carries for it (a fanout larger than planned: a plan made as a surge began, while the
// stages after the first had not yet seen it).
// Never while nothing at all is to be planned for: an idle cluster keeps what it serves.
epoch_reason epoch_due(const epoch_rule& rule, const pipeline_rates& rates, const planned_load* planned,
                       double since_s);
// The planning rates of every pipeline (with the last window's where `surge`).
std::vector<double> planning_rates(const pipeline_rates& rates, bool surge);

struct epoch_input;

// Sets `in`'s rates to the planning rates × (1 + headroom), and its fan-outs to the measured ones;
// for a `surge`, none below the file's or those of the plan in force (`in_force`, if any): the
// stages after the first have not seen the surge yet.
void set_measured_load(epoch_input& in, const pipeline_rates& rates, double headroom, bool surge = false,
                       const planned_load* in_force = nullptr);

// Measured fall-through per stage: the fraction of a cascade's invocations its second model ran;
// the first model's declared 1 - pass_rate (or 0.5 when it declares none) where nothing was
// measured, and 0 for stages without a cascade.
std::vector<double> measured_fallthrough(const pipeline& p, const std::vector<model_spec>& models,
                                         const pipeline_rate& r);

// Measured fan-out per stage: invocations of a stage per invocation of its parent (per query for
// roots and joins); the declared value where nothing was measured.
std::vector<double> measured_fanout(const pipeline& p, const pipeline_rate& r);

}  // namespace sloserve::sched
