#pragma once
// The sessions of one device: one deadline-ordered queue per model it runs, with the counters its
// load reports carry. A new schedule adds sessions and marks the ones it drops as draining: they
// still serve (frontends may route here until their new table arrives) and go once idle for long
// enough. CAF-free; the device actor owns one.

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <vector>

#include "config/cluster_config.hpp"
#include "messages/types.hpp"
#include "scheduling/session_queue.hpp"

namespace sloserve {

using device_clock = std::chrono::steady_clock;

struct pending {
  msg::invocation inv;
  device_clock::time_point enqueued;
  int64_t bytes = 0;  // charged to the node's payload budget while queued
};

struct session {
  const model_spec* model = nullptr;
  int batch = 1;
  int collect = 0;           // queued before a batch starts, unless the oldest can wait no longer
  double collect_ms = 0;     // a batch's fill time at the planned rate: bounds the wait
  double latency_scale = 1;  // the model runs at its profile x this (the schedule's refresh)
  bool draining = false;     // no longer scheduled here (see above)
  device_clock::time_point last_arrival;
  sched::session_queue<pending> queue;
  msg::session_load load;  // counters since the last report
  double latency_sum_ms = 0;
  double budget_sum_ms = 0;
  sched::budget_sample budgets;  // on arrival, for Sponge
};

class device_sessions {
 public:
  device_sessions() = default;
  device_sessions(const cluster_config& cfg, uint32_t device) : cfg_(&cfg), device_(device) {}

  // An apply: models of `cfg` from now on. Sessions of models it keeps (by name) point at its
  // specs; those of models it drops keep theirs (the process keeps every configuration) and drain.
  void rebind(const cluster_config& cfg);
  // Runs the sessions of `ds` (models of the config, matched by name; batches clamped to each
  // model's limit) and marks the others draining from `now`.
  void apply(const msg::device_schedule& ds, device_clock::time_point now);
  // Removes draining sessions that are empty, not `running`, and idle for longer than `idle`.
  void prune(device_clock::time_point now, std::chrono::nanoseconds idle,
             const std::function<bool(const model_spec*)>& running);
  // The session of `model`; null when it runs none here.
  session* find(const std::string& model);
  // Every session's counters since the last call, which start again from zero, and its queue's
  // budgets at `now`.
  std::vector<msg::session_load> take_load(device_clock::time_point now);

  std::vector<session>& all() { return sessions_; }

 private:
  const cluster_config* cfg_ = nullptr;
  uint32_t device_ = 0;
  std::vector<session> sessions_;
};

// A device's emulated cold starts: when each model it is loading will be ready.
class model_loads {
 public:
  struct load {
    const model_spec* model = nullptr;
    double delay_ms = 0;  // the executor's load delay
  };
  // How long from `now` until every model of `needed` (those the device holds no session of) is
  // loaded. A model not loading yet starts now (and is added to `started`); loads no longer
  // needed are abandoned; one already under way goes on.
  std::chrono::nanoseconds wait(const std::vector<load>& needed, device_clock::time_point now,
                                std::vector<load>& started);
  void clear() { ready_at_.clear(); }

 private:
  std::map<const model_spec*, device_clock::time_point> ready_at_;
};

}  // namespace sloserve
