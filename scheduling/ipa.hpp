#pragma once
// IPA's pipeline configuration (thesis 004, part II), solved exactly: per stage of a pipeline
// DAG, the model variant, batch b and replicas n that maximise
//     alpha * prod_s a_s  -  beta * sum_s n_s * R_s  -  delta * sum_s b_s
// subject to, along every path from a source to a sink,
//     sum_s ( l_s(b_s) + (b_s - 1) / lambda_s ) <= SLO
// (the sink's own SLO where it has one)
// and n_s * b_s / l_s(b_s) >= lambda_s, where a_s is the variant's accuracy (a fraction), R_s
// its base cores, l_s its latency profile and lambda_s the stage's rate after fan-out.
//
// A variant may be a cascade (sequential specialization, thesis 002 ch. 5): its model runs on
// every request at batch b, and the fraction f it is unsure of runs the cascade's second model
// too, at batch b2 on the rate lambda·f. Its latency is l(b) + (b - 1)/lambda + l2(b2) +
// (b2 - 1)/(lambda·f), its cores n·R + n2·R2 (n2 >= 1: the second stays loaded), its accuracy
// (1 - f)·a + f·a2 (a lower bound where the first model's confident answers are at least as
// accurate as its average).
//
// For a (variant, batch) the fewest replicas that carry the rate are always best, so a stage's
// options are its (variant, batch) pairs (a cascade's: (variant, b, b2)); options no better in accuracy, cost and
// latency than another are set aside. A depth-first search over the stages in topological order then bounds the
// objective from above (the best accuracy and the least cost still open) and the latency from below (the fastest
// options still open on the longest path to each sink), and keeps the best complete choice: exact, and fast for the
// pipelines IPA serves (a few stages of a few variants).

#include <cstddef>
#include <functional>
#include <optional>
#include <vector>

#include "pipelines/expected.hpp"
#include "pipelines/model.hpp"

namespace sloserve::sched {

struct ipa_model {
  const model_spec* model = nullptr;  // its latency profile and max_batch
  double accuracy = 0;                // top-1 in percent (0-100)
  double base_cores = 1;              // R: what one replica costs
  // l(b) in ms of one replica (at its R cores); empty: the model's profile.
  std::function<double(int)> latency_ms{};
  double at(int b) const { return latency_ms ? latency_ms(b) : model->profile.latency_ms_at(b); }
};

// A cascade's second model, and the fraction of the stage's requests that reach it.
struct ipa_cascade : ipa_model {
  double fallthrough = 0.5;  // in [0, 1]
};

struct ipa_variant : ipa_model {
  std::optional<ipa_cascade> then{};  // set: the variant is a cascade, its model first
  // Its accuracy in percent: a cascade's (1 - f)·a + f·a2.
  double served_accuracy() const {
    return then ? (1 - then->fallthrough) * accuracy + then->fallthrough * then->accuracy : accuracy;
  }
};

struct ipa_stage {
  std::vector<ipa_variant> variants;
  std::vector<size_t> after;  // stages it follows (indices of earlier stages)
  double rate = 0;            // lambda: requests/s reaching it (after fan-out), > 0
  // A stage no other follows may bound the paths that end at it by an SLO of its own, below the
  // pipeline's (0: the pipeline's).
  double slo_ms = 0;
};

struct ipa_weights {
  double alpha = 1, beta = 0.01, delta = 0.0001;
};

struct ipa_choice {
  size_t variant = 0;
  int batch = 1;
  int replicas = 1;
  double latency_ms = 0;  // l(b) + (b - 1) / lambda, and a cascade's second's part
  // A cascade: its second model's batch and replicas (0 otherwise), and the first model's part
  // of latency_ms.
  int batch2 = 0;
  int replicas2 = 0;
  double first_ms = 0;
};

struct ipa_solution {
  std::vector<ipa_choice> stages;
  double objective = 0;
  double accuracy = 0;    // prod_s a_s, as a fraction
  double cost = 0;        // sum_s n_s * R_s
  double latency_ms = 0;  // the longest path
};

// IPA's base allocation of one variant (thesis P3.1): the fewest cores R (up to `max_cores`) at
// which one replica serves `threshold_rps` at `batch`, the largest batch of the system
// (h(batch, R) >= th), within the stage's SLA (l(batch, R) <= sla_ms); 0 when none does.
int ipa_base_allocation(const core_latency& l, double threshold_rps, double sla_ms, int batch, int max_cores);

// The best configuration, or why there is none (no choice meets the SLO, or bad input).
expected<ipa_solution> solve_ipa(const std::vector<ipa_stage>& stages, double slo_ms, const ipa_weights& w);

// The objective and longest path of `choices` (variant, batch and a cascade's batch2 per stage; replicas are set to
// the fewest that carry the rate); for tests and for comparing configurations.
ipa_solution evaluate_ipa(const std::vector<ipa_stage>& stages, const std::vector<ipa_choice>& choices,
                          const ipa_weights& w);

}  // namespace sloserve::sched
