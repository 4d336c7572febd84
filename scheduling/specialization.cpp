#include "scheduling/specialization.hpp"

#include <algorithm>
#include <map>

namespace sloserve::sched {

std::vector<int> dominant_classes(const std::vector<int>& samples, int min_count) {
  std::map<int, int> count;
  for (int y : samples) ++count[y];
  std::vector<int> out;
  for (auto [y, n] : count)
    if (n >= min_count) out.push_back(y);
  return out;
}

double cascade_accuracy(double p, double a_in, double e_in_out, double a_out, double oracle) {
  return p * a_in + p * e_in_out * oracle + (1 - p) * a_out * oracle;
}

double interpolate(const std::vector<double>& xs, const std::vector<double>& ys, double x) {
  if (xs.empty() || ys.size() != xs.size()) return 0;
  if (x <= xs.front()) return ys.front();
  for (size_t i = 1; i < xs.size(); ++i)
    if (x <= xs[i]) return ys[i - 1] + (ys[i] - ys[i - 1]) * (x - xs[i - 1]) / (xs[i] - xs[i - 1]);
  return ys.back();
}

namespace {

// Classes in one set and not the other, both ways.
size_t differ(const std::vector<int>& a, const std::vector<int>& b) {
  std::vector<int> out;
  std::set_symmetric_difference(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(out));
  return out.size();
}

}  // namespace

bool weg::check(std::mt19937_64& rng) const {
  return std::uniform_real_distribution<double>(0, 1)(rng) < o_.epsilon;
}

void weg::evaluate() {
  // `phase_` says which samples: the epoch's (template) or the cascade's answers (specialized).
  auto& s = phase_ == phase::specialized ? answers_ : epoch_samples_;
  auto from = s.size() > w_ ? s.end() - static_cast<std::ptrdiff_t>(w_) : s.begin();
  std::vector<int> last(from, s.end());
  if (phase_ != phase::specialized) d_ = dominant_classes(last, o_.min_count);
  size_t in = 0;
  for (int y : last) in += std::binary_search(d_.begin(), d_.end(), y);
  p_ = last.empty() ? 0 : static_cast<double>(in) / static_cast<double>(last.size());
  auto n = static_cast<double>(d_.size());
  estimate_ = d_.empty()
                  ? 0
                  : cascade_accuracy(p_, interpolate(o_.classes, o_.a_in, n), interpolate(o_.classes, o_.e_in_out, n),
                                     interpolate(o_.classes, o_.a_out, n), o_.oracle_accuracy);
}

void weg::select() {
  evaluate();
  if (d_.empty() || estimate_ < o_.oracle_accuracy + o_.tau_a) return;
  phase_ = phase::specialized;
  n_alone_ = n_wrong_ = 0;
  answers_ = epoch_samples_;
}

void weg::reopen() {
  previous_ = std::move(epoch_samples_);
  epoch_samples_.clear();
  answers_.clear();
  window_.clear();
  ++epoch_;
  phase_ = phase::window;
}

void weg::oracle_answered(int y) {
  if (phase_ == phase::specialized) return;
  if (phase_ == phase::window) {
    window_.push_back(y);
    if (static_cast<int>(window_.size()) < o_.window) return;
    // Lines 5-7: the previous epoch goes on when its dominant classes match well enough.
    if (!previous_.empty() && differ(dominant_classes(previous_, o_.min_count),
                                     dominant_classes(window_, o_.min_count)) <= static_cast<size_t>(o_.tau_r)) {
      epoch_samples_ = previous_;
      epoch_samples_.insert(epoch_samples_.end(), window_.begin(), window_.end());
    } else {
      epoch_samples_ = window_;
    }
    window_.clear();
    w_ = epoch_samples_.size();
    phase_ = phase::template_select;
    return select();
  }
  epoch_samples_.push_back(y);  // lines 13-15: explore with the oracle, then select again
  select();
}

void weg::cascade_answered(int y, bool alone, std::optional<int> oracle_y) {
  if (phase_ != phase::specialized) return;
  if (alone) ++n_alone_;
  if (alone && oracle_y && *oracle_y != y) ++n_wrong_;
  answers_.push_back(y);
  evaluate();
  double checks = static_cast<double>(n_alone_) * o_.epsilon;
  bool disagrees = checks >= 1 && static_cast<double>(n_wrong_) / checks > o_.tau_fp;
  if (estimate_ < o_.oracle_accuracy + o_.tau_a || disagrees) reopen();
}

}  // namespace sloserve::sched
