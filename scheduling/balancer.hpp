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
  bool busy() const { return spill_at > 0 && outstanding >= spill_at; }
};

// One frontend's share of a backend's spill point (outstanding invocations at which it is busy)
// when `frontends` send to it; 0 (never busy) stays 0.
uint32_t spill_threshold(uint32_t spill_at, uint32_t frontends);

class balancer {
 public:
  virtual ~balancer() = default;
  virtual std::string_view name() const = 0;
  // Index of the chosen live backend that is no spare; nullopt when none is live.
  virtual std::optional<size_t> pick(const std::vector<backend_load>& backends, std::mt19937_64& rng) const = 0;
  // What requests use: pick, unless the backend picked is busy and a live spare is not (then the
  // spare with the most room), or no planned backend is live (then the least busy live spare).
  std::optional<size_t> route(const std::vector<backend_load>& backends, std::mt19937_64& rng) const;
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

// Fill in order (Piccolo's throughput-cost dispatch): the first live planned backend in table
// order (the table lists a model's instances most cost-efficient first) that is not busy, so that
// cheaper machines fill with whole batches before dearer ones take any; when all are busy, the
// one with the most room for its spill point. Backends with no spill point are never busy: the
// first of them takes what the ones before it leave.
class fill_balancer final : public balancer {
 public:
  std::string_view name() const override { return "fill"; }
  std::optional<size_t> pick(const std::vector<backend_load>&, std::mt19937_64&) const override;
};

// The balancer of runtime.balancer.
std::unique_ptr<balancer> make_balancer(balancer_kind kind);

}  // namespace sloserve::sched
