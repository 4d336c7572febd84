#pragma once
// A model's l(b), tabulated once per plan: planning asks for it millions of times at scale.

#include <memory>
#include <unordered_map>
#include <vector>

#include "pipelines/model.hpp"

namespace sloserve::sched {

class batch_table {
 public:
  explicit batch_table(const model_spec& m);

  const model_spec& model() const { return *model_; }
  int limit() const { return limit_; }  // the largest batch the model runs
  // l(b) in ms, as model().profile.latency_ms_at(b).
  double ms(int b) const {
    return b >= 1 && b <= limit_ ? l_[static_cast<size_t>(b)] : model_->profile.latency_ms_at(b);
  }
  // The batch sizes the planner may choose, ascending (profile.plannable_batches(max_batch)).
  const std::vector<int>& plannable() const { return plannable_; }
  // As sched::saturating_batch(model(), budget_ms): the largest b/l(b) with 2·l(b) <= L.
  int saturating_batch(double budget_ms) const;
  // Requests/s at the saturating batch; 0 when none fits.
  double throughput(double budget_ms) const;
  // Bounds of l over batch ranges: the least l(b') for b' >= b, the most for b' <= b (b within
  // [1, limit]).
  double least_from(int b) const;
  double most_upto(int b) const;
  // The least ms per request any batch up to the limit costs: l(b) >= b · this.
  double least_per_request_ms() const { return per_request_; }

 private:
  const model_spec* model_;
  int limit_ = 0;
  std::vector<double> l_, least_from_, most_upto_;
  std::vector<int> plannable_;
  std::vector<double> plannable_l_;
  std::vector<int> best_upto_;  // per plannable index: the saturating batch among those up to it
  bool monotone_ = true;        // l never falls over the plannable batches
  double per_request_ = 0;
};

// Tables per model, made on first use. Threads may share it once every model they ask for has
// its table.
class batch_tables {
 public:
  const batch_table& of(const model_spec& m) const;

 private:
  mutable std::unordered_map<const model_spec*, std::unique_ptr<batch_table>> tables_;
};

}  // namespace sloserve::sched
