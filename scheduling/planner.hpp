#pragma once
// Placing sessions on devices. A session is all traffic for one model under one latency
// objective. Nexus's squishy bin packing (thesis 002 Algorithm 3.1) and a batch-oblivious
// baseline, behind one interface.

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "config/knobs.hpp"
#include "pipelines/model.hpp"
#include "scheduling/batch_table.hpp"

namespace sloserve::sched {

struct session {
  const model_spec* model = nullptr;
  double slo_ms = 0;  // this session's latency budget
  double rate = 0;    // requests/s
};

// One session's share of one device.
struct assignment {
  size_t session = 0;  // index into the sessions planned
  int batch = 1;       // scheduled batch size
  double rate = 0;     // requests/s this device takes
};

struct device_plan {
  int id = 0;                // stable across incremental re-plans
  bool dedicated = false;    // saturated by one session, running batch B back to back
  double duty_cycle_ms = 0;  // round-robin period; for a dedicated device, l(B)
  std::vector<assignment> sessions;
  double occupancy = 0;  // busy fraction of the duty cycle
  double memory_mb = 0;
  // Piccolo's machines: the device type and share a configuration runs on (no type: any whole
  // device), and the dummy requests/s the frontends send it beside its sessions' rates.
  std::optional<std::string> type;
  double share = 1;
  double dummy_rate = 0;
  double collect_ms = 0;  // whole batches in turn: the time its batch takes to fill (b / w)
};

struct plan {
  std::vector<device_plan> devices;
  std::vector<size_t> infeasible;  // sessions no device can serve within their SLO
  size_t moved = 0;                // sessions (or dedicated devices) a re-plan moved
};

struct device_caps {
  double memory_mb = 0;  // 0: not limited
};

class planner {
 public:
  virtual ~planner() = default;
  virtual std::string_view name() const = 0;
  // Places `sessions`. With `previous` (a plan of an earlier epoch, matched by model and SLO),
  // keeps as many sessions where they were as it can.
  // `tables`: l(b) of the sessions' models, tabulated (made here when not given).
  plan make(const std::vector<session>& sessions, const device_caps& caps, const plan* previous = nullptr,
            const std::vector<session>* previous_sessions = nullptr, const batch_tables* tables = nullptr) const {
    if (tables) return make_impl(sessions, caps, previous, previous_sessions, *tables);
    batch_tables own;
    return make_impl(sessions, caps, previous, previous_sessions, own);
  }

 protected:
  virtual plan make_impl(const std::vector<session>&, const device_caps&, const plan*, const std::vector<session>*,
                         const batch_tables&) const = 0;
};

// Squishy bin packing: saturate whole devices at the largest batch with 2·l(B) <= L, then
// pack the residual loads best-fit decreasing by occupancy, merging duty cycles.
class nexus_planner final : public planner {
 public:
  std::string_view name() const override { return "nexus"; }

 protected:
  plan make_impl(const std::vector<session>&, const device_caps&, const plan*, const std::vector<session>*,
                 const batch_tables&) const override;
};

// The baseline: each session needs rate / T(L) devices at its best single-device batch,
// packed first-fit decreasing as if co-located sessions did not slow each other down.
class batch_oblivious_planner final : public planner {
 public:
  std::string_view name() const override { return "batch-oblivious"; }

 protected:
  plan make_impl(const std::vector<session>&, const device_caps&, const plan*, const std::vector<session>*,
                 const batch_tables&) const override;
};

// Every way `p` breaks a session's latency, a device's duty cycle or memory, or leaves a
// session's rate uncovered; empty when it is sound. Worst case on a shared device is
// duty cycle + l(b); on a dedicated one 2·l(B).
std::vector<std::string> check_plan(const plan& p, const std::vector<session>& sessions, const device_caps& caps);

}  // namespace sloserve::sched
