#pragma once
// Every typed actor interface of sloserve, in one place (CAF 0.17 syntax). A reader learns the
// whole message vocabulary of a node from this file.

#include <caf/all.hpp>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "control/scaler_core.hpp"
#include "messages/types.hpp"
#include "scheduling/pipeline_load.hpp"
#include "scheduling/placement.hpp"

namespace sloserve {

using start_atom = caf::atom_constant<caf::atom("start")>;
using tick_atom = caf::atom_constant<caf::atom("tick")>;
using beacon_atom = caf::atom_constant<caf::atom("beacon")>;
using peer_up_atom = caf::atom_constant<caf::atom("peer_up")>;
using peer_down_atom = caf::atom_constant<caf::atom("peer_down")>;
using batch_done_atom = caf::atom_constant<caf::atom("batch_done")>;
using stats_atom = caf::atom_constant<caf::atom("stats")>;
using leave_atom = caf::atom_constant<caf::atom("leave")>;
using loaded_atom = caf::atom_constant<caf::atom("loaded")>;
using rates_atom = caf::atom_constant<caf::atom("rates")>;
using clients_atom = caf::atom_constant<caf::atom("clients")>;
using round_atom = caf::atom_constant<caf::atom("round")>;
using pad_atom = caf::atom_constant<caf::atom("pad")>;
using applied_atom = caf::atom_constant<caf::atom("applied")>;

// Where the frontend hands a reply for a client that is not a ZeroMQ peer (the HTTP ingress):
// called exactly once, on the frontend's thread.
using reply_sink = std::function<void(msg::client_reply)>;
using status_sink = std::function<void(msg::status_reply)>;

// A client request as the frontend receives it: who to answer, and what was asked.
struct ingress {
  std::string client;  // ZeroMQ routing identity of the client (or a name for the log)
  msg::client_request request;
  std::shared_ptr<const reply_sink> sink{};  // set: the reply goes here, not over ZeroMQ
};

struct status_query {
  std::string client;
  msg::status_request request;
  std::string pipeline{};                     // set: whether this pipeline can be served; empty: all
  std::shared_ptr<const status_sink> sink{};  // set: the reply goes here, not over ZeroMQ
};

// The configuration a node runs from now on (`sloserve apply`): swapped whole; what was admitted
// under the one before finishes under it (every configuration a node ran stays alive).
struct new_config {
  std::shared_ptr<const cluster_config> cfg;
  uint64_t revision = 0;  // the apply's (ConfigUpdate): a worker acknowledges it to the controller
};
// An operator's call on the controller (`sloserve apply`), with who to answer.
struct admin_call {
  std::string client;  // ZeroMQ routing identity of the caller
  msg::apply_request request;
};
// Per-session counters of one device since its last report.
struct device_load {
  std::vector<msg::session_load> sessions;
};

// What a frontend has done since it started.
struct frontend_stats {
  uint64_t received = 0;
  uint64_t ok = 0;
  uint64_t dropped = 0;
  uint64_t errors = 0;
  uint64_t overloaded = 0;
  uint64_t rerouted = 0;
  uint64_t in_flight = 0;
};

// The monitor's verdict on the links to workers: workers whose invocations spend too long on
// the way (planned without), and per worker the models whose requests would take too long to
// cross its link (planned elsewhere).
struct link_verdicts {
  std::vector<std::string> slow;
  std::map<std::string, std::vector<std::string>> far;
  bool operator==(const link_verdicts&) const = default;
};

// The monitor's online profile refresh: models whose batches have run off their profile for a
// while, each with the factor its profile now runs at (sched::profile_drift).
struct profile_scales {
  std::vector<std::pair<std::string, double>> scales;
};

// Client ingress and per-query DAG orchestration.
using frontend_actor =
    caf::typed_actor<caf::reacts_to<start_atom>,              // wiring done: start timers
                     caf::reacts_to<ingress>,                 // a client's request: walk its DAG
                     caf::reacts_to<status_query>,            // a client asks whether we can serve
                     caf::reacts_to<msg::invocation_result>,  // a stage finished on a worker
                     caf::reacts_to<msg::invocation>,         // another frontend's, for a model this one dispatches
                     caf::reacts_to<msg::routing_table>,      // new instances and stage budgets
                     caf::reacts_to<msg::load_report>,        // another frontend's: its tenants' rates
                     caf::reacts_to<peer_down_atom, std::string>,         // a node stopped heartbeating
                     caf::reacts_to<peer_up_atom, std::string>,           // a node heartbeats again
                     caf::reacts_to<tick_atom>,                           // answer queries past deadline+grace
                     caf::reacts_to<pad_atom, std::string>,               // a model's batch is due full
                     caf::reacts_to<beacon_atom>,                         // register with the controller
                     caf::reacts_to<new_config>,                          // an apply: pipelines and models now
                     caf::replies_to<stats_atom>::with<frontend_stats>>;  // counters so far

// One device: deadline-ordered session queues, early drop, round-robin batches.
using device_actor = caf::typed_actor<caf::reacts_to<msg::invocation>,  // queue a request for a session
                                      caf::replies_to<msg::device_schedule>::with<
                                          std::vector<msg::unloaded_model>>,  // run these
                                                                              // sessions; once loaded: what would not
                                      caf::reacts_to<loaded_atom, uint64_t>,  // an emulated cold start is over
                                      caf::reacts_to<msg::resize>,            // intra-op threads for next batches
                                      caf::reacts_to<batch_done_atom, uint64_t>,  // the running batch finished
                                      // an apply: the models it may run now; the reply: what it could not load
                                      caf::replies_to<new_config>::with<std::vector<std::string>>,
                                      caf::replies_to<stats_atom>::with<device_load>>;  // counters since the last ask

// A worker node: owns its devices (invocations reach them directly), applies schedules, resizes
// devices, registers with the controller and reports load.
using worker_actor = caf::typed_actor<caf::reacts_to<start_atom>,     // wiring done: register, start beacons
                                      caf::reacts_to<leave_atom>,     // shutting down: ask to leave routing
                                      caf::reacts_to<msg::schedule>,  // apply the controller's schedule
                                      caf::reacts_to<msg::resize>,    // resize one device's threads
                                      caf::reacts_to<beacon_atom>,    // re-register and send a load report
                                      caf::reacts_to<new_config>,     // an apply: its devices' models now
                                      caf::reacts_to<peer_up_atom, std::string>,  // the controller may be back
                                      caf::reacts_to<peer_down_atom, std::string>>;

// The one place measurements land: per-session rates, latencies and drops from workers' load
// reports, and per-pipeline rates from frontends'. The controller and the scaler read it.
using monitor_actor =
    caf::typed_actor<caf::reacts_to<msg::load_report>,                          // fold a node's report in
                     caf::replies_to<rates_atom>::with<sched::pipeline_rates>,  // close the window: pipeline rates
                     caf::replies_to<clients_atom>::with<std::vector<msg::client_load>>,  // clients heard lately
                     caf::reacts_to<beacon_atom>,                                         // log a summary line
                     caf::reacts_to<new_config>,                        // an apply: the pipelines it counts now
                     caf::replies_to<stats_atom>::with<cluster_load>>;  // the current view

// Registration, placement, routing tables and schedules.
using controller_actor =
    caf::typed_actor<caf::reacts_to<start_atom>,
                     caf::reacts_to<msg::register_node>,           // a node (re)announces itself
                     caf::reacts_to<admin_call>,                   // an operator applies a new cluster file
                     caf::reacts_to<msg::config_ack>,              // what a node made of an apply
                     caf::reacts_to<applied_atom, uint64_t>,       // an apply's wait for nodes is over
                     caf::reacts_to<deployment>,                   // the scaler's placement
                     caf::reacts_to<beacon_atom>,                  // run an epoch when one is due
                     caf::reacts_to<tick_atom>,                    // a policy's rounds: run one
                     caf::reacts_to<clients_atom>,                 // a policy's rounds: a client's uplink moved much
                     caf::reacts_to<round_atom>,                   // a policy's rounds: a move deferred to now
                     caf::reacts_to<peer_down_atom, std::string>,  // take its instances out of routing
                     caf::reacts_to<peer_up_atom, std::string>,
                     caf::reacts_to<link_verdicts>,    // workers behind slow links, models too far for links
                     caf::reacts_to<profile_scales>>;  // models that run off their profile: planned as measured

// Autoscaling (scaler: in the cluster file): a vertical loop and a horizontal loop over the
// monitor's per-second rates, acting through a provisioner.
using scaler_actor = caf::typed_actor<caf::reacts_to<start_atom>,      // wiring done: place and start loops
                                      caf::reacts_to<tick_atom>,       // one vertical period has passed
                                      caf::reacts_to<worker_set>,      // workers up now
                                      caf::reacts_to<profile_scales>,  // models that run off their profile
                                      caf::reacts_to<new_config>,      // an apply's scaler: knobs
                                      caf::replies_to<stats_atom>::with<scaler_stats>>;  // cost so far

// One scheduler epoch to plan: the input (rates set, slots of the workers up) and the models it
// points into, kept alive with it; the plan before it, for an incremental placement.
struct planned_epoch;
struct plan_request {
  sched::epoch_input input;
  std::vector<double> planning;  // queries/s per pipeline the rates came from (before headroom)
  std::vector<double> running;   // queries/s per pipeline as measured now (smoothed, not the peak)
  bool capacity = false;         // no load to plan for: plan for what the devices can hold
  std::shared_ptr<const std::vector<model_spec>> models;
  std::shared_ptr<const planned_epoch> previous;
};
// The plan for one request, with what its sessions point into.
struct planned_epoch {
  sched::planned_load planned;  // the request's rates, and what the plan carries
  std::vector<double> running;  // the request's: queries/s per pipeline as measured then
  bool capacity = false;        // the request's: planned for what the devices hold
  sched::epoch_input input;     // its rates are those planned for (scaled to the cluster)
  sched::epoch_result result;
  double scale = 1;
  std::vector<std::string> degraded;  // stages on less accurate variants for memory (sched::scaled_epoch)
  bool variants_fit = true;
  std::string error;  // non-empty: no plan
  std::shared_ptr<const std::vector<model_spec>> models;
  std::shared_ptr<const planned_epoch> previous;  // what `result` was placed against; released on apply
};

// Plans scheduler epochs off the controller's thread (detached: planning a large fleet takes
// seconds, and routing, heartbeats and registrations must not wait for it).
using planner_actor = caf::typed_actor<caf::replies_to<plan_request>::with<planned_epoch>>;

// Heartbeats to and from every peer; marks peers up and down.
using node_agent_actor = caf::typed_actor<caf::reacts_to<start_atom>,
                                          caf::reacts_to<msg::heartbeat>,  // a peer is alive
                                          caf::reacts_to<tick_atom>>;      // send ours, time out silent peers

// The actors of one node; roles a node lacks stay invalid handles.
struct local_actors {
  frontend_actor frontend;
  worker_actor worker;
  controller_actor controller;
  monitor_actor monitor;
  scaler_actor scaler;
  node_agent_actor agent;
  std::vector<device_actor> devices;  // a worker's, by index: invocations go straight to them
};

}  // namespace sloserve

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(sloserve::ingress)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(sloserve::new_config)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(sloserve::admin_call)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(sloserve::status_query)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(sloserve::device_load)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(sloserve::frontend_stats)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(sloserve::link_verdicts)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(sloserve::profile_scales)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(sloserve::cluster_load)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(sloserve::sched::pipeline_rates)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(sloserve::deployment)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(sloserve::worker_set)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(sloserve::plan_request)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(std::vector<sloserve::msg::client_load>)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(std::vector<sloserve::msg::unloaded_model>)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(sloserve::planned_epoch)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(sloserve::scaler_stats)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(sloserve::msg::invocation)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(sloserve::msg::invocation_result)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(sloserve::msg::routing_table)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(sloserve::msg::schedule)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(sloserve::msg::device_schedule)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(sloserve::msg::resize)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(sloserve::msg::register_node)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(sloserve::msg::heartbeat)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(sloserve::msg::load_report)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(sloserve::msg::config_ack)
