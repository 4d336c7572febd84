#pragma once
// The controller's Jellyfish policy (`scheduler.policy: jellyfish`), apart from any actor. Every
// interval it takes the clients the frontends report, gives each pipeline device slots in
// proportion to its clients' frame rates (one at least), runs Jellyfish's re-schedule per pipeline
// (scheduling/policies/jellyfish/plan.hpp: one variant per device, clients mapped to devices), and turns it
// into a placement: each device runs its selected variant at the batch its clients allow, and
// keeps loaded beside it (`resident`, within the slot's memory) its neighbours in size
// (prefetched, as Jellyfish does) and the variants it ran most recently, so that most switches
// find their variant loaded; the table routes each client to its device with the image
// size to tell it. Requests of clients without a route go to the fastest variant running.

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "config/cluster_config.hpp"
#include "messages/types.hpp"
#include "scheduling/placement.hpp"
#include "scheduling/policies/jellyfish/plan.hpp"
#include "scheduling/policies/rounds.hpp"

namespace sloserve::sched::jellyfish {

class rounds final : public client_rounds {
 public:
  explicit rounds(const cluster_config& cfg) : cfg_(cfg) {}

  // scheduler.jellyfish.interval_ms.
  std::chrono::microseconds interval() const override;

  // One re-schedule on the device slots of the workers up (`slots`) with `models` (the file's,
  // with measured profiles). Devices of workers not up are listed with no sessions.
  cluster_placement decide(const std::vector<msg::client_load>& clients, const std::vector<device_slot>& slots,
                           const std::vector<model_spec>& models, uint64_t epoch) override;
  // The clients mapped and the devices that switched variant, when some did since the last call.
  std::string news() override;

  struct stats {
    uint64_t reschedules = 0;
    uint64_t switches = 0;       // devices whose selected variant changed
    uint64_t resident_hits = 0;  // of those, switches to a variant the device still held
    double mapped = 1;           // last re-schedule: fraction of clients mapped within their budgets
    double accuracy = 0;         // and their rate-weighted accuracy (a fraction)
    size_t clients = 0;          // clients it was given
  };
  const stats& counters() const { return stats_; }

 private:
  using slot_key = std::pair<std::string, uint32_t>;
  // Slots per pipeline at these frame rates: a slot keeps the pipeline it served while that
  // pipeline wants as many, the others fill up in order; `taken` marks the slots given.
  std::vector<std::vector<size_t>> assign(const std::vector<double>& rate, const std::vector<device_slot>& slots,
                                          const std::vector<model_spec>& models, std::vector<bool>& taken) const;
  // Device `k` (`slot`) runs zoo[z] at about `batch`, at a batch whose t(b) is `rate` at least,
  // keeping resident what its memory allows, into `d`; counts switches.
  void run_on(const slot_key& k, const device_slot& slot, const std::vector<variant>& zoo, size_t z, int batch,
              double rate, const std::vector<model_spec>& models, msg::device_schedule& d);

  const cluster_config& cfg_;
  std::map<slot_key, std::string> running_;                // selected variant per device
  std::map<slot_key, int> batch_;                          // and the batch it runs at
  std::map<slot_key, std::vector<std::string>> resident_;  // per device, what it keeps loaded
  stats stats_;
  uint64_t told_switches_ = 0;  // switches as of the last news
};

// The zoo of pipeline `p`'s stage: its variants ascending in accuracy (then l(1)), each with
// the image size it takes (its input's last two dimensions).
std::vector<variant> zoo_of(const pipeline& p, const std::vector<model_spec>& models);

}  // namespace sloserve::sched::jellyfish
