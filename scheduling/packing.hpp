#pragma once
// Squishy bin packing (thesis 002 Algorithm 3.1) at scale: shared devices indexed by duty cycle
// and free capacity, so that the best fit for a residual load looks at a few devices instead of
// all of them; and a packing that can take a session out and put it back, so that the SLO
// split's neighbour search re-packs only what a candidate changes.

#include <cstddef>
#include <map>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "scheduling/batch_table.hpp"
#include "scheduling/planner.hpp"

namespace sloserve::sched {

constexpr double plan_eps = 1e-9;

// Memory of the models `as` holds, each counted once.
double memory_of(const std::vector<assignment>& as, const std::vector<session>& ss);

// A session's residual load on a shared device.
struct residual {
  size_t s = 0;
  double rate = 0;
  int batch = 0;
  double max_duty_ms = 0;  // the longest duty cycle that still meets its SLO
  double occupancy = 0;
  const batch_table* table = nullptr;  // the session's model's
};

// How a session is served: whole devices at its saturating batch B (lines 1-7), and the residual
// rate on a shared device (lines 8-11).
struct session_load {
  int saturating = 0;     // B; 0 when no batch fits twice in the SLO
  double throughput = 0;  // req/s of one dedicated device at B
  int dedicated = 0;
  std::optional<residual> rest;
  bool infeasible = false;  // some of its rate fits nowhere
};
session_load load_of(const std::vector<session>& ss, size_t i, const batch_tables& tables);

device_plan dedicated_device(const std::vector<session>& ss, size_t i, int batch, double rate,
                             const batch_tables& tables);

// The shared devices of one packing.
class shared_devices {
 public:
  struct device {
    device_plan plan;               // duty cycle, sessions with their batches, occupancy, memory
    std::vector<residual> members;  // parallel to plan.sessions
    double busy_ms = 0;             // sum of l(b) in the order of members
    double work = 0;                // sum of rate · least ms per request: occupancy's floor at any cycle
    bool alive = true;
  };

  shared_devices(const std::vector<session>& ss, const device_caps& caps) : ss_(ss), caps_(caps) {}

  // MERGENODES over a set: the shortest duty cycle of the members (or `duty_ms`), each batch
  // ceil(d·r); none when the batches overrun the cycle, an SLO or a batch limit breaks, or
  // memory is short.
  std::optional<device> make(const std::vector<residual>& members, double duty_ms = 0) const;
  // The device that `r` joins with the highest occupancy after the merge (ties: the lowest
  // index). Exhaustive while the index narrows the search to a few hundred devices.
  std::optional<size_t> best_fit(const residual& r) const;
  // Device k with r merged in (its cycle shortened to r's longest if need be).
  std::optional<device> join(size_t k, const residual& r) const;

  size_t add(device d);
  void replace(size_t k, device d);
  // Takes session `s` off device k; the others keep the duty cycle and their batches. A device
  // left empty leaves the packing.
  void remove_member(size_t k, size_t s);
  // Takes device k out of the packing (out of every best fit).
  void retire(size_t k);

  // Changes after begin() are undone by rollback() and kept by commit().
  void begin();
  void rollback();
  void commit();

  const std::vector<device>& all() const { return devices_; }
  size_t alive() const { return alive_; }
  // The sum of the occupancies of the devices in the packing.
  double load() const { return load_; }

 private:
  std::optional<double> occupancy_with(size_t k, const residual& r) const;
  void index(size_t k);
  void unindex(size_t k);
  void save(size_t k);

  struct bucket {
    std::set<std::pair<double, size_t>> by_free;  // (1 - occupancy, device)
    std::set<std::pair<double, size_t>> by_work;
  };
  struct key {
    int bucket = 0;
    double free = 0, work = 0;
    bool indexed = false;
  };

  const std::vector<session>& ss_;
  device_caps caps_;
  std::vector<device> devices_;
  std::vector<key> keys_;
  std::map<int, bucket> buckets_;  // by duty cycle, 4 per octave
  size_t alive_ = 0;
  double load_ = 0, load_at_begin_ = 0;
  bool journaling_ = false;
  size_t size_at_begin_ = 0, alive_at_begin_ = 0;
  std::vector<std::pair<size_t, device>> journal_;
};

// A whole packing of `ss` that can take sessions out and put them back in.
namespace detail {
struct id_pool;  // the device ids a packing has given (packing.cpp)
}  // namespace detail

class squishy_packing {
 public:
  squishy_packing(const std::vector<session>& ss, const device_caps& caps, const batch_tables& tables)
      : ss_(ss), tables_(tables), shared_(ss, caps) {}

  // Algorithm 3.1: saturate, then residuals best-fit decreasing by occupancy, then drain the
  // least-used devices into the others. With `previous` (matched by model and SLO), keeps
  // dedicated devices and as much of each shared device as still fits, with their ids.
  plan make(const plan* previous = nullptr, const std::vector<session>* previous_sessions = nullptr);

  // After make(): session i's rate or SLO is about to change (remove), or has (add). Sessions
  // may be appended to `ss` between them.
  void remove(size_t i);
  void add(size_t i);
  void begin();
  void rollback();
  void commit();
  size_t devices() const { return dedicated_ + shared_.alive(); }
  const shared_devices& shared() const { return shared_; }
  // Devices as fractions: whole dedicated ones and the occupancy of the shared ones.
  double load() const { return static_cast<double>(dedicated_) + shared_.load(); }
  size_t infeasible() const { return infeasible_; }

 private:
  // Places r on the best device or one of its own; false when it fits nowhere.
  bool place(const residual& r);
  // From `previous`: its dedicated devices that still have their session (into `out`, taking one
  // of each session's `dedicated_needed`), and its shared devices with as many of their sessions
  // as still fit, evicting the cheapest first (`placed`). `was`: each session's device before.
  void keep_previous(const plan& previous, const std::vector<session>* previous_sessions, plan& out,
                     detail::id_pool& ids, std::vector<int>& dedicated_needed, std::vector<int>& was,
                     std::vector<bool>& placed);
  void drain(bool replan);
  // Moves device k's residuals to the others; false (and nothing moved) when one fits nowhere.
  bool empty_into_others(size_t k);

  const std::vector<session>& ss_;
  const batch_tables& tables_;
  shared_devices shared_;
  std::vector<session_load> loads_;
  std::vector<int> at_;  // per session, the shared device of its residual; -1 none
  size_t dedicated_ = 0, infeasible_ = 0;
  struct saved {
    size_t session;
    session_load load;
    int at;
  };
  std::vector<saved> saved_;
  size_t dedicated_at_begin_ = 0, infeasible_at_begin_ = 0, sessions_at_begin_ = 0;
};

}  // namespace sloserve::sched
