#pragma once
// A pipeline is a DAG of stages, each running one model, under one end-to-end SLO.

#include <optional>
#include <random>
#include <string>
#include <vector>

#include "pipelines/model.hpp"

namespace sloserve {

// `cascade: {models: [first, second], confidence}` (sequential specialization, thesis 002 ch. 5):
// the first model runs; when it is unsure (its top softmax probability below `confidence`, or for
// a model that declares `pass_rate`, a draw above it), the second runs on the same input.
// `cascade.skew`: the Windowed ε-Greedy skew detection (scheduling/specialization.hpp), its
// hyper-parameters and the compact model's figures at several dominant-class counts.
struct skew_options {
  int window = 30;  // oracle answers per window (w_min)
  int min_count = 2;
  int tau_r = 2;
  double tau_a = 0.05;
  double epsilon = 0.01;
  double tau_fp = 0.5;
  std::vector<double> classes{10}, a_in{0.9}, e_in_out{0.05}, a_out{0.8};
};

// One version of a stage's model and its share of the stage's traffic (`versions:` of a stage).
struct stage_version {
  int version = 1;
  double weight = 1;
  size_t model_index = 0;  // filled by resolve()
};

struct cascade_spec {
  std::vector<std::string> models;  // as written: exactly two
  double confidence = 0.8;
  size_t second_index = 0;  // filled by resolve(): the second model (the first is the stage's model)
  std::optional<skew_options> skew{};
};

// `fanout: {from_output, score_above, score_column, expect}`: data-dependent fan-out. The parent
// emits, per request, `from_output` as float32 [G, F]: G candidate items (a detector's boxes),
// each a row whose column `score_column` is its score. Every row scoring above `score_above`
// is an item: the row without its score column, reshaped to the stage's input where it has as
// many elements (otherwise a tensor of the input's shape derived from it), and the stage runs
// once per item, in row order. The planner takes `expect` items per parent invocation until it
// has measured the stage's rate.
struct output_items {
  std::string from_output;  // the parent model's output name (`models[].output.name`)
  double score_above = 0.5;
  int score_column = 0;
  std::optional<double> expect;  // unset: 1
};

struct stage {
  std::string name;
  // The model it runs. With `variants` (below), the one it starts with (the most accurate); the
  // control plane may run another of them instead (the routing table says which).
  std::string model;
  std::vector<std::string> after;  // names of parent stages, as written
  // Invocations of this stage per invocation of its parent. Set: one invocation per forwarded
  // output row of the parent. Unset: one invocation per parent invocation.
  // With `items` (a data-dependent fan-out, below), the planning estimate: `items.expect`.
  std::optional<double> fanout;
  std::optional<output_items> items{};
  std::vector<std::string> variants{};    // models this stage may run, as written; empty: just `model`
  std::optional<cascade_spec> cascade{};  // `model` is its first model
  // A leaf's own SLO: every path that ends at it must finish within this of the query's arrival
  // (FA2's per-path SLOs), at most the pipeline's. Unset: the pipeline's.
  std::optional<double> slo_ms{};
  // Versions of `model` the stage runs, each with its weight (a canary's split); empty: the
  // model's lowest version alone. model_index is then the version of the largest weight.
  std::vector<stage_version> versions{};

  // Filled by resolve():
  size_t model_index = 0;
  std::vector<size_t> variant_indices{};  // every model it may run (`model` alone without variants)
  std::vector<size_t> parents{};
  std::vector<size_t> children{};
};

// Every model stage `s` may run: its variants (its model alone without), a cascade's second, and
// its model's versions.
std::vector<size_t> stage_models(const stage& s);

struct pipeline {
  std::string name;
  double slo_ms = 0;
  // Under overload, pipelines of lower priority are shed first (`pipelines[].priority`, 0 by
  // default): a plan short of devices carries the higher ones' load before the lower ones'.
  int priority = 0;
  // Replies kept by a hash of the request's inputs: a request seen before is answered from the
  // frontend's response cache without running a stage (`pipelines[].response_cache`).
  bool response_cache = false;
  std::vector<stage> stages;
  std::vector<size_t> topo;  // stage indices in topological order (filled by resolve)

  std::vector<size_t> roots() const;
  std::vector<size_t> leaves() const;
  std::optional<size_t> find_stage(const std::string& name) const;
};

// Per model (indices below `models`), the highest priority of the pipelines that may run it
// (pipelines[].priority; 0 where none does): devices offer the higher ones their turn first.
std::vector<int> model_priorities(const std::vector<pipeline>& pipes, size_t models);

// The model versions a pipeline answers to (KServe's versions of it): 1, and every version its
// stages list, ascending.
std::vector<uint32_t> pipeline_versions(const pipeline& p);
// The model (index) that a stage over versions `vs` runs for a request that asks for `version`:
// that version where the stage lists it, else one drawn by the weights.
size_t pick_version(const std::vector<stage_version>& vs, uint32_t version, std::mt19937_64& rng);

// A problem found while resolving a pipeline; `stage` indexes the stage it concerns.
struct pipeline_issue {
  size_t stage;
  std::string message;
};

// Resolves model (or variant) and parent names to indices, picks each stage's starting variant, computes children and a
// topological order, and reports unknown models and stages, duplicates, cycles, stages that no root reaches, and
// variants that do not take and give the same tensors.
std::vector<pipeline_issue> resolve(pipeline& p, const std::vector<model_spec>& models);

// Longest root-to-leaf sum of single-request latency l(1), each stage at its fastest variant: the
// fastest the pipeline can answer.
double fastest_path_ms(const pipeline& p, const std::vector<model_spec>& models);
// Per stage, the same: the soonest it can finish after the query arrives (its slowest path to it).
std::vector<double> fastest_finish_ms(const pipeline& p, const std::vector<model_spec>& models);

// The SLO of the paths that end at `stage`: its own `slo_ms` where it has one, else the pipeline's.
double path_slo_ms(const pipeline& p, size_t stage);
// Whether some leaf has an SLO of its own below the pipeline's.
bool has_path_slos(const pipeline& p);

// Most stages on any root-to-leaf path.
size_t depth(const pipeline& p);

// Per-stage budgets (ms) and, for each stage, the offset from the query's arrival by which it
// must finish: the largest sum of budgets over paths ending at that stage.
struct slo_split {
  std::vector<double> budget_ms;
  std::vector<double> finish_offset_ms;
  // Per cascade stage, the share of its budget its first model gets, as planned (IPA's); empty or
  // 0: l1(1) / (l1(1) + l2(1)) (cascade_first_share).
  std::vector<double> first_share{};
};

// Offsets for given budgets; every path sums to at most the SLO when the budgets are valid.
// Where a leaf has an SLO of its own and the budgets would finish it later, every stage on the
// paths to it has its budget scaled down by (leaf's SLO / its finish offset), the least such
// factor where a stage leads to several: every path then ends within its own SLO.
slo_split offsets_from_budgets(const pipeline& p, std::vector<double> budget_ms);

// The even-split baseline: every stage gets SLO / depth, the least SLO of the leaves it leads
// to taken for SLO, so every path fits its SLO.
slo_split even_split(const pipeline& p);

}  // namespace sloserve
