#pragma once
// The simulator's engine, shared by its translation units: simulated time, the wire, the
// frontend (sim/frontend.cpp), the devices (sim/devices.cpp) and the control plane
// (sim/control.cpp). Internal to sim/.

#include <algorithm>
#include <cmath>
#include <deque>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <unordered_map>

#include "control/scaler_core.hpp"
#include "loadgen/arrivals.hpp"
#include "pipelines/query_walk.hpp"
#include "scheduling/backfill.hpp"
#include "scheduling/balancer.hpp"
#include "scheduling/drop_policy.hpp"
#include "scheduling/epoch.hpp"
#include "scheduling/frontend_admission.hpp"
#include "scheduling/pipeline_load.hpp"
#include "scheduling/placement.hpp"
#include "scheduling/policies/registry.hpp"
#include "scheduling/profile_drift.hpp"
#include "scheduling/session_queue.hpp"
#include "sim/simulator.hpp"

namespace sloserve::sim::detail {

using ns = int64_t;
constexpr ns ns_per_ms = 1'000'000;
constexpr uint32_t none = UINT32_MAX;

inline ns to_ns(double ms) {
  return ns_of_ms(ms);
}
inline sched::time_point at(ns t) {
  return sched::time_point(std::chrono::nanoseconds(t));
}

enum class kind : uint8_t {
  send,
  arrival,
  invoke,
  batch_done,
  result,
  beacon,
  scale,
  apply,
  fail,
  back,
  detect,
  expire,
  wake,   // a device whose session collects its batch looks again
  dummy,  // a padded instance's next dummy is due
  pad     // a model's batch in turn is due full
};
struct event {
  ns t;
  uint64_t seq;
  kind what;
  uint32_t a;
  uint64_t b;
};
struct later {
  bool operator()(const event& x, const event& y) const { return x.t != y.t ? x.t > y.t : x.seq > y.seq; }
};

// The pending events, earliest first: a 4-ary heap (half the levels of a binary one, and a
// node's children share a cache line or two), in (time, posting) order.
class event_heap {
 public:
  bool empty() const { return v_.empty(); }
  size_t size() const { return v_.size(); }
  const event& top() const { return v_.front(); }
  void push(const event& e) {
    size_t i = v_.size();
    v_.push_back(e);
    while (i > 0) {
      size_t parent = (i - 1) / 4;
      if (!later{}(v_[parent], e)) break;
      v_[i] = v_[parent];
      i = parent;
    }
    v_[i] = e;
  }
  void pop() {
    event last = v_.back();
    v_.pop_back();
    size_t n = v_.size();
    if (n == 0) return;
    size_t i = 0;
    for (;;) {
      size_t first = 4 * i + 1;
      if (first >= n) break;
      size_t best = first, end = std::min(first + 4, n);
      for (size_t c = first + 1; c < end; ++c)
        if (later{}(v_[best], v_[c])) best = c;
      if (!later{}(last, v_[best])) break;
      v_[i] = v_[best];
      i = best;
    }
    v_[i] = last;
  }

