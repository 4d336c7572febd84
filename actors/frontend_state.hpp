#pragma once
// The frontend's state and its request path (actors/frontend_queries.cpp: invocations out, results
// in, replies); actors/frontend.cpp holds admission, reports and the behaviour.

#include <spdlog/spdlog.h>

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <queue>
#include <random>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "actors/client_registry.hpp"
#include "actors/client_time.hpp"
#include "actors/dummy_padding.hpp"
#include "actors/frontend_routes.hpp"
#include "actors/response_cache.hpp"
#include "actors/roles.hpp"
#include "pipelines/query_walk.hpp"
#include "scheduling/policies/registry.hpp"
#include "scheduling/specialization.hpp"
#include "scheduling/transit_guard.hpp"

namespace sloserve::frontend_impl {

using clock_time = caf::actor_clock::time_point;
using std::chrono::nanoseconds;

inline double ms_between(clock_time a, clock_time b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

// What a query whose pipeline an apply reshaped or dropped goes on with: the stage budgets and
// the models its stages ran under when the apply came.
struct held_pipeline {
  slo_split split;
  std::vector<std::string> stage_models;
};

struct query {
  std::string client;
  std::shared_ptr<const reply_sink> sink;  // the HTTP ingress's, or null: over ZeroMQ
  uint64_t request_id = 0;
  size_t pipeline = 0;  // in `cfg`
  // The configuration it runs under: the node's at admission, moved on by an apply that keeps its
  // pipeline's stages; an apply that reshapes or drops them leaves it here, `held`, to finish.
  std::shared_ptr<const cluster_config> cfg;
  std::shared_ptr<const held_pipeline> held;
  const sloserve::pipeline& pipe() const { return cfg->pipelines[pipeline]; }
  clock_time arrival, deadline;
  std::optional<query_walk> walk;
  std::vector<msg::stage_timing> timings;
  std::vector<uint64_t> invocations;       // still in flight
  int64_t bytes = 0;                       // charged to the node's payload budget
  std::optional<msg::client_route> route;  // where the policy maps its client; the reply tells the size
  int start = 0;                           // a partitioned model: the layer the server starts at
  double slo_ms = 0;                       // the SLO it was admitted under (the client's, else the pipeline's)
  std::string named;                    // the id of a client that names itself: its outcome is counted, and its reply
                                        // advises the size of what it is mapped to when the reply goes
  std::vector<std::string> late_paths;  // leaves that finished after their own SLO (stages[].slo_ms)
  uint32_t version = 0;                 // the model version it asks its stages to run; 0: by their weights
  std::optional<cache_key> cached_as;   // its pipeline caches replies: the key its outputs are kept under
  // Traced (Triton's trace extension): when each stage's invocation went out and its result came
  // back, beside `timings`.
  bool traced = false;
  std::vector<std::pair<clock_time, clock_time>> spans;
};

struct in_flight {
  uint64_t query = 0;
  size_t stage = 0;
  uint32_t item = 0;  // the walk's (query_walk::spawn::item)
  std::string model;
  std::string node;
  uint32_t device = 0;
  clock_time deadline;
  clock_time sent;             // when it last went to a device
  std::vector<tensor> inputs;  // kept to re-route when the node fails
  bool checked = false;        // a root's: the inputs were checked at ingress
  bool fallback = false;       // a cascade's second model, its first having been unsure
  // A cascade under `skew` (WEG): the oracle answering alone; after the compact model was unsure;
  // or checking the compact model's own answer (its class kept here).
  enum class skew_role : uint8_t { none, oracle_alone, after_unsure, check } skew = skew_role::none;
  int compact_class = -1;
  std::optional<std::pair<std::string, uint32_t>> at;  // the instance its client is mapped to
  // A fragment route's layer ranges still to run after this one, each with its deadline.
  std::vector<std::string> chain{};
  std::vector<clock_time> chain_deadlines{};
  // Its model caches outputs (models[].response_cache): the key they are kept under; `from_cache`:
  // answered from the cache, never sent.
  std::optional<cache_key> cached_as{};
  bool from_cache = false;
};

struct frontend_state {
  static inline const char* name = "frontend";

  std::shared_ptr<const cluster_config> cfg;
  const sched::scheduling_policy* policy = nullptr;  // scheduler.policy's
  std::shared_ptr<link> net;
  std::optional<frontend_routes> routes;
  std::mt19937_64 rng{42};
  // Per cascade stage under `skew` (pipeline, stage): its Windowed ε-Greedy state.
  std::map<std::pair<size_t, size_t>, sched::weg> skew;

  std::unordered_map<std::string, size_t> pipeline_index;
  client_time client_times;
  client_registry clients;  // clients that name themselves
  clock_time last_client_report;
  double client_report_ms = 0;  // the policy's (scheduling_policy::clients); 0: none
  std::function<int64_t()> wall_us;

  std::unordered_map<uint64_t, query> queries;
  // Outputs of the models and pipelines that cache them (runtime.response_cache_mb), emptied by
  // every configuration it takes.
  response_cache cache;
  bool models_cache = false;  // some model of the configuration keeps its outputs (models[].response_cache)
  std::unordered_map<uint64_t, in_flight> invocations;
  using expiry = std::pair<clock_time, uint64_t>;
  std::priority_queue<expiry, std::vector<expiry>, std::greater<>> expiries;
  uint64_t next_query = 1;
  uint64_t next_invocation = 1;
  frontend_stats stats;
  std::unordered_map<std::string, int> client_in_flight;  // queries in flight per client
  // Per worker: time its results spent outside its queue and device, since the window began
  // (reported at the beacon once it holds `transfer_tally::evidence` results, or is 2 s old).
  struct transfer_tally {
    static constexpr uint64_t evidence = 5;
    double sum_ms = 0;
    uint64_t results = 0;
    clock_time since;
  };
  std::map<std::string, transfer_tally> transfer;
  // Invocations on a worker whose query ended first (a timeout, another stage's failure): where
  // and when they went, so that their late replies still measure the path to it. Kept 10 s.
  struct abandoned_invocation {
    std::string node;
    clock_time sent, deadline;
  };
  std::unordered_map<uint64_t, abandoned_invocation> abandoned;
  sched::transit_guard transit;   // per worker node: a standing queue on the path to it
  std::set<std::string> unheard;  // workers this frontend marked down: reported until heard again
  // Since the last beacon, per pipeline: queries admitted and invocations per stage.
  std::vector<msg::pipeline_load> load;
  // Since the last beacon, per partitioned pipeline: queries by (start layer, SLO) and the clients
  // that sent them (the fragments a policy that re-aligns them plans for).
  struct fragment_tally {
    uint64_t queries = 0;
    std::set<std::string> clients;
  };
  std::vector<std::map<std::pair<uint32_t, double>, fragment_tally>> fragments;
  caf::actor_clock::time_point last_report;
  // What the other frontends last reported of the capped tenants, by node: when, and each
  // tenant's rate there (by security.tenants' index). Their caps are split by where they send.
  struct tenants_elsewhere {
    caf::actor_clock::time_point at;
    std::vector<double> offered;
  };
  std::map<std::string, tenants_elsewhere> peers_tenants;
  // Padding requests (dummies): what the table asks of this frontend, those in flight (by id, with
  // when they went out, and the instance whose outstanding count has them where they went in
  // turn), one input per model, and how many were sent.
  dummy_padding padding;
  struct dummy_sent {
    clock_time at;
    std::string model, node;  // node empty: not counted
    uint32_t device = 0;
  };
  std::unordered_map<uint64_t, dummy_sent> dummies;
  std::unordered_map<std::string, std::vector<tensor>> dummy_inputs;
  uint64_t dummies_sent = 0;
  // Invocations other frontends forwarded for the models this one dispatches (by the id this one
  // sent them on): whose they are, where they went, and what to send again when that node fails.
  struct forwarded_invocation {
    std::string origin;  // the frontend awaiting the result
    uint64_t id = 0;     // its id there
    std::string model, node;
    uint32_t device = 0;
    clock_time deadline;
    std::vector<tensor> inputs;
    int64_t bytes = 0;  // charged to the node's payload budget
  };
  std::unordered_map<uint64_t, forwarded_invocation> forwarded;
};

// The model stage `s` of `q` runs: the routing table's variant, or, for a query an apply left on
// its old stages, the one it was running.
inline const std::string& stage_model_of(const frontend_state& st, const query& q, size_t s) {
  return q.held ? q.held->stage_models[s] : st.routes->stage_model(q.pipeline, s);
}

using self_ptr = frontend_actor::stateful_pointer<frontend_state>;

inline double seconds_of(clock_time t) {
  return std::chrono::duration<double>(t.time_since_epoch()).count();
}

std::string_view outcome_label(msg::status code);
// Counts one answered request in the node's metrics; `pipeline` is the config's (a name a client
// made up is counted as "_unknown", so that clients cannot grow the label set).
void count_reply(self_ptr self, const std::string* pipeline, msg::status code, double seconds, bool within_slo);
// Whether a named client's request that missed at `now` missed at the servers rather than on its
// upload: it was kept longer than its route's plan allows. The plan gives it the compute budget
// its route names (the SLO less its upload at the planned uplink) and lets it wait out one batch
// of at most half that: an answer that came later than that budget after the request did, or a
// drop more than half of it after (`answered` false). One that came with less left, its upload
// having taken longer than planned, and was answered within those times would have kept its SLO
// had the upload kept the plan. Without a route (no plan), every miss is the servers'.
bool servers_miss(const query& q, clock_time now, bool answered);
// Answers query `qid` (once: a query already answered is gone).
void finish(self_ptr self, uint64_t qid, msg::status code, std::string reason);
// Sends (or re-sends) invocation `id` to a live instance of its model. False when none is live, or
// when the path to the one picked is backed up (then `refused`, if given, says why).
bool send_invocation(self_ptr self, uint64_t id, in_flight& f, std::string* refused = nullptr);
// Sends what the walk asked for and answers the query once its walk is done. False when the
// query has been answered (done, or no instance was live for an invocation).
bool send_all(self_ptr self, uint64_t qid, query& q, std::vector<query_walk::spawn> spawns);
// A device's result: the query's walk goes on, or the query is answered.
void on_result(self_ptr self, msg::invocation_result& r);
// Another frontend's invocation of a model this one dispatches for all: placed in the model's
// turn, its result relayed (or a failed result at once, with the reason).
void on_forwarded(self_ptr self, msg::invocation& inv);
// A worker failed: the forwarded invocations it held go to other instances, or fail back.
void reroute_forwarded(self_ptr self, const std::string& node);
// Forgets forwarded invocations past their deadline plus the grace (their worker never answered).
void expire_forwarded(self_ptr self, clock_time now);
// Sends the dummy requests the table asks of this frontend that are due.
void send_dummies(self_ptr self, clock_time now);
// Closes `model`'s batch in turn with dummies when it is due full (pad_atom).
void pad_batch(self_ptr self, const std::string& model);

// The response cache (frontend_cache.cpp). A pipeline that keeps replies: its request answered
// from the cache (true), or its key set in `key` for the reply to be kept under. A model that
// keeps outputs: invocation `f` of `q` answered from the cache (true: it is in flight as a result
// the frontend sends itself), or its key set in `f` for its result. What a key names is kept once
// it comes back ok. The cache's bound and generation follow the configuration.
// Traces (frontend_trace.cpp): whether a query of pipeline `p` arriving now is traced, and a
// traced query's timeline written when its reply `r` goes at `now`.
bool traced(const frontend_state& st, const std::string& pipeline);
void write_trace(const frontend_state& st, const query& q, const msg::client_reply& r, clock_time now);

bool reply_from_cache(self_ptr self, size_t pi, ingress& in, std::optional<cache_key>& key);
bool stage_from_cache(self_ptr self, query& q, in_flight& f);
void keep_in_cache(self_ptr self, const cache_key& key, const std::vector<tensor>& outputs);
void configure_cache(frontend_state& st);

// What it tells others (frontend_reports.cpp): the controller what it knows of its clients (for a
// policy that places on them); a load report's workers this frontend does not hear; another
// frontend's report of its capped tenants' rates; the controller its load since the last beacon
// (admitted and shed) and the tenants' rates to the other frontends; its registration; and a
// beacon's counts of pipeline `p` before any query.
void report_clients(self_ptr self, clock_time now);
void add_unheard(const frontend_state& st, msg::load_report& r);
void on_peer_report(self_ptr self, const msg::load_report& r);
void report_load(self_ptr self);
void register_with_controller(self_ptr self);
msg::pipeline_load no_load(const pipeline& p);

}  // namespace sloserve::frontend_impl
