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
// target missed, to no less than the operator's floor (scheduler.jellyfish.min_wait_share; 1 by
// default, so that by default no miss is spent on it), back up before the quantile falls; and
// past that, how much of the headroom Jellyfish leaves on each worker
// (scheduler.jellyfish.headroom) the pipeline's plan keeps (headroom_share): whole until the
// wait share is at its floor, then a quarter down a step while under a quarter of the target
// missed, and back up first when more than half the target missed (a level
// that missed is not given again for 30 s), counting there only the misses the servers caused: a
// request kept longer than its plan allows, not one whose upload took longer than planned.
// Where a headroom is set, the misses decide how much of it is kept, not a constant: whether a
// worker planned to its full throughput misses depends on how its frames come. Header-only and
// clock-free: times are given.

#include <algorithm>
#include <cstdint>

namespace sloserve::sched {

class dip_quantile {
 public:
  // `start`: the quantile before anything is known; `target`: the share of requests that may
  // miss. The quantile stays at `start` when `target` <= 0, and when `start` <= 0 (uploads timed
  // at the estimate itself, uplink_estimate::low_mbps). `min_wait`: the least wait share the steps
  // go down to (1: the lift always plans for a whole batch's wait; the headroom's share moves once
  // the wait share is at it).
  dip_quantile(double start, double target, double min_wait = 0)
      : q_(start), target_(start > 0 ? target : 0), min_wait_(std::clamp(min_wait, 0.0, 1.0)) {}

  // Outcomes seen at `now_s`: `frames` requests or skipped frames, `missed` of them missed,
  // `servers` of those (all, when < 0) where the servers kept them longer than their plan allows
  // (not where an upload took longer than planned): the misses the headroom is judged by.
  void outcome(double now_s, uint64_t frames, uint64_t missed, int64_t servers = -1) {
    if (since_s_ < 0) since_s_ = now_s;
    step_frames_ += frames;
    step_missed_ += missed;
    step_servers_ += servers < 0 ? missed : std::min(missed, static_cast<uint64_t>(servers));
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
    servers_ = memory * servers_ + static_cast<double>(step_servers_);
    level_frames_ = memory * level_frames_ + static_cast<double>(step_frames_);
    // This step's own servers' misses, of enough outcomes: over twice the target, the headroom is
    // short whatever the level was judged on.
    bool urgent = static_cast<double>(step_frames_) >= min_frames &&
                  static_cast<double>(step_servers_) > 2 * target_ * static_cast<double>(step_frames_);
    step_frames_ = step_missed_ = step_servers_ = 0;
    since_s_ = now_s;
    if (frames_ < min_frames) return q_;
    // The headroom's level is judged on the servers' misses seen since it was last taken back,
    // once `settle_s` have passed (the plan made again, the old plan's queues drained).
    bool judged = level_frames_ >= min_frames && now_s - taken_at_s_ >= settle_s;
    double share = missed_ / frames_, servers = judged ? servers_ / level_frames_ : 0;
    bool short_of_room = headroom_ < 1 && (urgent || servers > headroom_high_share * target_);
    if (floor_ > 0 && now_s - floor_since_s_ >= floor_hold_s)
      floor_ = std::max(0.0, floor_ - wait_step), floor_since_s_ = now_s;
    // The headroom taken back from misses: the level that missed is not tried again for a while,
    // and the next is judged on its own misses.
    auto take_back = [&](double by) {
      floor_ = std::max(floor_, std::min(1.0, headroom_ + wait_step));
      floor_since_s_ = taken_at_s_ = now_s;
      headroom_ = std::min(1.0, headroom_ + by);
      servers_ = level_frames_ = 0;
    };
    if (share > target_) {
      // Back in the order given: the headroom, the wait, then the quantile.
      double up = (share > 2 * target_ ? 2 : 1) * wait_step;
      if (short_of_room)
        take_back(up);
      else if (headroom_ < 1 && !judged)
        ;  // a take-back whose effect is not seen yet
      else if (wait_ < 1)
        wait_ = std::min(1.0, wait_ + up);
      else
        q_ = std::max(min_quantile, q_ / (share > 2 * target_ ? 2 : factor));
    } else if (q_ < max_quantile) {
      if (share < low_share * target_) q_ = std::min(max_quantile, std::max(q_ * 2, q_ + 0.005));
    } else if (short_of_room) {
      take_back(wait_step);
    } else if (share < wait_low_share * target_) {
      if (wait_ > min_wait_)
        wait_ = std::max(min_wait_, wait_ - wait_step);
      else if (judged && servers < headroom_low_share * target_)
        headroom_ = std::max(floor_, headroom_ - wait_step);
    }
    return q_;
  }
  // The share of the wait behind a running batch that lifts onto spare compute plan for
  // (sched::jellyfish::client_state::wait_share), as of the last step: 1 (the worst case) until the
  // quantile reached 1, then a quarter lower (to `min_wait`) each step that judged under 0.75 of
  // the target missed, and a quarter higher (a half when over twice the target) each step that
  // judged more than the target did, before the quantile falls.
  double wait_share() const { return wait_; }
  // The share of its configured headroom a pipeline's plan leaves on each worker
  // (sched::jellyfish::client_state::headroom_share), as of the last step: 1 until the wait share
  // reached its floor, then a quarter lower each step that judged under a quarter of the target
  // missed at the servers (and under 0.75 of it in all), and a quarter higher each step that
  // judged more than half the target did at the servers (a half when over twice the target),
  // before the wait share rises; a share taken back is the least for 30 s after
  // the last take-back, then a quarter less each 30 s.
  double headroom_share() const { return headroom_; }

  static constexpr double step_s = 1, memory = 0.85, factor = 1.25;
  static constexpr double min_frames = 100;
  // The quantile doubles, a coarse step, where under half the target missed; the wait share moves
  // by a quarter, a fine one, and so may come closer to the target: under 0.75 of it.
  static constexpr double low_share = 0.5, wait_low_share = 0.75, wait_step = 0.25;
  // The headroom is given back only while under a quarter of the target missed, and taken back
  // from half of it: a worker planned fuller buys a variant step at most, and misses it causes
  // come in bursts, so it keeps well inside the target.
  static constexpr double headroom_low_share = 0.25, headroom_high_share = 0.5;
  // A share taken back from misses is the least given for this long, then a quarter less: the
  // misses a fuller plan causes come some seconds after it, so that trying it again each time the
  // misses have faded would miss in bursts.
  static constexpr double floor_hold_s = 30;
  // A level taken back is judged on what comes this long after: the plan made again and the
  // queues of the one before drained (the misses weighed over the steps before still count the
  // fuller plan's, and judging by them took every level back to the whole headroom).
  static constexpr double settle_s = 2;
  static constexpr double min_quantile = 0.005, max_quantile = 1;

 private:
  double q_, target_, min_wait_;
  double wait_ = 1, headroom_ = 1;
  double floor_ = 0, floor_since_s_ = 0;  // the least headroom share, since when
  double taken_at_s_ = -1e9;              // the last take-back
  double since_s_ = -1;
  uint64_t step_frames_ = 0, step_missed_ = 0, step_servers_ = 0;  // since the last step
  double frames_ = 0, missed_ = 0;                                 // weighed over the steps
  double servers_ = 0, level_frames_ = 0;                          // weighed over the steps since the last take-back
};

}  // namespace sloserve::sched
