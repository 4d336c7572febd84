#pragma once
// Turns a placement into the routing table frontends may use now. An instance enters routing
// only once its worker acknowledges the schedule that brought the model there (the worker does
// so after the model is loaded). A model the placement runs, none of whose instances is ready,
// keeps the instances of the last published table, on workers that still serve or drain. A pipeline that switches a
// stage to another variant keeps the variants and budgets of the last published table until the
// new ones can take traffic; a client mapped to an instance that cannot yet stays on the one it was
// published with while that device still holds its model. An instance whose device could not
// load its model is not routed; the table lists it, so that a frontend can say why. Pure: the controller actor
// sends what it returns.

#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "actors/worker_registry.hpp"
#include "messages/types.hpp"
#include "scheduling/placement.hpp"

namespace sloserve {

class route_publisher {
 public:
  // Records, for every instance `p` runs, the schedule epoch that brought it (kept while later
  // placements keep running it).
  void adopt(const cluster_placement& p);

  // Whether instance (node, device) of `model` may take traffic.
  bool live(const worker_registry& w, const std::string& model, const msg::route_instance& i) const;

  // `p`'s table as epoch `epoch`, with what cannot serve yet taken out (see above).
  msg::routing_table live_table(const cluster_placement& p, const worker_registry& w, uint64_t epoch) const;

  // live_table, remembered as the last table sent to frontends.
  const msg::routing_table& publish(const cluster_placement& p, const worker_registry& w, uint64_t epoch);
  const msg::routing_table& published() const { return published_; }

  // Every instance of `p` that is live: what the scaler may count as serving.
  std::vector<instance_key> acknowledged(const cluster_placement& p, const worker_registry& w) const;

 private:
  void hold_switches(msg::routing_table& t, const worker_registry& w) const;
  void hold_clients(msg::routing_table& t, const worker_registry& w) const;

  std::map<instance_key, uint64_t> since_;
  msg::routing_table published_;
};

}  // namespace sloserve
