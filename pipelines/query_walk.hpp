#pragma once
// One query's walk through its pipeline's DAG, apart from any transport: told what each stage
// invocation returned, it says which invocations to send next and when the query is done. The
// frontend sends what it returns and answers the client. A stage runs on its parent's first
// output: once on the whole of it, or, on a fan-out edge, once per forwarded row. A join runs
// once every parent has finished, on its first parent's output.

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "pipelines/pipeline.hpp"

namespace sloserve {

class query_walk {
 public:
  // An invocation to send: `stage` of the pipeline on `inputs`.
  struct spawn {
    size_t stage = 0;
    std::vector<tensor> inputs;
    uint32_t item = 0;  // the order of the stage's output among its invocations' (on_result)
  };

  // `models`: the config's, which `p`'s stages index. `query_id` seeds which rows a fractional
  // fan-out forwards, so that a replay fans out the same way.
  query_walk(const pipeline& p, const std::vector<model_spec>& models, uint64_t query_id);

  // The invocations that start the query: every root stage on the request's inputs.
  std::vector<spawn> start(std::vector<tensor> inputs);

  // An invocation of `stage` returned `outputs`: the invocations that become ready. Every spawn
  // returned is counted as in flight until its result comes back. `item`: the spawn's.
  std::vector<spawn> on_result(size_t stage, std::vector<tensor> outputs, uint32_t item = 0);

  // Every stage has finished.
  bool done() const { return done_; }
  // The leaf stages' outputs, each named after its stage; a stage's in the order the walk spawned
  // its invocations (a data-dependent fan-out's in its parent's row order).
  std::vector<tensor> take_results();

 private:
  void spawn_from(size_t stage, const tensor& src, std::vector<spawn>& out);
  void settle(std::vector<spawn>& out);  // joins that became ready; finished stages

  const pipeline* p_;
  const std::vector<model_spec>* models_;
  uint64_t query_id_;
  std::vector<uint32_t> outstanding_;                 // per stage
  std::vector<uint8_t> finished_, joined_;            // per stage
  std::vector<std::vector<tensor>> first_output_;     // per stage, for joins
  std::vector<std::pair<uint32_t, tensor>> results_;  // by item
  uint32_t next_item_ = 0;
  bool done_ = false;
};

// Cascades (`stages[].cascade`): whether the first model's answer stands. With `pass_rate`
// declared, a draw from the query (deterministic, as fan-out's) below it; otherwise every row of
// its first output (the last dimension holds the classes, float32) has a top softmax probability
// of at least `confidence`. Anything else is unsure, and the second model runs.
bool cascade_confident(const model_spec& first, const cascade_spec& c, const std::vector<tensor>& outputs,
                       uint64_t query_id, size_t stage);
// The top softmax probability over the last dimension of each row of `t` (float32), the least of
// them; 0 for anything else.
double least_top_probability(const tensor& t);
// The class a model's outputs name: the largest value over the last dimension of the first row
// of its first output (float32); -1 for anything else.
int top_class(const std::vector<tensor>& outputs);
// The share of a cascade stage's budget its first model gets: l1(1) / (l1(1) + l2(1)).
double cascade_first_share(const model_spec& first, const model_spec& second);
// The fraction of a cascade's requests its first model is expected to leave to the second before
// any is measured: 1 - pass_rate where the model declares one, else half.
double declared_fallthrough(const model_spec& first);

// Milliseconds as whole nanoseconds, rounded: how a query's budget becomes its deadline.
inline int64_t ns_of_ms(double ms) {
  return static_cast<int64_t>(std::llround(ms * 1e6));
}

// The stage deadlines of a query, as nanoseconds after its arrival, the same for the frontend
// and the simulator. A query's span is its deadline minus its arrival: the pipeline's SLO, or
// less where the client asked for less; the split's finish offsets scale with it.
// By when stage `stage` finishes: its finish offset, scaled to the span, at most the span.
int64_t stage_finish_ns(const pipeline& p, const slo_split& split, size_t stage, int64_t span_ns);
// By when the paths that end at leaf `leaf` are due: its own SLO (path_slo_ms), scaled to the
// span as the finish offsets are. A leaf that finishes later makes the query late though its
// reply comes within the span.
int64_t path_deadline_ns(const pipeline& p, size_t leaf, int64_t span_ns);
// Whether `stage`, finishing `elapsed_ns` after the query arrived, is a leaf with an SLO of its
// own that it missed (the frontend and the simulator judge alike).
bool path_late(const pipeline& p, size_t stage, int64_t elapsed_ns, int64_t span_ns);
// By when the stage's first invocation finishes: a cascade's first model by its share of the
// stage's budget (the split's first_share, else cascade_first_share), so that the second may
// follow; else stage_finish_ns.
int64_t first_model_finish_ns(const pipeline& p, const std::vector<model_spec>& models, const slo_split& split,
                              size_t stage, int64_t span_ns);

// The items of a data-dependent fan-out (`stages[].fanout.from_output`) in `parent_output`, in
// row order, each made the stage's input `spec` (see output_items). Nothing for a tensor other
// than the float32 [G, F] the config checked.
std::vector<tensor> output_items_of(const tensor& parent_output, const output_items& items, const tensor_spec& spec);

// What the simulator forwards for a data-dependent fan-out without tensors: each of `rows`
// candidates is an item with probability 1 - score_above, as when scores are uniform in [0, 1)
// (an emulated model's outputs), drawn deterministically from the query.
int64_t drawn_items(uint64_t query_id, size_t stage, double score_above, int64_t rows);

// Rows forwarded along a fan-out edge: floor(f) plus one more with probability frac(f), drawn
// deterministically from the query so replays fan out identically; at most the rows present.
int64_t fanout_rows(uint64_t query_id, size_t stage, double f, int64_t rows);

}  // namespace sloserve