 private:
  std::vector<event> v_;
};

// A query's progress through its DAG: query_walk's rules (pipelines/query_walk.hpp), on counts.
struct walk {
  std::vector<uint32_t> outstanding;
  std::vector<uint8_t> finished, joined, has_output;
  bool done = false;
};

struct query {
  uint32_t pipeline = 0;
  int tenant = -1;        // an index of security.tenants; < 0: none
  bool admitted = false;  // let in by the frontend: its outcome tells the guards
  uint64_t qid = 0;
  ns sent = 0, arrival = 0, deadline = 0;
  bool measured = false, answered = false;
  uint32_t second = 0;
  uint32_t pending = 0;  // invocations not yet answered
  walk w;
  double queue_ms = 0, exec_ms = 0;
  uint32_t first_node = none;
  double accuracy = 1;      // product of accuracy/100 of the models its stages ran
  uint64_t stages_ran = 0;  // bit per stage: counted in `accuracy` already
  uint64_t late_paths = 0;  // bit per leaf stage (of the first 64) that finished after its own SLO
};

struct invocation {
  uint32_t query = 0, stage = 0, model = 0, device = 0;
  ns deadline = 0;         // at the frontend
  ns device_deadline = 0;  // as the device sees it: the budget runs from when it took it in
  ns enqueued = 0;
  bool live = false;
  bool fallback = false;  // a cascade's second model, its first having been unsure
  bool dummy = false;     // Piccolo's padding: runs in its batch, answered to no query
  bool counted = false;   // a dummy in the turn: counted as outstanding at its instance
};

struct dev_session {
  uint32_t model = 0;
  int batch = 1;
  int collect = 0;        // queued before a batch starts, unless the oldest can wait no longer
  double collect_ms = 0;  // a batch's fill time at the planned rate: bounds the wait
  ns last_arrival = 0;
  bool draining = false;
  sched::session_queue<uint32_t> queue;
  uint64_t arrived = 0;   // since the scaler last looked
  double budget_sum = 0;  // of those, ms left to their deadlines on arrival
  sched::budget_sample budgets;
};

struct device {
  uint32_t node = 0, index = 0;
  std::vector<dev_session> sessions;
  size_t next = 0;
  bool busy = false;
  std::vector<uint32_t> running;
  ns started = 0;
  uint64_t generation = 0;  // bumped when the node fails: batches of before are lost
  int threads = 1;          // cores, as the scaler sized the instance
  std::string type;         // its device type: each model runs that type's profile
  double share = 1;         // a fractional instance runs slower by each model's share_slowdown
};

struct node_state {
  std::string name;
  bool up = true;    // running
  bool seen = true;  // as the frontend and the controller see it (heartbeats)
  std::vector<uint32_t> devices;
  std::vector<uint32_t> by_number;  // the index of its device of each number; none where it has no slot
};

struct route {
  std::vector<uint32_t> devices;
  std::vector<sched::backend_load> loads;
  sched::dispatch_state turn;  // batch-by-batch dispatch's place
  double deadline_told = -1;   // the latest padding deadline posted
  ns budget = 0;               // the tightest stage budget that runs the model (its dummies')
};

// A padded instance's dummies (the routing table's dummy rate), evenly spaced.
struct dummy_source {
  uint32_t model = 0, device = 0;
  double rate = 0;
  ns budget = 0;
};

class engine {
 public:
  engine(const cluster_config& cfg, const options& o)
      : cfg_(cfg),
        o_(o),
        rng_(o.seed),
        net_rng_(o.seed * 7 + 1),
        exec_rng_(o.seed * 13 + 3),
        version_rng_(o.seed * 17 + 5),
        policy_(sched::make_drop_policy(cfg.runtime.drop_policy)),
        balancer_(sched::policy_of(cfg.scheduler).dispatcher(cfg.runtime.balancer, cfg.scheduler.section)),
        model_priority_(model_priorities(cfg.pipelines, cfg.models.size())) {}

  expected<result> run();

 private:
  // The parts of run(): the cluster's nodes, devices, pipelines and failures; the first plan,
  // the scaler and the first sends; one event; what the run measured.
  status setup();
  void start();
  void dispatch(const event& e);
  result results(double duration);

  // The wire.
  ns delay(uint32_t from, uint32_t to) {
    if (from == to) return 20'000;  // in-process hand-over
    double f = std::uniform_real_distribution<double>(1 - o_.network_jitter, 1 + o_.network_jitter)(net_rng_);
    return to_ns(o_.network_ms * f);
  }
  // Events run in (time, posting) order. Expiries are due a deadline and a grace ahead, so there are
  // hundreds of thousands in flight at once; they arrive almost in time order and wait in a queue
  // of their own while they do, out of the heap that the near events churn.
  void post(ns t, kind what, uint32_t a = 0, uint64_t b = 0) {
    if (what == kind::expire && (expiries_.empty() || t >= expiries_.back().t))
      expiries_.push_back({t, seq_++, what, a, b});
    else
      events_.push({t, seq_++, what, a, b});
  }
  // The next event to run, taken from the heap or the expiries; false when none is left.
  bool next_event(event& e) {
    bool heap = !events_.empty(), fifo = !expiries_.empty();
    if (!heap && !fifo) return false;
    if (fifo && (!heap || later{}(events_.top(), expiries_.front()))) {
      e = expiries_.front();
      expiries_.pop_front();
    } else {
      e = events_.top();
      events_.pop();
    }
    return true;
  }

