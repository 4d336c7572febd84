#pragma once
// A device actor's state, and the parts of it split across units: device.cpp runs the sessions'
// batches; device_schedule.cpp takes schedules (loading their models, cold starts) and reports
// the models' memory. CAF-bound; only the device's own units include it.

#include <spdlog/spdlog.h>

#include <algorithm>
#include <deque>
#include <map>
#include <optional>
#include <unordered_map>

#include "actors/device_sessions.hpp"
#include "actors/roles.hpp"
#include "gpu/executor.hpp"

namespace sloserve::device_impl {

using clock_time = caf::actor_clock::time_point;
using std::chrono::nanoseconds;

struct device_state {
  static inline const char* name = "device";

  std::shared_ptr<const cluster_config> cfg;
  std::shared_ptr<link> net;
  uint32_t index = 0;
  std::unique_ptr<device_executor> executor;
  int threads = 1;     // intra-op threads the executor runs with
  std::string broken;  // why this device's executor could not be made; it then serves nothing
  std::map<std::string, std::string> load_failures;  // models the last schedule asked for that would not load, and why
  std::vector<std::string> last_models;              // the last schedule's, sorted; cleared by an apply
  // Models whose new file (an apply) would not load: the file the executor still runs. The
  // configuration names the new one from then on, so a later apply's word names the right file.
  std::map<std::string, std::string> kept_files;
  std::unique_ptr<sched::drop_policy> policy;
  device_sessions sessions;
  size_t next = 0;  // round-robin cursor
  // Per model, the highest priority of the pipelines that run it, for the configuration read.
  std::unordered_map<std::string, int> model_priority;
  const cluster_config* priorities_for = nullptr;
  std::vector<int> session_priority;  // per session, for turn_order
  std::vector<size_t> order;

  // Batches started and not yet answered, oldest first. One at a time, except on pipelined
  // executors (depth() > 1): there the next full batch is staged (stacked and uploaded) while
  // the one before computes.
  struct batch_run {
    uint64_t token = 0;
    clock_time started;
    clock_time expected_done;  // started (or the previous batch's end) + l(b)
    // Each request with the model it runs (one model, or a prefix family).
    std::vector<std::pair<const model_spec*, sched::session_queue<pending>::entry>> entries;
    std::optional<batch_outcome> outcome;  // known at start, except on pipelined executors
  };
  std::deque<batch_run> runs;
  clock_time last_done{};  // when the latest batch finished
  uint64_t token = 0;
  std::optional<clock_time> wake_at;  // a session collecting its batch looks again then (token 0)

  // An emulated cold start: the latest schedule waits, with the replies owed, until the models
  // it brings are loaded; the old sessions serve meanwhile.
  std::optional<msg::device_schedule> loading;
  std::vector<caf::typed_response_promise<std::vector<msg::unloaded_model>>> owed;
  model_loads loads;
  uint64_t schedule_seq = 0;  // schedules received; a timer for an older one does nothing

  bool is_running(const model_spec* m) const {
    return std::any_of(runs.begin(), runs.end(), [&](auto& r) {
      return std::any_of(r.entries.begin(), r.entries.end(), [&](auto& e) { return e.first->name == m->name; });
    });
  }
};

using self_ptr = device_actor::stateful_pointer<device_state>;

// The device's name in metrics: NODE/INDEX.
std::string metric_name(const device_state& st);
// Starts what can start now (device.cpp).
void run_next(self_ptr self);

// Schedules (device_schedule.cpp): the memory of the models it serves, reported; a schedule run
// now (its models loaded; those that would not load left out); how long one must wait for its
// models' emulated cold start; and a schedule run with every schedule that waited for it
// answered with what would not load.
void report_memory(self_ptr self);
void on_schedule(self_ptr self, msg::device_schedule& ds);
nanoseconds cold_start(self_ptr self, const msg::device_schedule& ds);
std::vector<msg::unloaded_model> apply_schedule(self_ptr self, msg::device_schedule& ds);
// An apply (device_schedule.cpp): each model it holds whose file changed loads the new one in
// place; what would not load keeps the file it ran, and the answer says so.
std::vector<std::string> reload_files(self_ptr self, new_config& c);

}  // namespace sloserve::device_impl
