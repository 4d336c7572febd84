#pragma once
// The controller's view of its workers: which are up, which run (have acknowledged) which
// schedule epoch, which restarted, and which are draining after asking to leave. Pure: the
// controller actor feeds it registrations and lost heartbeats and acts on what changed.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace sloserve {

class worker_registry {
 public:
  // `epoch_base`: the first schedule epoch of this controller; a worker that acknowledges none
  // after it has not heard from this controller yet and does not serve.
  explicit worker_registry(uint64_t epoch_base = 0) : epoch_base_(epoch_base) {}

  // What a registration changed.
  struct joined {
    bool fresh = false;      // first registration of this worker
    bool restarted = false;  // a new incarnation of a known worker
    bool came_back = false;  // it was down (or leaving) and is up again
    bool changed = false;    // whether it serves, or the epoch it runs, changed
  };
  // A worker registers: it started as `incarnation` and runs schedule epoch `acked`.
  joined on_register(const std::string& node, uint64_t incarnation, uint64_t acked);

  // What a departure changed.
  struct left {
    bool was_up = false;            // it was up: plan without it
    bool was_serving = false;       // it took traffic: routing changes
    bool stopped_draining = false;  // a draining worker is gone: it no longer stands in
  };
  // The worker asked to leave: it is planned without from now on, while it still serves what it
  // holds until its replacements have loaded.
  left on_leave(const std::string& node);
  // Its heartbeats stopped.
  left on_lost(const std::string& node);

  bool known(const std::string& node) const { return workers_.count(node) > 0; }
  bool up(const std::string& node) const;
  // Up, and runs a schedule of this controller.
  bool serving(const std::string& node) const;
  // Serving, or draining while it still runs a schedule of this controller: its instances may
  // stand in for models that have no ready instance elsewhere.
  bool standing_in(const std::string& node) const;
  // The schedule epoch the worker runs (0 when unknown).
  uint64_t acked(const std::string& node) const;
  std::vector<std::string> up_workers() const;
  size_t serving_count() const;

  // A model a worker's device could not load (the worker says so with each registration).
  struct unloaded_model {
    uint32_t device = 0;
    std::string model, reason;
    bool operator==(const unloaded_model&) const = default;
  };
  // What the worker's devices could not load of the schedule it runs now; returns those not
  // reported before. Each is also remembered (`unloadable`) until the worker restarts or
  // `forget_unloadable`: a model planned off a worker is no longer in its schedule to fail again.
  std::vector<unloaded_model> set_unloaded(const std::string& node, std::vector<unloaded_model> now);
  // Whether instance (node, device) of `model` could not load it.
  bool unloaded(const std::string& node, uint32_t device, const std::string& model) const;
  const std::vector<unloaded_model>& unloaded_of(const std::string& node) const;
  // Per worker, the models one of its devices could not load since it started: planned elsewhere.
  std::map<std::string, std::vector<std::string>> unloadable() const;
  // An apply: its files may load now.
  void forget_unloadable();

 private:
  struct worker {
    uint64_t incarnation = 0;
    uint64_t acked = 0;
    bool up = true;
    bool draining = false;
    std::vector<unloaded_model> unloaded;  // now
    std::vector<std::string> unloadable;   // since it started
  };
  bool serving(const worker& w) const { return w.up && w.acked > epoch_base_; }
  const worker* find(const std::string& node) const;

  uint64_t epoch_base_ = 0;
  std::map<std::string, worker> workers_;
};

}  // namespace sloserve
