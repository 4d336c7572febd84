#pragma once
// What a higher priority leaves, for the lower ones. Short of devices, a plan keeps each priority
// to what fits beside the higher ones (fit_by_priority): the devices of the higher ones are
// planned with their headroom and their duty cycles' idle time, which the lower ones could use,
// since devices run a higher priority's queue before a lower one's (sched::turn_order).
//
// Backfill gives that time to the pipelines the plan cut, highest priority first: a device that
// runs only higher priorities, with idle time, also holds one stage model of a cut pipeline as a
// spare (frontends send it what that stage's planned instances cannot take), at the largest batch
// whose run still lets every planned batch on the device meet its budget after waiting for it
// (Nexus's duty cycle d + l(b) + l(b') <= the session's budget). A pipeline's quota grows by what
// its least backfilled stage carries of it.

#include <vector>

#include "config/cluster_config.hpp"
#include "scheduling/epoch.hpp"
#include "scheduling/placement.hpp"

namespace sloserve {

// One device's time left for backfill.
struct backfill_device {
  const sched::device_slot* slot = nullptr;
  int lowest_priority = 0;  // of the pipelines its planned sessions serve
  double idle = 0;          // share of its time left idle at the rates its pipelines run at now
  double slack_ms = 0;      // the longest run a backfilled batch may take
};

// The devices of `r` that backfill may use: bound to a slot, whole, with more than 5% idle. A
// device is busy for its planned occupancy times the largest share, among the pipelines it
// serves, of the rate planned for (`in.rates`: the peak, with the headroom) that runs now
// (`now`, queries/s per pipeline); without `now`, the plan less its headroom.
std::vector<backfill_device> backfill_devices(const sched::epoch_input& in, const sched::epoch_result& r,
                                              double headroom, const std::vector<double>* now = nullptr);

// Adds to `placed` the backfill of the pipelines that `in.rates` (with the headroom) cut below
// `offered` (queries/s per pipeline, the planning rates before the headroom); returns per
// pipeline the queries/s it adds to what the plan carries of it. `now`: as backfill_devices.
std::vector<double> backfill_cut_priorities(const cluster_config& cfg, const sched::epoch_input& in,
                                            const sched::epoch_result& r, const std::vector<double>& offered,
                                            cluster_placement& placed, const std::vector<double>* now = nullptr);

// The other half, the higher priorities' bursts on the lower ones' devices: a device whose planned
// sessions all serve pipelines of lower priority than some pipeline also holds that pipeline's
// stage models as spares (at the batch the plan runs each at; within the slot's memory), which
// frontends send what the planned instances cannot take at once. Devices run the higher queue
// first, so a burst waits at most for the lower batch running, not for its own instances' queue.
// True when any was added (the caller sets the spill points).
bool spare_higher_priorities(const cluster_config& cfg, const sched::epoch_input& in, const sched::epoch_result& r,
                             cluster_placement& placed);

// What a plan short of devices (`scale` < 1) adds to its placement, as the controller and the
// simulator adopt it: with pipelines of several priorities, the backfill of those it cut
// (backfill_cut_priorities; `planned`: the planning rates before the headroom, `running`: what
// runs now) and the spares of the higher ones (spare_higher_priorities); with several priorities or with tenants, each
// pipeline's quota (what the plan carries of it, the backfill included; the frontends admit that much, the higher
// priorities first and each tenant its share). Returns the backfill per pipeline (queries/s; empty: none).
std::vector<double> cover_shortfall(const cluster_config& cfg, const sched::epoch_input& in,
                                    const sched::epoch_result& r, double scale, const std::vector<double>& planned,
                                    const std::vector<double>& running, cluster_placement& placed);

}  // namespace sloserve