  // Frontend.
  void on_send(ns now);
  void on_arrival(ns now, uint32_t q);
  bool spawn(ns now, uint32_t q, uint32_t stage);
  // The model a stage over versions `vs` runs for the next invocation.
  uint32_t routed_version(const std::vector<stage_version>& vs);
  bool fall_through(ns now, uint32_t q, uint32_t stage);
  uint32_t take_invocation();
  bool route_invocation(ns now, uint32_t inv);
  void on_result(ns now, uint32_t inv, msg::status code);
  void finish(ns now, uint32_t q, msg::status code, const std::string& reason);
  void release(uint32_t q);
  void walk_result(uint32_t q, uint32_t stage, std::vector<uint32_t>& spawns);
  void settle(query& qq, std::vector<uint32_t>& spawns);
  void spawn_from(query& qq, uint32_t stage, uint32_t parent, std::vector<uint32_t>& spawns);

  // Devices.
  void on_invoke(ns now, uint32_t inv);
  void start_next(ns now, uint32_t d);
  void on_batch_done(ns now, uint32_t d, uint64_t generation);
  void answer(ns now, uint32_t inv, msg::status code);
  void on_dummy(ns now, uint32_t source, uint64_t generation);
  // Sends a dummy of `model` to `device`; `counted`: it took a place in the turn.
  void send_dummy(ns now, uint32_t model, uint32_t device, ns budget, bool counted);
  // Closes `model`'s batch in turn with the dummies due now (padding_due).
  void pad(ns now, uint32_t model, ns budget);

  // Control plane.
  void on_beacon(ns now);
  void on_scale(ns now);
  void tell_scaler();
  void plan(ns now, bool surge = false, bool immediately = false);
  // Whether scheduler epochs place sessions (not the static placement, nor the scaler).
  bool plans_epochs() const { return scheduling_.plans_epochs() && !cfg_.scaler.enabled(); }
  void adopt(ns now, cluster_placement p, bool immediately, std::vector<instance_assignment> cores = {});
  void on_apply(ns now, uint32_t which);
  template <class Fn>
  void for_each_scheduled(const cluster_placement& p, Fn fn);
  void on_fail(ns now, uint32_t n);
  void on_detect(ns now, uint32_t n);
  void on_back(ns now, uint32_t n);

  const cluster_config& cfg_;
  const sched::scheduling_policy& scheduling_ = sched::policy_of(cfg_.scheduler);
  const options& o_;
  std::mt19937_64 rng_, net_rng_, exec_rng_;
  std::mt19937_64 version_rng_;                 // a versioned stage's draws, apart from the others'
  std::vector<stage_version> routed_versions_;  // routed_version's scratch
  std::unique_ptr<sched::drop_policy> policy_;
  std::unique_ptr<sched::balancer> balancer_;
  std::vector<int> model_priority_;  // per model: devices offer the higher first
  std::vector<int> turn_priority_;   // start_next's, per session of the device
  std::vector<size_t> turn_order_;
  event_heap events_;
  std::deque<event> expiries_;  // in (time, posting) order
  uint64_t seq_ = 0, events_run_ = 0;

  std::unordered_map<std::string, uint32_t> model_id_, node_id_;
  std::vector<node_state> nodes_;
  std::vector<device> devices_;
  // The index of `node`'s device number `d`, or none. Placements list a node's devices together,
  // so the node found last is remembered.
  uint32_t device_at(const std::string& node, uint32_t d) {
    if (node != last_node_) {
      auto n = node_id_.find(node);
      if (n == node_id_.end()) return none;
      last_node_ = node;
      last_node_id_ = n->second;
    }
    auto& by = nodes_[last_node_id_].by_number;
    return d < by.size() ? by[d] : none;
  }
  std::string last_node_;
  uint32_t last_node_id_ = 0;
  uint32_t frontend_ = 0;

