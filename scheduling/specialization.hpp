#pragma once
// Sequential specialization's skew detection: the Windowed ε-Greedy algorithm (WEG, thesis 002
// §5.3.2, Algorithm 5.1) for a cascade stage (`cascade: {..., skew: {...}}`). A compact model
// pays off only while a few classes dominate the stream; WEG watches the classes the oracle (the
// cascade's second model) reports and runs the cascade only while the skew makes it accurate
// enough.
//
// Phases:
// - window: the oracle alone answers `window` inputs; when the dominant classes (those seen at
//   least `min_count` times) differ from the previous window's by at most `tau_r` classes, the
//   two windows are one epoch and their samples are folded together.
// - template: D = the dominant classes of the last w samples (w: the window's size, or the
//   folded epoch's), p = their share there, and the cascade's estimated accuracy (Equation 5.1)
//   a = p·a_in + p·e_in→out·a* + (1 − p)·a_out·a*. At a ≥ a* + tau_a the cascade runs;
//   otherwise the oracle answers the next input and the estimate is made again.
// - specialized: the cascade answers (its compact model alone when confident, else the oracle
//   after it). With probability ε an answer the compact model gave alone is checked by the
//   oracle too. It returns to a new window when the estimate (p over the last w answers) drops
//   below a* + tau_a, or when checked answers disagree too often: n*/(n_c·ε) > tau_fp, n* the
//   disagreements and n_c the answers the compact model gave alone, judged once n_c·ε ≥ 1.
// The printed line 18 counts disagreements when the cascade did use the oracle (whose answer
// then is the oracle's own); it is read here as the text describes it: the oracle checks the
// compact model's own answers.
// a_in, e_in→out and a_out depend on |D|: given at several class counts, they are interpolated
// linearly (constant beyond the ends), as the thesis does.

#include <cstddef>
#include <optional>
#include <random>
#include <vector>

#include "pipelines/pipeline.hpp"

namespace sloserve::sched {

// The stage's `cascade.skew` (pipelines/pipeline.hpp), and a*: the oracle's accuracy (a fraction).
struct weg_options : skew_options {
  double oracle_accuracy = 0.7;
};

// The classes seen at least `min_count` times in `samples`, ascending.
std::vector<int> dominant_classes(const std::vector<int>& samples, int min_count);
// Equation 5.1.
double cascade_accuracy(double p, double a_in, double e_in_out, double a_out, double oracle);
// `ys` at `x` by linear interpolation over `xs` (ascending), constant beyond its ends.
double interpolate(const std::vector<double>& xs, const std::vector<double>& ys, double x);

class weg {
 public:
  enum class phase { window, template_select, specialized };
  explicit weg(weg_options o) : o_(std::move(o)) {}

  phase now() const { return phase_; }
  // Whether the next input runs the cascade (else the oracle alone).
  bool cascades() const { return phase_ == phase::specialized; }
  // Whether to have the oracle check an answer the compact model gave alone (a draw below ε).
  bool check(std::mt19937_64& rng) const;
  // The oracle alone answered `y` (window and template phases).
  void oracle_answered(int y);
  // The cascade answered `y` (specialized phase): `alone` when the compact model answered
  // without the oracle; `oracle_y`: the oracle's answer when it checked this one.
  void cascade_answered(int y, bool alone, std::optional<int> oracle_y);

  // The current dominant classes and their share (of the template's or the specialized phase's
  // last w samples), and the estimate of Equation 5.1 at them.
  const std::vector<int>& dominant() const { return d_; }
  double skew() const { return p_; }
  double estimate() const { return estimate_; }
  int epochs() const { return epoch_; }
  size_t judged() const { return w_; }  // w: how many of the last samples the estimate counts

 private:
  void select();    // template selection on the last w of `epoch_samples_`
  void evaluate();  // D, p and the estimate over the last w of `samples`
  void reopen();    // back to a new window

  weg_options o_;
  phase phase_ = phase::window;
  int epoch_ = 1;
  std::vector<int> window_;         // S_j being collected (window phase)
  std::vector<int> previous_;       // S_{j-1}
  std::vector<int> epoch_samples_;  // S_j once the window closed (template phase)
  std::vector<int> answers_;        // S in the specialized phase
  size_t w_ = 0;
  std::vector<int> d_;
  double p_ = 0, estimate_ = 0;
  long n_alone_ = 0, n_wrong_ = 0;  // n_c, n*
};

}  // namespace sloserve::sched
