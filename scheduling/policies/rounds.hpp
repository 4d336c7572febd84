#pragma once
// A policy's own placement loop in the controller, in place of epochs (scheduling_policy::rounds):
// every interval, and when a frontend says a client's uplink moved, the controller hands it the
// clients the frontends reported and the device slots of the workers up, and adopts the placement
// it returns.

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "messages/types.hpp"
#include "scheduling/placement.hpp"

namespace sloserve::sched {

class client_rounds {
 public:
  virtual ~client_rounds() = default;

  // How often the controller runs a round unasked.
  virtual std::chrono::microseconds interval() const = 0;
  // One round: the placement of `epoch` on `slots` (the workers up) with `models` (the file's, with
  // the profiles workers measured).
  virtual cluster_placement decide(const std::vector<msg::client_load>& clients, const std::vector<device_slot>& slots,
                                   const std::vector<model_spec>& models, uint64_t epoch) = 0;
  // What the rounds since the last call changed that is worth a line in the log; empty if nothing.
  virtual std::string news() = 0;
};

}  // namespace sloserve::sched
