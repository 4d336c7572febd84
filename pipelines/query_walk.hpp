#pragma once
// One query's walk through its pipeline's DAG, apart from any transport: told what each stage
// invocation returned, it says which invocations to send next and when the query is done. The
// frontend sends what it returns and answers the client. A stage runs on its parent's first
// output: once on the whole of it, or, on a fan-out edge, once per forwarded row. A join runs
// once every parent has finished, on its first parent's output.

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
  };

  // `models`: the config's, which `p`'s stages index. `query_id` seeds which rows a fractional
  // fan-out forwards, so that a replay fans out the same way.
  query_walk(const pipeline& p, const std::vector<model_spec>& models, uint64_t query_id);

  // The invocations that start the query: every root stage on the request's inputs.
  std::vector<spawn> start(std::vector<tensor> inputs);

  // An invocation of `stage` returned `outputs`: the invocations that become ready. Every spawn
  // returned is counted as in flight until its result comes back.
  std::vector<spawn> on_result(size_t stage, std::vector<tensor> outputs);

  // Every stage has finished.
  bool done() const { return done_; }
  // The leaf stages' outputs, each named after its stage.
  std::vector<tensor> take_results() { return std::move(results_); }

 private:
  void spawn_from(size_t stage, const tensor& src, std::vector<spawn>& out);
  void settle(std::vector<spawn>& out);  // joins that became ready; finished stages

  const pipeline* p_;
  const std::vector<model_spec>* models_;
  uint64_t query_id_;
  std::vector<uint32_t> outstanding_;              // per stage
  std::vector<uint8_t> finished_, joined_;         // per stage
  std::vector<std::vector<tensor>> first_output_;  // per stage, for joins
  std::vector<tensor> results_;
  bool done_ = false;
};

// Rows forwarded along a fan-out edge: floor(f) plus one more with probability frac(f), drawn
// deterministically from the query so replays fan out identically; at most the rows present.
int64_t fanout_rows(uint64_t query_id, size_t stage, double f, int64_t rows);

}  // namespace sloserve
