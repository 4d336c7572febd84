// The frontend: stamps deadlines, walks each query's DAG, balances invocations over instances,
// re-routes around failed nodes, and answers every request exactly once.

#include <spdlog/spdlog.h>

#include <cmath>
#include <limits>
#include <map>
#include <queue>
#include <random>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "actors/client_registry.hpp"
#include "actors/client_time.hpp"
#include "actors/dummy_padding.hpp"
#include "actors/frontend_routes.hpp"
#include "actors/roles.hpp"
#include "config/start_layer.hpp"
#include "gpu/image.hpp"
#include "pipelines/query_walk.hpp"
#include "scheduling/policies/registry.hpp"

namespace sloserve {
namespace {

using clock_time = caf::actor_clock::time_point;
using std::chrono::nanoseconds;
using namespace std::chrono_literals;

double ms_between(clock_time a, clock_time b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

struct query {
  std::string client;
  std::shared_ptr<const reply_sink> sink;  // the HTTP ingress's, or null: over ZeroMQ
  uint64_t request_id = 0;
  size_t pipeline = 0;
  clock_time arrival, deadline;
  std::optional<query_walk> walk;
  std::vector<msg::stage_timing> timings;
  std::vector<uint64_t> invocations;       // still in flight
  int64_t bytes = 0;                       // charged to the node's payload budget
  std::optional<msg::client_route> route;  // where Jellyfish maps its client; the reply tells the size
  int start = 0;                           // a partitioned model: the layer the server starts at
  double slo_ms = 0;                       // the SLO it was admitted under (the client's, else the pipeline's)
  std::string named;  // the id of a client that names itself: its outcome is counted, and its reply
                      // advises the size of what it is mapped to when the reply goes
};

struct in_flight {
  uint64_t query = 0;
  size_t stage = 0;
  std::string model;
  std::string node;
  uint32_t device = 0;
  clock_time deadline;
  clock_time sent;                                     // when it last went to a device
  std::vector<tensor> inputs;                          // kept to re-route when the node fails
  bool checked = false;                                // a root's: the inputs were checked at ingress
  bool fallback = false;                               // a cascade's second model, its first having been unsure
  std::optional<std::pair<std::string, uint32_t>> at;  // the instance its client is mapped to
  // Graft: the layer ranges still to run after this one, each with its deadline.
  std::vector<std::string> chain{};
  std::vector<clock_time> chain_deadlines{};
};

struct frontend_state {
  static inline const char* name = "frontend";

  std::shared_ptr<const cluster_config> cfg;
  const sched::scheduling_policy* policy = nullptr;  // scheduler.policy's
  std::shared_ptr<link> net;
  std::optional<frontend_routes> routes;
  std::mt19937_64 rng{42};

  std::unordered_map<std::string, size_t> pipeline_index;
  client_time client_times;
  client_registry clients;  // clients that name themselves
  clock_time last_client_report;
  double client_report_ms = 0;  // the policy's (scheduling_policy::client_report_ms); 0: none
  std::function<int64_t()> wall_us;

  std::unordered_map<uint64_t, query> queries;
  std::unordered_map<uint64_t, in_flight> invocations;
  using expiry = std::pair<clock_time, uint64_t>;
  std::priority_queue<expiry, std::vector<expiry>, std::greater<>> expiries;
  uint64_t next_query = 1;
  uint64_t next_invocation = 1;
  frontend_stats stats;
  std::unordered_map<std::string, int> client_in_flight;  // queries in flight per client
  // Since the last beacon, per worker: time its results spent outside its queue and device.
  std::map<std::string, std::pair<double, uint64_t>> transfer;  // node -> (sum ms, results)
  std::set<std::string> unheard;  // workers this frontend marked down: reported until heard again
  // Since the last beacon, per pipeline: queries admitted and invocations per stage.
  std::vector<msg::pipeline_load> load;
  // Since the last beacon, per partitioned pipeline: queries by (start layer, SLO) and the clients
  // that sent them (Graft's fragments).
  struct fragment_tally {
    uint64_t queries = 0;
    std::set<std::string> clients;
  };
  std::vector<std::map<std::pair<uint32_t, double>, fragment_tally>> fragments;
  caf::actor_clock::time_point last_report;
  // Piccolo's dummy requests: what the table asks of this frontend, those in flight (by id, with
  // when they went out), one input per model, and how many were sent.
  dummy_padding padding;
  std::unordered_map<uint64_t, clock_time> dummies;
  std::unordered_map<std::string, std::vector<tensor>> dummy_inputs;
  uint64_t dummies_sent = 0;
};

using self_ptr = frontend_actor::stateful_pointer<frontend_state>;

double seconds_of(clock_time t) {
  return std::chrono::duration<double>(t.time_since_epoch()).count();
}

std::string_view outcome_label(msg::status code) {
  switch (code) {
    case msg::status::ok:
      return "ok";
    case msg::status::dropped:
      return "dropped";
    case msg::status::overloaded:
      return "overloaded";
    case msg::status::error:
      return "error";
  }
  return "error";
}

// Counts one answered request in the node's metrics; `pipeline` is the config's (a name a client
// made up is counted as "_unknown", so that clients cannot grow the label set).
void count_reply(self_ptr self, const std::string* pipeline, msg::status code, double seconds, bool within_slo) {
  auto& st = self->state;
  st.net->metrics.request_done(pipeline ? *pipeline : std::string("_unknown"), outcome_label(code), seconds, within_slo,
                               seconds_of(self->clock().now()));
  st.net->metrics.in_flight(st.queries.size());
}

void finish(self_ptr self, uint64_t qid, msg::status code, std::string reason) {
  auto& st = self->state;
  auto it = st.queries.find(qid);
  if (it == st.queries.end()) return;
  auto& q = it->second;
  msg::client_reply r;
  r.request_id = q.request_id;
  r.code = code;
  r.reason = std::move(reason);
  auto now = self->clock().now();
  r.total_ms = ms_between(q.arrival, now);
  r.timings = std::move(q.timings);
  // The mapping may have moved since the request came (its uplink did): the client sends what
  // this reply advises next.
  auto* now_route = q.named.empty() ? nullptr : st.clients.route(q.named, st.cfg->pipelines[q.pipeline].name);
  if (auto* a = now_route ? now_route : q.route ? &*q.route : nullptr)
    r.input_height = a->input_height, r.input_width = a->input_width;
  if (code == msg::status::ok) r.outputs = q.walk->take_results();
  if (!q.named.empty())
    st.clients.on_outcome(st.cfg->pipelines[q.pipeline].name, code != msg::status::ok || now > q.deadline,
                          seconds_of(now));
  st.net->queued.release(q.bytes);
  if (auto c = st.client_in_flight.find(q.client); c != st.client_in_flight.end() && --c->second <= 0)
    st.client_in_flight.erase(c);
  for (auto inv : q.invocations) {
    auto f = st.invocations.find(inv);
    if (f == st.invocations.end()) continue;
    st.routes->release(f->second.model, f->second.node, f->second.device);
    st.invocations.erase(f);
  }
  switch (code) {
    case msg::status::ok:
      ++st.stats.ok;
      break;
    case msg::status::dropped:
      ++st.stats.dropped;
      break;
    case msg::status::overloaded:
      ++st.stats.overloaded;
      break;
    case msg::status::error:
      ++st.stats.errors;
      break;
  }
  auto& p = st.cfg->pipelines[q.pipeline];
  bool within = code == msg::status::ok && now <= q.deadline;
  double seconds = r.total_ms / 1e3;
  if (q.sink)
    (*q.sink)(std::move(r));
  else
    st.net->to_client(q.client, std::move(r));
  st.queries.erase(it);
  count_reply(self, &p.name, code, seconds, within);
}

// Sends (or re-sends) invocation `id` to a live instance of its model. False when none is live.
bool send_invocation(self_ptr self, uint64_t id, in_flight& f) {
  auto& st = self->state;
  auto b = f.at ? st.routes->pick_at(f.model, f.at->first, f.at->second, st.rng) : st.routes->pick(f.model, st.rng);
  if (!b && f.at) {
    // The mapped variant has no live instance here: the stage's own model serves it.
    auto& q = st.queries.at(f.query);
    f.at.reset();
    f.model = st.routes->stage_model(q.pipeline, f.stage);
    b = st.routes->pick(f.model, st.rng);
  }
  if (!b) return false;
  f.node = b->node;
  f.device = b->device;
  f.sent = self->clock().now();
  msg::invocation inv;
  inv.id = id;
  inv.frontend = st.net->self_name();
  inv.model = f.model;
  inv.device = b->device;
  inv.budget_ns = (f.deadline - self->clock().now()).count();
  inv.inputs = f.inputs;
  inv.checked = f.checked;
  st.net->to_node(b->node, {{}, std::move(inv)});
  return true;
}

// Sends invocation `f` of query `qid`; false when no instance of its model was live (the query is
// then answered with the reason, `why` appended).
bool launch(self_ptr self, uint64_t qid, query& q, in_flight f, const std::string& why) {
  auto& st = self->state;
  auto id = st.next_invocation++;
  auto [it, _] = st.invocations.emplace(id, std::move(f));
  if (!send_invocation(self, id, it->second)) {
    auto model = it->second.model;
    st.invocations.erase(id);
    finish(self, qid, msg::status::error, "no live instance serves model '" + model + "'" + why);
    return false;
  }
  q.invocations.push_back(id);
  return true;
}

// False when no instance was live: the query has then been answered and `q` is gone.
bool spawn_stage(self_ptr self, uint64_t qid, query& q, size_t stage, std::vector<tensor> inputs) {
  auto& st = self->state;
  auto& p = st.cfg->pipelines[q.pipeline];
  auto& split = *st.routes->split(q.pipeline);
  auto span = q.deadline - q.arrival;
  in_flight f;
  f.query = qid;
  f.stage = stage;
  f.model = st.routes->stage_model(q.pipeline, stage);
  // A cascade's first model finishes by its share of the stage's budget: the second may follow.
  f.deadline = q.arrival + nanoseconds(first_model_finish_ns(p, st.cfg->models, split, stage, span.count()));
  // A client Jellyfish mapped runs the variant on the device it was mapped to.
  if (q.route) {
    auto& vi = p.stages[stage].variant_indices;
    if (std::any_of(vi.begin(), vi.end(), [&](size_t m) { return st.cfg->models[m].name == q.route->model; })) {
      f.model = q.route->model;
      f.at.emplace(q.route->node, q.route->device);
    }
  }
  // A partitioned model: the layer ranges its fragment's route names, in turn, each by its share
  // of the time left; without a route, the rest of the model from where the client stopped.
  if (auto& whole = st.cfg->models[p.stages[stage].model_index]; whole.partitioned()) {
    if (auto* fr = st.routes->fragment_route(q.pipeline, q.start, q.slo_ms, st.rng)) {
      double total = 0, done = 0;
      for (double b : fr->budgets_ms) total += std::max(0.0, b);
      auto end = f.deadline;
      for (size_t k = 0; k < fr->models.size(); ++k) {
        done += std::max(0.0, fr->budgets_ms[k]);
        auto at = k + 1 == fr->models.size() || total <= 0
                      ? end
                      : std::min(end, q.arrival + nanoseconds(static_cast<int64_t>(static_cast<double>(span.count()) *
                                                                                   done / total)));
        if (k == 0) {
          f.model = fr->models[0];
          f.deadline = at;
        } else {
          f.chain.push_back(fr->models[k]);
          f.chain_deadlines.push_back(at);
        }
      }
    } else if (q.start > 0) {
      f.model = fragment_name(whole, q.start, static_cast<int>(whole.layers.size()));
    }
  }
  f.checked = p.stages[stage].parents.empty();
  f.inputs = std::move(inputs);
  if (!launch(self, qid, q, std::move(f), {})) return false;
  ++st.load[q.pipeline].stage_invocations[stage];
  return true;
}

// A cascade's first model was unsure: its second runs on the same input by the stage's deadline.
// False when no instance was live (the query has then been answered).
bool fall_through(self_ptr self, uint64_t qid, query& q, in_flight& first) {
  auto& st = self->state;
  auto& p = st.cfg->pipelines[q.pipeline];
  auto& s = p.stages[first.stage];
  auto& split = *st.routes->split(q.pipeline);
  auto span = q.deadline - q.arrival;
  in_flight f;
  f.query = qid;
  f.stage = first.stage;
  f.model = st.cfg->models[s.cascade->second_index].name;
  f.deadline = q.arrival + nanoseconds(stage_finish_ns(p, split, first.stage, span.count()));
  f.checked = first.checked;  // the same input, of the same declared tensor
  f.inputs = std::move(first.inputs);
  f.fallback = true;
  if (!launch(self, qid, q, std::move(f), " (stage '" + s.name + "' falls through to it)")) return false;
  ++st.load[q.pipeline].fallthroughs[first.stage];
  return true;
}

// Graft: the next layer range of a query's fragment runs on what the last one made. False when no
// instance was live (the query has then been answered).
bool next_range(self_ptr self, query& q, in_flight& done, std::vector<tensor> outputs) {
  in_flight f;
  f.query = done.query;
  f.stage = done.stage;
  f.model = done.chain.front();
  f.deadline = done.chain_deadlines.front();
  f.chain.assign(done.chain.begin() + 1, done.chain.end());
  f.chain_deadlines.assign(done.chain_deadlines.begin() + 1, done.chain_deadlines.end());
  f.inputs = std::move(outputs);
  return launch(self, done.query, q, std::move(f), {});
}

// Sends what the walk asked for and answers the query once its walk is done. False when the
// query has been answered (done, or no instance was live for an invocation).
bool send_all(self_ptr self, uint64_t qid, query& q, std::vector<query_walk::spawn> spawns) {
  for (auto& sp : spawns)
    if (!spawn_stage(self, qid, q, sp.stage, std::move(sp.inputs))) return false;
  if (!q.walk->done()) return true;
  finish(self, qid, msg::status::ok, {});
  return false;
}

// Sends Piccolo's dummies that are due: invocations of the model's input, which the device runs
// in its batches and answers without outputs. They do not count as outstanding work (the
// balancer's weights leave them out too).
void send_dummies(self_ptr self, clock_time now) {
  auto& st = self->state;
  for (auto& d : st.padding.due(seconds_of(now))) {
    if (st.unheard.count(d.node)) continue;
    auto* m = st.cfg->find_model(d.model);
    if (!m) continue;
    auto& inputs = st.dummy_inputs[d.model];
    if (inputs.empty()) inputs.push_back(make_tensor(m->input, 0, m->input_name));
    msg::invocation inv;
    inv.id = st.next_invocation++;
    inv.frontend = st.net->self_name();
    inv.model = d.model;
    inv.device = d.device;
    inv.budget_ns = static_cast<int64_t>(d.budget_ms * 1e6);
    inv.inputs = inputs;
    inv.dummy = true;
    st.dummies.emplace(inv.id, now);
    ++st.dummies_sent;
    st.net->metrics.count(node_metrics::event::dummy, "sent");
    st.net->to_node(d.node, {{}, std::move(inv)});
  }
}

void on_result(self_ptr self, msg::invocation_result& r) {
  auto& st = self->state;
  if (auto d = st.dummies.find(r.id); d != st.dummies.end()) {
    st.dummies.erase(d);
    return st.net->metrics.count(node_metrics::event::dummy, outcome_label(r.code));
  }
  auto fit = st.invocations.find(r.id);
  if (fit == st.invocations.end()) return;  // answered already (re-routed or query finished)
  auto f = std::move(fit->second);
  st.invocations.erase(fit);
  st.routes->release(f.model, f.node, f.device);
  auto qit = st.queries.find(f.query);
  if (qit == st.queries.end()) return;
  auto& q = qit->second;
  auto& p = st.cfg->pipelines[q.pipeline];
  auto& s = p.stages[f.stage];
  std::erase(q.invocations, r.id);
  q.timings.push_back({s.name, r.node, r.device, r.batch, r.queue_ns / 1e6, r.exec_ns / 1e6, f.model});
  if (r.code == msg::status::ok) {
    auto round_ms = std::chrono::duration<double, std::milli>(self->clock().now() - f.sent).count();
    auto& t = st.transfer[f.node];
    t.first += std::max(0.0, round_ms - static_cast<double>(r.queue_ns + r.exec_ns) / 1e6);
    ++t.second;
  }
  st.net->metrics.stage_done(p.name, s.name, std::chrono::duration<double>(self->clock().now() - f.sent).count());
  if (r.code != msg::status::ok) {
    finish(self, f.query, r.code, "stage '" + s.name + "' on " + r.node + ": " + r.reason);
    return;
  }
  if (!f.chain.empty()) return void(next_range(self, q, f, std::move(r.outputs)));
  if (s.cascade && !f.fallback &&
      !cascade_confident(st.cfg->models[s.model_index], *s.cascade, r.outputs, f.query, f.stage))
    return void(fall_through(self, f.query, q, f));
  send_all(self, f.query, q, q.walk->on_result(f.stage, std::move(r.outputs)));
}

// Sends the controller what this frontend knows of its clients, for a policy that places on them
// (scheduling_policy::client_report_ms).
void report_clients(self_ptr self, clock_time now) {
  auto& st = self->state;
  auto* ctl = st.cfg->controller();
  double window = std::chrono::duration<double>(now - st.last_client_report).count();
  st.last_client_report = now;
  if (!ctl) return;
  msg::load_report r;
  r.node = st.net->self_name();
  r.clients = st.clients.report(seconds_of(now), window, 10);
  for (auto& p : st.cfg->pipelines)
    if (double q = st.clients.uplink_quantile(p.name); q >= 0)
      st.net->metrics.uplink_quantile(p.name, q, st.clients.wait_share(p.name));
  if (!r.clients.empty()) st.net->to_node(ctl->name, {{}, std::move(r)});
}

void on_ingress(self_ptr self, ingress& in) {
  auto& st = self->state;
  ++st.stats.received;
  const std::string* known = nullptr;
  bool named = false;  // a named client's request, counted in the registry
  auto reject = [&](msg::status code, std::string reason, std::string_view drop = {}) {
    if (!drop.empty()) st.net->metrics.dropped(drop);
    if (named && known) st.clients.on_outcome(*known, true, seconds_of(self->clock().now()));
    if (code == msg::status::error)
      ++st.stats.errors;
    else if (code == msg::status::overloaded)
      ++st.stats.overloaded;
    else
      ++st.stats.dropped;
    msg::client_reply r{in.request.request_id, code, std::move(reason), {}, {}, 0};
    if (in.sink)
      (*in.sink)(std::move(r));
    else
      st.net->to_client(in.client, std::move(r));
    count_reply(self, known, code, 0, false);
  };
  auto pit = st.pipeline_index.find(in.request.pipeline);
  if (pit == st.pipeline_index.end())
    return reject(msg::status::error, "unknown pipeline '" + in.request.pipeline + "'");
  auto& p = st.cfg->pipelines[pit->second];
  known = &p.name;
  if (auto& why = st.routes->blocker(pit->second); !why.empty()) return reject(msg::status::error, "not ready: " + why);
  if (in.request.inputs.empty()) return reject(msg::status::error, "request carries no input tensor");
  // The declared tensor, or an image for a model that preprocesses (its device decodes it). A
  // device on this node takes the roots' invocations without checking them again.
  // A partitioned model's request may start at a later layer: it then carries what the layers
  // before made, and the server runs the rest.
  auto start = static_cast<int>(in.request.start_layer);
  auto started = start_model(*st.cfg, p, in.request.start_layer, "startLayer");
  if (!started) return reject(msg::status::error, started.error());
  for (auto r : p.roots()) {
    auto* m = start > 0 ? *started : &st.cfg->models[p.stages[r].model_index];
    if (auto ok = check_input(in.request.inputs.front(), *m); !ok)
      return reject(msg::status::error, "stage '" + p.stages[r].name + "': " + ok.error());
  }
  auto& rq = in.request;
  if (rq.client.size() > 256) return reject(msg::status::error, "client id longer than 256 bytes");
  if (!(rq.slo_ms >= 0 && rq.slo_ms <= 3600e3) || !(rq.rate_hz >= 0 && rq.rate_hz <= 1e6) || std::isnan(rq.rtt_ms))
    return reject(msg::status::error, "a client's sloMs must be in [0, 3600000] and rateHz in [0, 1000000]");
  auto now = self->clock().now();
  // What the SLO has already lost: the network time, or the time since the client sent it.
  auto t = st.client_times.on_request(in.client, rq.network_ms, rq.sent_at_us, st.wall_us(), now,
                                      st.cfg->runtime.clock_tolerance_ms);
  double spent_ms = t.spent_ms, network_ms = t.network_ms, waited_ms = t.waited_ms;
  double slo_ms = rq.slo_ms > 0 ? rq.slo_ms : p.slo_ms;  // a client may declare its own
  std::optional<msg::client_route> route;
  if (!rq.client.empty()) {
    st.clients.on_request({rq.client, p.name, rq.slo_ms, rq.rate_hz, rq.rtt_ms, payload_bytes(rq.inputs),
                           image_pixels_of(rq.inputs.front()), waited_ms, p.slo_ms, rq.queued_ms, rq.skipped},
                          seconds_of(now));
    named = true;
    if (auto* r = st.clients.route(rq.client, p.name)) route = *r;
    // An uplink that moved much, or across the rate a size it sends takes, is reported at once
    // (a policy that places on clients re-places), at most every 20 ms.
    if (st.client_report_ms > 0 && now - st.last_client_report >= 20ms &&
        st.clients.moved(rq.client, p.name, seconds_of(now)))
      report_clients(self, now);
  }
  double budget_ms = slo_ms - spent_ms;
  if (budget_ms <= 0) {
    if (waited_ms > network_ms)
      return reject(msg::status::dropped,
                    fmt::format("stale on arrival: sent {:.1f} ms ago, beyond the {} ms SLO", spent_ms, slo_ms),
                    "stale_on_arrival");
    return reject(msg::status::dropped,
                  "network time " + std::to_string(network_ms) + " ms leaves nothing of the " + std::to_string(slo_ms) +
                      " ms SLO",
                  "network_time");
  }
  if (auto c = st.client_in_flight.find(in.client);
      c != st.client_in_flight.end() && c->second >= st.cfg->runtime.max_client_in_flight)
    return reject(msg::status::overloaded,
                  fmt::format("this client has {} requests in flight (runtime.max_client_in_flight)", c->second),
                  "client_in_flight");
  auto bytes = payload_bytes(in.request.inputs);
  if (!st.net->queued.try_charge(bytes, st.cfg->runtime.max_queued_mb << 20))
    return reject(msg::status::overloaded,
                  fmt::format("node '{}' holds {:.1f} MB of request payloads (runtime.max_queued_mb {})",
                              st.net->self_name(), st.net->queued.used() / 1048576.0, st.cfg->runtime.max_queued_mb),
                  "payload_budget");
  auto qid = st.next_query++;
  query q;
  q.bytes = bytes;
  q.client = std::move(in.client);
  q.sink = std::move(in.sink);
  q.request_id = in.request.request_id;
  q.pipeline = pit->second;
  q.arrival = now;
  q.deadline = now + nanoseconds(static_cast<int64_t>(budget_ms * 1e6));
  q.walk.emplace(p, st.cfg->models, qid);
  q.route = std::move(route);
  q.start = start;
  q.slo_ms = slo_ms;
  if (named) q.named = rq.client;
  if (st.cfg->models[p.stages.front().model_index].partitioned()) {
    auto& tally = st.fragments[pit->second][{static_cast<uint32_t>(start), slo_ms}];
    ++tally.queries;
    if (tally.clients.size() < 1024) tally.clients.insert(rq.client.empty() ? q.client : rq.client);
  }
  auto deadline = q.deadline;
  ++st.client_in_flight[q.client];
  ++st.load[pit->second].queries;
  auto& qq = st.queries.emplace(qid, std::move(q)).first->second;
  st.expiries.emplace(deadline + std::chrono::milliseconds(st.cfg->runtime.reply_grace_ms), qid);
  send_all(self, qid, qq, qq.walk->start(std::move(in.request.inputs)));
}

void on_routing(self_ptr self, msg::routing_table& t) {
  auto& st = self->state;
  st.routes->apply(t);
  st.clients.apply(t.clients);
  st.padding.apply(t);
  // The controller says each routing epoch once; every frontend repeating it says nothing more.
  spdlog::debug("{}: routing table epoch {} ({} models)", st.net->self_name(), t.epoch, t.routes.size());
}

// Adds the workers this frontend does not hear to a load report.
void add_unheard(const frontend_state& st, msg::load_report& r) {
  for (auto& node : st.unheard) {
    msg::link_load l;
    l.node = node;
    l.unheard = true;
    r.links.push_back(std::move(l));
  }
}

void on_peer_down(self_ptr self, const std::string& node) {
  auto& st = self->state;
  if (auto* n = st.cfg->find_node(node); n && n->has_role(role::worker) && st.unheard.insert(node).second) {
    // The controller may still hear it (an asymmetric partition): tell it now, so that it plans
    // the worker's sessions onto workers this frontend can reach.
    msg::load_report r;
    r.node = st.net->self_name();
    add_unheard(st, r);
    if (auto* ctl = st.cfg->controller()) st.net->to_node(ctl->name, {{}, std::move(r)});
  }
  if (!st.routes->set_live(node, false)) return;
  std::vector<uint64_t> affected;
  for (auto& [id, f] : st.invocations)
    if (f.node == node) affected.push_back(id);
  spdlog::warn("{}: node {} is down; re-routing {} invocations", st.net->self_name(), node, affected.size());
  auto now = self->clock().now();
  for (auto id : affected) {
    auto it = st.invocations.find(id);
    if (it == st.invocations.end()) continue;  // its query ended while we re-routed others
    auto& f = it->second;
    auto qid = f.query;
    if (f.deadline > now && send_invocation(self, id, f)) {
      ++st.stats.rerouted;
      st.net->metrics.count(node_metrics::event::rerouted);
      continue;
    }
    finish(self, qid, msg::status::error,
           "worker node '" + node + "' failed and no other instance could meet the deadline");
  }
}

void on_tick(self_ptr self) {
  auto& st = self->state;
  auto now = self->clock().now();
  if (st.client_report_ms > 0 &&
      now - st.last_client_report >= std::chrono::microseconds(static_cast<int64_t>(st.client_report_ms * 1e3)))
    report_clients(self, now);
  send_dummies(self, now);
  while (!st.expiries.empty() && st.expiries.top().first <= now) {
    auto qid = st.expiries.top().second;
    st.expiries.pop();
    auto it = st.queries.find(qid);
    if (it == st.queries.end()) continue;
    std::string nodes;
    for (auto inv : it->second.invocations)
      if (auto f = st.invocations.find(inv); f != st.invocations.end())
        nodes += (nodes.empty() ? "" : ", ") + f->second.node;
    finish(self, qid, msg::status::error,
           "no result within the deadline plus " + std::to_string(st.cfg->runtime.reply_grace_ms) +
               " ms grace (waiting on " + (nodes.empty() ? std::string("nothing") : nodes) + ")");
  }
}

// Sends the controller what this frontend admitted since the last beacon.
void report_load(self_ptr self) {
  auto& st = self->state;
  auto* ctl = st.cfg->controller();
  if (!ctl) return;
  auto now = self->clock().now();
  msg::load_report r;
  r.node = st.net->self_name();
  r.window_s = std::chrono::duration<double>(now - st.last_report).count();
  st.last_report = now;
  r.pipelines = st.load;
  for (auto& [node, t] : st.transfer) r.links.push_back({node, t.first / static_cast<double>(t.second), t.second});
  st.transfer.clear();
  add_unheard(st, r);
  for (size_t pi = 0; pi < st.fragments.size(); ++pi) {
    for (auto& [key, t] : st.fragments[pi])
      r.pipelines[pi].fragments.push_back(
          {key.first, key.second, t.queries, static_cast<uint32_t>(std::max<size_t>(1, t.clients.size()))});
    st.fragments[pi].clear();
  }
  for (auto& l : st.load) {
    l.queries = 0;
    std::fill(l.stage_invocations.begin(), l.stage_invocations.end(), 0);
    std::fill(l.fallthroughs.begin(), l.fallthroughs.end(), 0);
  }
  st.net->to_node(ctl->name, {{}, std::move(r)});
  // Dummies whose worker never answered (it failed) are forgotten after a while.
  std::erase_if(st.dummies, [&](auto& d) { return now - d.second > std::chrono::seconds(30); });
}

void register_with_controller(self_ptr self) {
  auto& st = self->state;
  auto* ctl = st.cfg->controller();
  if (!ctl) return;
  msg::register_node r;
  r.node = st.net->self_name();
  r.roles = {std::string(knob_name(role::frontend))};
  r.schedule_epoch = st.routes->epoch();
  st.net->to_node(ctl->name, {{}, std::move(r)});
}

}  // namespace

frontend_actor spawn_frontend(caf::actor_system& sys, actor_args args) {
  return sys.spawn([args](self_ptr self) -> frontend_actor::behavior_type {
    auto& st = self->state;
    st.cfg = args.cfg;
    st.policy = &sched::policy_of(st.cfg->scheduler.policy);
    st.client_report_ms = st.policy->client_report_ms(*st.cfg);
    st.net = args.net;
    st.wall_us = args.wall_us;
    st.routes.emplace(*st.cfg, st.policy->dispatcher(args.cfg->runtime.balancer));
    st.clients.plan_dips(st.cfg->scheduler.jellyfish.uplink_quantile, st.cfg->scheduler.jellyfish.miss_target);
    for (size_t i = 0; i < st.cfg->pipelines.size(); ++i) st.pipeline_index.emplace(st.cfg->pipelines[i].name, i);
    for (auto& p : st.cfg->pipelines)
      st.load.push_back(
          {p.name, 0, std::vector<uint64_t>(p.stages.size(), 0), std::vector<uint64_t>(p.stages.size(), 0), {}});
    st.fragments.resize(st.cfg->pipelines.size());
    st.last_report = st.last_client_report = self->clock().now();
    return {
        [=](start_atom) {
          register_with_controller(self);
          self->delayed_send(self, std::chrono::milliseconds(10), tick_atom::value);
          self->delayed_send(self, std::chrono::milliseconds(self->state.cfg->runtime.beacon_ms), beacon_atom::value);
        },
        [=](ingress& in) { on_ingress(self, in); },
        [=](status_query& q) {
          auto& st = self->state;
          std::string why;
          if (q.pipeline.empty()) {
            why = st.routes->readiness();
          } else if (auto it = st.pipeline_index.find(q.pipeline); it == st.pipeline_index.end()) {
            why = "unknown pipeline '" + q.pipeline + "'";
          } else {
            why = st.routes->blocker(it->second);
          }
          msg::status_reply r{q.request.token, why.empty(), why.empty() ? "ready" : why, st.dummies_sent};
          if (q.sink)
            (*q.sink)(std::move(r));
          else
            st.net->to_client(q.client, std::move(r));
        },
        [=](msg::invocation_result& r) { on_result(self, r); },
        [=](msg::routing_table& t) { on_routing(self, t); },
        [=](peer_down_atom, const std::string& node) { on_peer_down(self, node); },
        [=](peer_up_atom, const std::string& node) {
          self->state.unheard.erase(node);
          self->state.routes->set_live(node, true);
        },
        [=](tick_atom) {
          on_tick(self);
          self->delayed_send(self, std::chrono::milliseconds(10), tick_atom::value);
        },
        [=](beacon_atom) {
          register_with_controller(self);
          report_load(self);
          self->delayed_send(self, std::chrono::milliseconds(self->state.cfg->runtime.beacon_ms), beacon_atom::value);
        },
        [=](stats_atom) {
          auto s = self->state.stats;
          s.in_flight = self->state.queries.size();
          return s;
        },
    };
  });
}

}  // namespace sloserve