  std::vector<route> routes_;                                    // per model
  std::vector<std::unordered_map<uint32_t, size_t>> route_pos_;  // per model: device -> index in its route
  std::vector<std::optional<slo_split>> splits_;                 // per pipeline
  std::vector<std::vector<uint32_t>> stage_model_;               // per pipeline and stage
  std::vector<int64_t> rows_;                                    // per model: rows of its output, for fan-out
  std::vector<double> accuracy_;                                 // per model: accuracy / 100 (1: none declared)
  double accuracy_sum_ = 0;                                      // over measured OK replies
  uint64_t accuracy_n_ = 0;

  std::vector<query> queries_;
  std::vector<uint32_t> free_queries_;
  std::vector<invocation> invocations_;
  std::vector<uint32_t> free_invocations_;
  uint64_t next_qid_ = 1;

  // Load generation.
  std::vector<uint32_t> traffic_;  // pipelines
  std::unique_ptr<arrivals> gaps_;
  ns end_send_ = 0, warmup_ = 0;
  std::vector<lane_tally> lanes_;
  std::vector<result::pipeline_outcome> by_pipeline_;  // measured queries, per pipeline
  std::vector<result::pipeline_outcome> by_tenant_;    // and per tenant (security.tenants' order)
  std::vector<int> tenant_of_;                         // per tenant of the traffic: its index in security.tenants
  std::vector<double> tenant_shares_;
  std::optional<std::discrete_distribution<size_t>> tenant_pick_;

  // What the frontend lets in (the cluster's own admission).
  sched::frontend_admission admission_;

  // Scheduling.
  std::unique_ptr<sched::pipeline_load> load_;
  std::vector<uint64_t> window_queries_;
  std::vector<uint64_t> window_shed_;  // per pipeline: queries the frontend did not let in, other than over a cap
  std::vector<std::vector<uint64_t>> window_stages_;
  std::vector<std::vector<uint64_t>> window_fallthroughs_;  // per pipeline and stage, since the last beacon
  ns last_epoch_ = 0;
  std::shared_ptr<sched::epoch_result> previous_;
  sched::planned_load planned_for_;
  bool planned_ = false;
  cluster_placement placed_;  // the placement adopted last (applied, or loading its models)
  uint64_t epoch_ = 1;
  std::vector<cluster_placement> pending_;
  size_t plans_ = 0, peak_used_ = 0;
  // `scheduler.cost_budget` (MCDNN), kept as the controller keeps it; the variants in force.
  std::optional<sched::budget_account> budget_;
  double budget_price_ = 1;
  std::shared_ptr<const std::vector<pipeline>> running_;
  // Online profile refresh, as the monitor and the controller do it: per model, its batches'
  // time against the profile since the last beacon; the models the planner plans with (each at
  // its adopted scale).
  struct exec_tally {
    double took = 0, said = 0, batches = 0;
  };
  std::optional<sched::profile_drift> drift_;
  std::vector<exec_tally> exec_;
  std::vector<model_spec> models_;
  std::map<std::string, double> scales_;
  std::vector<std::string> refreshes_;
  std::vector<std::vector<uint64_t>> batch_sizes_;  // per model index: batches run, by size
  void refresh_profiles(ns now);

  // Scaling: the cluster's scaler_core over a local provisioner, polled as the actor polls it.
  std::unique_ptr<scaler_core> scaler_;
  ns now_ = 0, last_scale_ = 0;
  std::vector<msg::stage_budget> budgets_;  // the routing table's, for deployments that carry none
  std::set<instance_key> applied_;          // instances of the placement applied last
  std::vector<dummy_source> dummies_;       // the routing table's padding
  uint64_t dummies_sent_ = 0;               // in the measured window, as the cluster's frontends count them
  uint64_t dummy_generation_ = 0;           // a new table's sources replace the old ones' events
  std::vector<ns> wake_at_;                 // per device: its pending wake, 0: none
};

}  // namespace sloserve::sim::detail
