#pragma once
// How much of its clients' uplink dips a pipeline plans for (scheduler.jellyfish: the quantile of
// uplink_estimate::low_mbps), kept where its clients miss their SLOs about as often as the operator
// allows (`miss_target`). Planning for deeper dips costs accuracy (smaller images and variants);
// planning for shallower ones costs misses when a link falls. Which is right depends on how
// changeable the links are and on how much of the SLO an upload takes, so it is measured: every
// second, on the requests answered (and the frames clients skipped) so far, each earlier step's
// weighing 0.85x the next one's (some 7 s remembered), the quantile is halved (deeper dips) when
// more than twice the target missed, goes 1.25x down when more than the target did, and doubles
// when under half the target did, within [0.005, 1]. At 1 uploads are timed at the estimate
// itself: the links of a pipeline whose clients do not miss are planned for as they are, as a
// client adapting to its own bandwidth would use them; it is where the quantile starts by default
// (scheduler.jellyfish.uplink_quantile), so that dips are planned for once misses show them, not
// before: planning for them from the start cost up to 5 points of accuracy in the first 10 s of
// a run for 0.3-1.3 points fewer misses (docs/benchmarks.md). Past that, the same steps move how
// much of the wait behind a running batch Jellyfish's lift onto spare compute plans for
// (wait_share), which is the worst case until then: a quarter down while under 0.75 of the
// target missed, back up before the quantile falls. Header-only and clock-free: times are given.

#include <algorithm>
#include <cstdint>

namespace sloserve::sched {

class dip_quantile {
 public:
  // `start`: the quantile before anything is known; `target`: the share of requests that may
  // miss. The quantile stays at `start` when `target` <= 0, and when `start` <= 0 (uploads timed
  // at the estimate itself, uplink_estimate::low_mbps).
  dip_quantile(double start, double target) : q_(start), target_(start > 0 ? target : 0) {}

  // Outcomes seen at `now_s`: `frames` requests or skipped frames, `missed` of them missed.
  void outcome(double now_s, uint64_t frames, uint64_t missed) {
    if (since_s_ < 0) since_s_ = now_s;
    step_frames_ += frames;
    step_missed_ += missed;
  }

  // The quantile to plan with at `now_s`. A step once `step_s` have passed, judged on the
  // outcomes so far with each earlier step's weighing `memory` times the next one's (links change
  // over seconds, and misses are rare: one step's few are not enough to judge by), once
  // `min_frames` are weighed: lower (deeper dips) when more than the target missed (2x when over
  // twice the target), 2x higher (0.005 at least) when under half the target did.
  double quantile(double now_s) {
    if (target_ <= 0 || since_s_ < 0 || now_s - since_s_ < step_s) return q_;
    frames_ = memory * frames_ + static_cast<double>(step_frames_);
    missed_ = memory * missed_ + static_cast<double>(step_missed_);
    step_frames_ = step_missed_ = 0;
    since_s_ = now_s;
    if (frames_ < min_frames) return q_;
    double share = missed_ / frames_;
    if (share > target_) {
      bool far = share > 2 * target_;
      if (wait_ < 1)
        wait_ = std::min(1.0, wait_ + (far ? 2 : 1) * wait_step);
      else
        q_ = std::max(min_quantile, q_ / (far ? 2 : factor));
    } else if (q_ < max_quantile) {
      if (share < low_share * target_) q_ = std::min(max_quantile, std::max(q_ * 2, q_ + 0.005));
    } else if (share < wait_low_share * target_) {
      wait_ = std::max(0.0, wait_ - wait_step);
    }
    return q_;
  }
  // The share of the wait behind a running batch that lifts onto spare compute plan for
  // (sched::jellyfish::client_state::wait_share), as of the last step: 1 (the worst case) until the
  // quantile reached 1, then a quarter lower each step that judged under 0.75 of the target
  // missed, and a quarter higher (a half when over twice the target) each step that judged more
  // than the target did, before the quantile falls.
  double wait_share() const { return wait_; }

  static constexpr double step_s = 1, memory = 0.85, factor = 1.25;
  static constexpr double min_frames = 100;
  // The quantile doubles, a coarse step, where under half the target missed; the wait share moves
  // by a quarter, a fine one, and so may come closer to the target: under 0.75 of it.
  static constexpr double low_share = 0.5, wait_low_share = 0.75, wait_step = 0.25;
  static constexpr double min_quantile = 0.005, max_quantile = 1;

 private:
  double q_, target_;
  double wait_ = 1;
  double since_s_ = -1;
  uint64_t step_frames_ = 0, step_missed_ = 0;  // since the last step
  double frames_ = 0, missed_ = 0;              // weighed over the steps
};

}  // namespace sloserve::sched
