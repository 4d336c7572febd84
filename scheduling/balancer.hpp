#pragma once
// Choosing an instance of a stage's model for one invocation (thesis 002 §3.5.3).

#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <string_view>
#include <vector>

#include "config/knobs.hpp"

namespace sloserve::sched {

struct backend_load {
  uint32_t outstanding = 0;  // invocations sent and not yet answered
  double weight = 1;         // share of the model's traffic the routing table gives it
  bool live = true;
  bool spare = false;     // kept from an earlier plan: serves only what planned backends cannot
  uint32_t spill_at = 0;  // busy from this many outstanding; 0: never
  uint32_t batch = 0;     // whole batches: takes this many in turn (dispatch below); 0: one at a time
  double padding = 0;     // dummy requests/s the table adds to its rate (they go in turn too)
  double duration_s = 0;  // with batch: how long it runs one (0: unknown)
  bool busy() const { return spill_at > 0 && outstanding >= spill_at; }
};

// Where batch-by-batch dispatch stands in one model's table; its owner keeps one per table, and
// carries it to a new table that lists the same backends at the same batches (kept_turn).
struct dispatch_state {
  std::optional<size_t> current;  // the instance taking the current batch
  uint32_t sent = 0;              // of that batch so far
  std::vector<double> due;        // each instance's virtual time: batches taken x batch / rate
  double now = 0;                 // the virtual time of the latest batch begun
  bool lagging = false;           // the latest batch filled while its backend still ran an earlier one
  std::optional<size_t> filled;   // the backend whose batch the latest request filled (judged at the next)
  double clock = -1;              // seconds, set by the owner before each call (< 0: no clock)
  std::vector<double> free_at;    // by the clock: when each backend ends the batches it was given
  double owed = 0;                // dummies the stream owes the open batch (its padding rate x time open)
  double accrued_at = -1;         // by the clock: owed counted up to here
  double opened = -1;             // by the clock: when the current batch took its first request
  double last = -1;               // by the clock: when it took its latest
  uint32_t frontends = 1;         // set by the owner: the stream and each batch are its share of the table's
};

// One frontend's share of a backend's spill point (outstanding invocations at which it is busy)
// when `frontends` send to it; 0 (never busy) stays 0.
uint32_t spill_threshold(uint32_t spill_at, uint32_t frontends);

// Whether some live backend of a model's takes whole batches in turn (its dummies then go with
// the batches: balancer::padding_due).
inline bool takes_whole_batches(const std::vector<backend_load>& loads) {
  for (auto& l : loads)
    if (l.live && l.batch > 0) return true;
  return false;
}

// Whether a new table's loads (`now`) take whole batches in turn as `before` did: the same
// backends (`same(i, j)`: backend i of `now` is backend j of `before`), in order, at the same batches.
template <class Same>
bool kept_turn(const std::vector<backend_load>& now, const std::vector<backend_load>& before, Same same) {
  if (now.size() != before.size()) return false;
  for (size_t i = 0; i < now.size(); ++i)
    if (!same(i, i) || now[i].batch != before[i].batch) return false;
  return true;
}

class balancer {
 public:
  virtual ~balancer() = default;
  virtual std::string_view name() const = 0;
  // Index of the chosen live backend that is no spare; nullopt when none is live.
  virtual std::optional<size_t> pick(const std::vector<backend_load>& backends, std::mt19937_64& rng) const = 0;
  // What requests use: pick, unless the backend picked is busy and a live spare is not (then the
  // spare with the most room), or no planned backend is live (then the least busy live spare).
  std::optional<size_t> route(const std::vector<backend_load>& backends, std::mt19937_64& rng) const;
  // What requests and dummies use where the balancer keeps a place in the table (`state`): by
  // default route().
  virtual std::optional<size_t> dispatch(const std::vector<backend_load>& backends, dispatch_state& state,
                                         std::mt19937_64& rng) const {
    return route(backends, rng);
  }
  // Where a dummy (padding) goes in the turn; nullopt: it is not sent. By default dispatch().
  virtual std::optional<size_t> dispatch_padding(const std::vector<backend_load>& backends, dispatch_state& state,
                                                 std::mt19937_64& rng) const {
    return dispatch(backends, state, rng);
  }
  // Where backends take whole batches in turn, how many dummies close the current batch now
  // (each then placed by dispatch_padding); 0 by default.
  virtual uint32_t padding_due(const std::vector<backend_load>&, dispatch_state&) const { return 0; }
  // By the clock, when the current batch is due full (padding_due then closes it); nullopt when
  // none is filling or there is no clock.
  virtual std::optional<double> padding_deadline(const std::vector<backend_load>&, const dispatch_state&) const {
    return std::nullopt;
  }
};

// Power of two choices: sample two live backends, take the one with less outstanding work per
// unit of weight.
class p2c_balancer final : public balancer {
 public:
  std::string_view name() const override { return "p2c"; }
  std::optional<size_t> pick(const std::vector<backend_load>&, std::mt19937_64&) const override;
};

// Random in proportion to weight.
class weighted_random_balancer final : public balancer {
 public:
  std::string_view name() const override { return "weighted_random"; }
  std::optional<size_t> pick(const std::vector<backend_load>&, std::mt19937_64&) const override;
};

// Piccolo's throughput-cost dispatch. Where the table gives live planned backends a batch
// (dispatch): whole batches in turn, each backend taking `batch` consecutive requests, the next
// backend the one whose batches are least ahead of its planned rate (weight + padding): stride
// scheduling over the table's order (most cost-efficient first), which breaks ties. So a backend
// at rate r and batch b gets a batch every b / r of the stream's time, and a request waits for at
// most its batch to fill (Theorem 1: d + b / w; W below is the stream's planned rate, requests
// and dummies). A backend that was out of the turn rejoins at the current virtual time (no run of
// batches to catch up). A backend with a clock is passed over while it would not be free by the
// time its batch fills (the one free soonest takes it when no backend would be), and one beyond
// its spill point with more than a batch running and the next collecting (load above the plan)
// leaves the request to fill's order.
//
// Dummies make the stream what the plan says, two ways (padding_due), by the owner's clock: while
// a batch is open the stream owes it dummies at the table's dummy rate, and once the requests and
// the dummies owed make the batch, the dummies close it at once (at a request); and a batch that
// is not full b / W after its first request (the requests came slower than planned) is closed
// with dummies then (padding_deadline), not before its backend is free by the clock, and not when
// no request came in the last tenth of that (the stream has paused: its device runs what it has,
// as it would without the dummies). Dummies go in turn as requests do (counted as outstanding, so
// that a backend's count tells whether its previous batch is done), except while the latest batch
// filled before its backend had finished the one before (judged when the next request comes, so
// that replies on their way do not count): then the stream is ahead of the machines, and the
// dummies owed are forgiven (requests fill the batch: each dummy withheld gives the machines 1/W
// of the stream's time back).
//
// Otherwise (pick): fill in order, the first live planned backend in table order that is not
// busy, so that cheaper machines fill before dearer ones take any; when all are busy, the one with
// the most room for its spill point. Backends with no spill point are never busy: the first of
// them takes what the ones before it leave.
class fill_balancer final : public balancer {
 public:
  std::string_view name() const override { return "fill"; }
  std::optional<size_t> pick(const std::vector<backend_load>&, std::mt19937_64&) const override;
  std::optional<size_t> dispatch(const std::vector<backend_load>&, dispatch_state&, std::mt19937_64&) const override;
  std::optional<size_t> dispatch_padding(const std::vector<backend_load>&, dispatch_state&,
                                         std::mt19937_64&) const override;
  uint32_t padding_due(const std::vector<backend_load>&, dispatch_state&) const override;
  std::optional<double> padding_deadline(const std::vector<backend_load>&, const dispatch_state&) const override;

 private:
  std::optional<size_t> place(const std::vector<backend_load>&, dispatch_state&, std::mt19937_64&, bool dummy) const;
};

// The balancer of runtime.balancer.
std::unique_ptr<balancer> make_balancer(balancer_kind kind);

}  // namespace sloserve::sched
