#pragma once
// Everything that decides whether one frontend lets a query in, in the order it asks: the
// tenant's cap and the plan's quotas (sched::admission), the share guard's quota where the plan
// gives none (sched::share_guard), and what a higher priority's misses take from the lower ones
// (sched::priority_guard). The frontend owns one, and the simulator's frontend another, so that a
// simulated cluster admits as a real one does. Pure and clocked by the caller.

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "config/cluster_config.hpp"
#include "messages/types.hpp"
#include "scheduling/admission.hpp"
#include "scheduling/priority_guard.hpp"
#include "scheduling/share_guard.hpp"

namespace sloserve::sched {

class frontend_admission {
 public:
  // The cluster's tenants and pipelines (`cfg`, kept by reference), shared among `frontends`;
  // quotas and limits lifted.
  void configure(const cluster_config& cfg, size_t frontends);
  size_t frontends() const { return frontends_; }
  // A routing table's quotas, its frontends (the caps' and quotas' split), and which pipelines
  // share a device (the priority guard's). `models[pi]`: the models pipeline `pi` runs now.
  void apply(const msg::routing_table& t, const std::vector<std::vector<std::string>>& models);
  // Whether a query of pipeline `pi` from tenant `tenant` (an index of security.tenants; < 0:
  // none) at `now_s` is let in: within its tenant's cap; where the plan is short of devices,
  // within its tenant's share of this frontend's share of what the plan carries of the pipeline;
  // where the plan gives a pipeline with tenants no quota and it misses its SLO for its load,
  // within its tenant's share of what it gets through in time here; then, where pipelines differ
  // in priority, within the limit that the misses of a higher priority it shares a device with
  // put on it.
  admission::verdict admit(size_t pi, int tenant, double now_s);
  // An admitted query of pipeline `pi` was answered at `now_s`, within its SLO or not; `served`:
  // answered other than ERROR (an error says nothing of the load).
  void on_outcome(size_t pi, bool within_slo, bool served, double now_s);
  // What the other frontends report of each tenant's rate (admission::set_elsewhere), and what
  // tenant `tenant` offers here at `now_s`.
  void set_elsewhere(std::optional<std::vector<double>> offered) { admission_.set_elsewhere(std::move(offered)); }
  double offered_here(int tenant, double now_s) const { return admission_.offered_here(tenant, now_s); }

 private:
  void roll_shares(double now_s);  // the share guard's quotas into the admission when they change

  const cluster_config* cfg_ = nullptr;
  size_t frontends_ = 1;
  admission admission_;
  priority_guard priority_;
  share_guard shares_;
};

// Per pipeline, the others it shares a device with: those whose models (`models[pi]`) have an
// instance on a device of the table's where one of its own has.
std::vector<std::vector<size_t>> pipelines_sharing_devices(const msg::routing_table& t,
                                                           const std::vector<std::vector<std::string>>& models);

}  // namespace sloserve::sched
