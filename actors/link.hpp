#pragma once
// How actors reach other nodes and clients. The ZeroMQ link serializes to peers and short-cuts
// the node itself with plain CAF messages; tests use an in-process link between many "nodes".

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "actors/intake_gate.hpp"
#include "actors/interfaces.hpp"
#include "actors/metrics.hpp"
#include "config/live_apply.hpp"
#include "messages/types.hpp"

namespace sloserve {

namespace tracing {
class tracer;
}

// Request payload bytes a node holds (frontend queries in flight, device queues), kept under
// runtime.max_queued_mb so that a burst is answered OVERLOADED instead of growing memory
// without bound. Shared by all actors of a node; thread-safe.
class payload_budget {
 public:
  // Charges `bytes` unless that would pass `limit`; false charges nothing.
  bool try_charge(int64_t bytes, int64_t limit) {
    auto now = used_.load(std::memory_order_relaxed);
    do {
      if (now + bytes > limit) return false;
    } while (!used_.compare_exchange_weak(now, now + bytes, std::memory_order_relaxed));
    return true;
  }
  void release(int64_t bytes) { used_.fetch_sub(bytes, std::memory_order_relaxed); }
  int64_t used() const { return used_.load(std::memory_order_relaxed); }

 private:
  std::atomic<int64_t> used_{0};
};

int64_t payload_bytes(const std::vector<tensor>& ts);

class link {
 public:
  payload_budget queued;
  intake_gate intake;    // client requests handed to the frontend, not yet taken in
  node_metrics metrics;  // what the node's /metrics shows
  // The configuration the node runs and its revision (`sloserve apply` swaps it); null where a
  // test's actors run without one.
  std::shared_ptr<config_source> config;
  // Triton's trace extension: which requests the frontend traces, and where (ingress/
  // trace_settings.hpp); null: none.
  std::shared_ptr<tracing::tracer> tracer;

  virtual ~link() = default;
  virtual const std::string& self_name() const = 0;
  virtual const local_actors& local() const = 0;
  // Sends to the named node (this node included); `e.from` is filled in.
  virtual void to_node(const std::string& node, msg::envelope e) = 0;
  // Answers a client (a client_reply or status_reply).
  virtual void to_client(const std::string& client, msg::body b) = 0;
  // The node's steady clock (ns since its epoch), which actors' clocks run on; 0 where actors run
  // on a clock of their own (tests' deterministic scheduler).
  virtual int64_t now_ns() const { return std::chrono::steady_clock::now().time_since_epoch().count(); }
};

// Delivers `e` to the local actor that handles its kind. Returns false when this node has no
// actor for it (then a client request is answered with an ERROR through `l`).
bool dispatch(link& l, msg::envelope&& e, const std::string& client_identity);

// Runs the configuration of `u` on this node from now on: parsed as its file, checked against what
// the node runs (live_refusals), merged (merge_live) and handed to the node's frontend, worker and
// monitor. Nothing happens when the node runs that revision already; an error when it is refused.
// The controller hears what came of it (a ConfigAck): from here, or from the node's worker once
// its devices have loaded the models whose files changed.
status apply_config_update(link& l, const msg::config_update& u);
// Tells the controller what this node made of configuration `revision` (no problems: all of it).
void acknowledge_config(link& l, uint64_t revision, std::vector<std::string> problems);

}  // namespace sloserve
