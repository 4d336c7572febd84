// The frontend: stamps deadlines, walks each query's DAG, balances invocations over instances,
// re-routes around failed nodes, and answers every request exactly once.

#include <spdlog/spdlog.h>

#include <cmath>
#include <limits>
#include <queue>
#include <random>
#include <unordered_map>
#include <unordered_set>

#include "actors/roles.hpp"
#include "scheduling/balancer.hpp"

namespace sloserve {
namespace {

using clock_time = caf::actor_clock::time_point;
using std::chrono::nanoseconds;

double ms_between(clock_time a, clock_time b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

struct route {
  struct backend {
    std::string node;
    uint32_t device;
  };
  std::vector<backend> backends;
  std::vector<sched::backend_load> loads;  // parallel to backends
};

struct query {
  std::string client;
  uint64_t request_id = 0;
  size_t pipeline = 0;
  clock_time arrival, deadline;
  std::vector<uint32_t> outstanding;  // per stage
  std::vector<uint8_t> finished, spawned;
  std::vector<std::vector<tensor>> first_output;  // per stage, for joins
  std::vector<tensor> results;                    // leaf outputs
  std::vector<msg::stage_timing> timings;
  std::vector<uint64_t> invocations;              // still in flight
  int64_t bytes = 0;                              // charged to the node's payload budget
};

struct in_flight {
  uint64_t query = 0;
  size_t stage = 0;
  std::string model;
  std::string node;
  uint32_t device = 0;
  clock_time deadline;
  std::vector<tensor> inputs;  // kept to re-route when the node fails
};

// What a client's send times say about its clock. The least time any of its recent requests took
// to arrive is what the network takes at best, plus the difference between the clocks: within
// runtime.clock_tolerance_ms (and not negative) the clocks are taken to agree, and send times
// count as they are; beyond it that least time is an offset, and only what a request took
// beyond it counts.
struct client_clock {
  double low_ms = std::numeric_limits<double>::infinity();       // since `since`
  double prev_low_ms = std::numeric_limits<double>::infinity();  // the window before
  clock_time since;

  // `waited_ms`: the frontend's wall clock at arrival minus the client's send time. Returns the
  // offset to take off it (0 when the clocks agree).
  double offset_ms(double waited_ms, clock_time now, double tolerance_ms) {
    if (now - since > std::chrono::seconds(10)) {
      prev_low_ms = low_ms;
      low_ms = std::numeric_limits<double>::infinity();
      since = now;
    }
    low_ms = std::min(low_ms, waited_ms);
    double floor = std::min(low_ms, prev_low_ms);
    return floor < 0 || floor > tolerance_ms ? floor : 0;
  }
};

struct frontend_state {
  static inline const char* name = "frontend";

  std::shared_ptr<const cluster_config> cfg;
  std::shared_ptr<link> net;
  std::unique_ptr<sched::balancer> balancer;
  std::mt19937_64 rng{42};

  std::unordered_map<std::string, size_t> pipeline_index;
  std::vector<std::optional<slo_split>> splits;  // per pipeline, from the routing table
  std::vector<std::string> blockers;             // per pipeline: why it cannot be served
  // Per client: a moving average of the network time it reports, used for its requests that
  // report none.
  std::unordered_map<std::string, double> client_network_ms;
  std::unordered_map<std::string, client_clock> client_clocks;
  std::function<int64_t()> wall_us;
  std::unordered_map<std::string, route> routes;
  std::unordered_set<std::string> down;
  uint64_t routing_epoch = 0;

  std::unordered_map<uint64_t, query> queries;
  std::unordered_map<uint64_t, in_flight> invocations;
  using expiry = std::pair<clock_time, uint64_t>;
  std::priority_queue<expiry, std::vector<expiry>, std::greater<>> expiries;
  uint64_t next_query = 1;
  uint64_t next_invocation = 1;
  frontend_stats stats;
  // Since the last beacon, per pipeline: queries admitted and invocations per stage.
  std::vector<msg::pipeline_load> load;
  caf::actor_clock::time_point last_report;
};

using self_ptr = frontend_actor::stateful_pointer<frontend_state>;

sched::backend_load* load_of(frontend_state& st, const std::string& model, const std::string& node,
                             uint32_t device) {
  auto it = st.routes.find(model);
  if (it == st.routes.end()) return nullptr;
  for (size_t i = 0; i < it->second.backends.size(); ++i)
    if (it->second.backends[i].node == node && it->second.backends[i].device == device)
      return &it->second.loads[i];
  return nullptr;
}

// A stage whose declared input differs from what its parent emits gets a tensor of its own
// declared shape derived from the parent's row (it stands in for crop-and-resize).
tensor adapt(const tensor& t, const tensor_spec& spec) {
  if (t.type == spec.type && t.shape == spec.shape) return t;
  return make_tensor(spec, sample_fingerprint(t.data), t.name);
}

// Rows forwarded along a fan-out edge: floor(f) plus one more with probability frac(f), drawn
// deterministically from the query so replays fan out identically; at most the rows present.
int64_t fanout_rows(uint64_t query_id, size_t stage, double f, int64_t rows) {
  uint64_t h = fingerprint(std::string_view(reinterpret_cast<const char*>(&query_id), 8)) ^
               (stage * 0x9e3779b97f4a7c15ULL);
  double u = static_cast<double>(h >> 11) / static_cast<double>(1ULL << 53);
  auto k = static_cast<int64_t>(std::floor(f)) + (u < f - std::floor(f) ? 1 : 0);
  return std::min(k, rows);
}

// Why pipeline `pi` cannot be served now; empty when it can.
std::string blocker(const frontend_state& st, size_t pi) {
  if (st.routing_epoch == 0) return "no routing table from the controller yet";
  auto& p = st.cfg->pipelines[pi];
  if (!st.splits[pi]) return "no stage budgets for pipeline '" + p.name + "'";
  for (auto& s : p.stages) {
    auto it = st.routes.find(s.model);
    bool live = false;
    if (it != st.routes.end())
      for (auto& l : it->second.loads) live |= l.live;
    if (!live) return "no live instance serves model '" + s.model + "'";
  }
  return {};
}

// Recomputed when routes or peers change, so requests only read it.
void refresh_blockers(frontend_state& st) {
  for (size_t i = 0; i < st.cfg->pipelines.size(); ++i) st.blockers[i] = blocker(st, i);
}

std::string readiness(const frontend_state& st) {
  for (auto& b : st.blockers)
    if (!b.empty()) return b;
  return {};
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
  r.total_ms = ms_between(q.arrival, self->clock().now());
  r.timings = std::move(q.timings);
  if (code == msg::status::ok) r.outputs = std::move(q.results);
  st.net->queued.release(q.bytes);
  for (auto inv : q.invocations) {
    auto f = st.invocations.find(inv);
    if (f == st.invocations.end()) continue;
    if (auto* l = load_of(st, f->second.model, f->second.node, f->second.device); l && l->outstanding)
      --l->outstanding;
    st.invocations.erase(f);
  }
  switch (code) {
    case msg::status::ok: ++st.stats.ok; break;
    case msg::status::dropped: ++st.stats.dropped; break;
    case msg::status::overloaded: ++st.stats.overloaded; break;
    case msg::status::error: ++st.stats.errors; break;
  }
  st.net->to_client(q.client, std::move(r));
  st.queries.erase(it);
}

// Sends (or re-sends) invocation `id` to a live instance of its model. False when none is live.
bool send_invocation(self_ptr self, uint64_t id, in_flight& f) {
  auto& st = self->state;
  auto rit = st.routes.find(f.model);
  if (rit == st.routes.end()) return false;
  auto pick = st.balancer->pick(rit->second.loads, st.rng);
  if (!pick) return false;
  auto& b = rit->second.backends[*pick];
  ++rit->second.loads[*pick].outstanding;
  f.node = b.node;
  f.device = b.device;
  msg::invocation inv;
  inv.id = id;
  inv.frontend = st.net->self_name();
  inv.model = f.model;
  inv.device = b.device;
  inv.budget_ns = (f.deadline - self->clock().now()).count();
  inv.inputs = f.inputs;
  st.net->to_node(b.node, {{}, std::move(inv)});
  return true;
}

// False when no instance was live: the query has then been answered and `q` is gone.
bool spawn_stage(self_ptr self, uint64_t qid, query& q, size_t stage, std::vector<tensor> inputs) {
  auto& st = self->state;
  auto& p = st.cfg->pipelines[q.pipeline];
  auto& split = *st.splits[q.pipeline];
  auto span = q.deadline - q.arrival;
  auto offset = nanoseconds(static_cast<int64_t>(
      static_cast<double>(span.count()) * split.finish_offset_ms[stage] / p.slo_ms));
  in_flight f;
  f.query = qid;
  f.stage = stage;
  f.model = p.stages[stage].model;
  f.deadline = std::min(q.deadline, q.arrival + offset);
  f.inputs = std::move(inputs);
  auto id = st.next_invocation++;
  auto [it, _] = st.invocations.emplace(id, std::move(f));
  if (!send_invocation(self, id, it->second)) {
    st.invocations.erase(id);
    finish(self, qid, msg::status::error, "no live instance serves model '" + p.stages[stage].model + "'");
    return false;
  }
  ++q.outstanding[stage];
  q.invocations.push_back(id);
  ++st.load[q.pipeline].stage_invocations[stage];
  return true;
}

// Spawns stage `stage` on its parent's output `src`: one invocation per forwarded row for a
// fan-out stage, else one on the whole output. False when the query has been answered.
bool spawn_from(self_ptr self, uint64_t qid, query& q, size_t stage, const tensor& src) {
  auto& s = self->state.cfg->pipelines[q.pipeline].stages[stage];
  auto& spec = self->state.cfg->models[s.model_index].input;
  if (!s.fanout) return spawn_stage(self, qid, q, stage, {adapt(src, spec)});
  auto k = fanout_rows(qid, stage, *s.fanout, row_count(src));
  for (int64_t i = 0; i < k; ++i)
    if (!spawn_stage(self, qid, q, stage, {adapt(row_of(src, i), spec)})) return false;
  return true;
}

// Spawns join stages whose parents are all done and marks finished stages; answers the query
// when every stage has finished.
void advance(self_ptr self, uint64_t qid) {
  auto& st = self->state;
  auto qit = st.queries.find(qid);
  if (qit == st.queries.end()) return;
  auto& q = qit->second;
  auto& p = st.cfg->pipelines[q.pipeline];
  bool all = true;
  for (auto v : p.topo) {
    if (q.finished[v]) continue;
    auto& s = p.stages[v];
    bool parents_done = true;
    for (auto u : s.parents) parents_done &= q.finished[u] != 0;
    if (s.parents.size() > 1 && parents_done && !q.spawned[v]) {
      q.spawned[v] = 1;
      auto& src = q.first_output[s.parents.front()];
      if (!src.empty() && !spawn_from(self, qid, q, v, src.front())) return;
    }
    if (parents_done && q.outstanding[v] == 0 && (s.parents.size() <= 1 || q.spawned[v]))
      q.finished[v] = 1;
    all &= q.finished[v] != 0;
  }
  if (all) finish(self, qid, msg::status::ok, {});
}

void on_result(self_ptr self, msg::invocation_result& r) {
  auto& st = self->state;
  auto fit = st.invocations.find(r.id);
  if (fit == st.invocations.end()) return;  // answered already (re-routed or query finished)
  auto f = std::move(fit->second);
  st.invocations.erase(fit);
  if (auto* l = load_of(st, f.model, f.node, f.device); l && l->outstanding) --l->outstanding;
  auto qit = st.queries.find(f.query);
  if (qit == st.queries.end()) return;
  auto& q = qit->second;
  auto& p = st.cfg->pipelines[q.pipeline];
  auto& s = p.stages[f.stage];
  std::erase(q.invocations, r.id);
  q.timings.push_back({s.name, r.node, r.device, r.batch, r.queue_ns / 1e6, r.exec_ns / 1e6});
  if (r.code != msg::status::ok) {
    finish(self, f.query, r.code, "stage '" + s.name + "' on " + r.node + ": " + r.reason);
    return;
  }
  --q.outstanding[f.stage];
  if (q.first_output[f.stage].empty()) q.first_output[f.stage] = r.outputs;
  for (auto c : s.children) {
    auto& cs = p.stages[c];
    if (cs.parents.size() > 1 || r.outputs.empty()) continue;  // joins wait in advance()
    if (!spawn_from(self, f.query, q, c, r.outputs.front())) return;
  }
  if (s.children.empty())
    for (auto& t : r.outputs) {
      t.name = s.name;
      q.results.push_back(std::move(t));
    }
  advance(self, f.query);
}

void on_ingress(self_ptr self, ingress& in) {
  auto& st = self->state;
  ++st.stats.received;
  auto reject = [&](msg::status code, std::string reason) {
    if (code == msg::status::error) ++st.stats.errors;
    else if (code == msg::status::overloaded) ++st.stats.overloaded;
    else ++st.stats.dropped;
    st.net->to_client(in.client, msg::client_reply{in.request.request_id, code, std::move(reason), {}, {}, 0});
  };
  auto pit = st.pipeline_index.find(in.request.pipeline);
  if (pit == st.pipeline_index.end())
    return reject(msg::status::error, "unknown pipeline '" + in.request.pipeline + "'");
  auto& p = st.cfg->pipelines[pit->second];
  if (auto& why = st.blockers[pit->second]; !why.empty())
    return reject(msg::status::error, "not ready: " + why);
  if (in.request.inputs.empty()) return reject(msg::status::error, "request carries no input tensor");
  // The declared tensor, or an image for a model that preprocesses (its device decodes it).
  for (auto r : p.roots()) {
    std::string err;
    if (!input_form_of(in.request.inputs.front(), st.cfg->models[p.stages[r].model_index], err))
      return reject(msg::status::error, "stage '" + p.stages[r].name + "': " + err);
  }
  auto now = self->clock().now();
  double network_ms = in.request.network_ms;
  if (network_ms >= 0) {
    if (st.client_network_ms.size() > 100000) st.client_network_ms.clear();  // bound the memory
    auto [it, fresh] = st.client_network_ms.emplace(in.client, network_ms);
    if (!fresh) it->second = 0.7 * it->second + 0.3 * network_ms;
  } else if (auto it = st.client_network_ms.find(in.client); it != st.client_network_ms.end()) {
    network_ms = it->second;  // estimated from what this client reported before
  }
  // What the SLO has already lost: the network time, or the time since the client meant to send
  // (its send time by its own clock, less any offset between the clocks, plus the network).
  double spent_ms = std::max(0.0, network_ms);
  double waited_ms = -1;
  if (in.request.sent_at_us > 0) {
    if (st.client_clocks.size() > 100000) st.client_clocks.clear();  // bound the memory
    waited_ms = static_cast<double>(st.wall_us() - in.request.sent_at_us) / 1000.0;
    auto [it, fresh] = st.client_clocks.try_emplace(in.client);
    if (fresh) it->second.since = now;
    double offset = it->second.offset_ms(waited_ms, now, st.cfg->runtime.clock_tolerance_ms);
    waited_ms -= offset;
    spent_ms = offset == 0 ? std::max(spent_ms, waited_ms) : std::max(0.0, waited_ms) + spent_ms;
  }
  double budget_ms = p.slo_ms - spent_ms;
  if (budget_ms <= 0) {
    if (waited_ms > network_ms)
      return reject(msg::status::dropped, fmt::format("stale on arrival: sent {:.1f} ms ago, beyond the {} ms SLO",
                                                      spent_ms, p.slo_ms));
    return reject(msg::status::dropped, "network time " + std::to_string(network_ms) +
                                            " ms leaves nothing of the " + std::to_string(p.slo_ms) + " ms SLO");
  }
  auto bytes = payload_bytes(in.request.inputs);
  if (!st.net->queued.try_charge(bytes, st.cfg->runtime.max_queued_mb << 20))
    return reject(msg::status::overloaded,
                  fmt::format("node '{}' holds {:.1f} MB of request payloads (runtime.max_queued_mb {})",
                              st.net->self_name(), st.net->queued.used() / 1048576.0, st.cfg->runtime.max_queued_mb));
  auto qid = st.next_query++;
  query q;
  q.bytes = bytes;
  q.client = std::move(in.client);
  q.request_id = in.request.request_id;
  q.pipeline = pit->second;
  q.arrival = now;
  q.deadline = now + nanoseconds(static_cast<int64_t>(budget_ms * 1e6));
  auto n = p.stages.size();
  q.outstanding.assign(n, 0);
  q.finished.assign(n, 0);
  q.spawned.assign(n, 0);
  q.first_output.resize(n);
  auto deadline = q.deadline;
  ++st.load[pit->second].queries;
  auto& qq = st.queries.emplace(qid, std::move(q)).first->second;
  st.expiries.emplace(deadline + std::chrono::milliseconds(st.cfg->runtime.reply_grace_ms), qid);
  auto roots = p.roots();
  for (size_t i = 0; i < roots.size(); ++i) {
    auto inputs = i + 1 == roots.size() ? std::move(in.request.inputs) : in.request.inputs;
    if (!spawn_stage(self, qid, qq, roots[i], std::move(inputs))) return;
  }
}

void on_routing(self_ptr self, msg::routing_table& t) {
  auto& st = self->state;
  // Tables come from the one controller in order; a restarted controller numbers afresh.
  st.routing_epoch = t.epoch;
  std::unordered_map<std::string, route> fresh;
  for (auto& mr : t.routes) {
    auto& r = fresh[mr.model];
    for (auto& inst : mr.instances) {
      r.backends.push_back({inst.node, inst.device});
      sched::backend_load l;
      l.weight = inst.weight;
      l.live = !st.down.count(inst.node);
      if (auto* old = load_of(st, mr.model, inst.node, inst.device)) l.outstanding = old->outstanding;
      r.loads.push_back(l);
    }
  }
  st.routes = std::move(fresh);
  for (auto& p : st.cfg->pipelines) {
    std::vector<double> budget(p.stages.size(), -1);
    for (auto& b : t.budgets)
      if (b.pipeline == p.name)
        if (auto s = p.find_stage(b.stage)) budget[*s] = b.budget_ms;
    bool complete = std::none_of(budget.begin(), budget.end(), [](double b) { return b < 0; });
    auto& slot = st.splits[st.pipeline_index[p.name]];
    if (complete) slot = offsets_from_budgets(p, budget);
  }
  refresh_blockers(st);
  spdlog::info("{}: routing table epoch {} ({} models)", st.net->self_name(), t.epoch, t.routes.size());
}

void set_live(frontend_state& st, const std::string& node, bool live) {
  for (auto& [m, r] : st.routes)
    for (size_t i = 0; i < r.backends.size(); ++i)
      if (r.backends[i].node == node) r.loads[i].live = live;
  refresh_blockers(st);
}

void on_peer_down(self_ptr self, const std::string& node) {
  auto& st = self->state;
  if (!st.down.insert(node).second) return;
  set_live(st, node, false);
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
      continue;
    }
    finish(self, qid, msg::status::error,
           "worker node '" + node + "' failed and no other instance could meet the deadline");
  }
}

void on_tick(self_ptr self) {
  auto& st = self->state;
  auto now = self->clock().now();
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
  for (auto& l : st.load) {
    l.queries = 0;
    std::fill(l.stage_invocations.begin(), l.stage_invocations.end(), 0);
  }
  st.net->to_node(ctl->name, {{}, std::move(r)});
}

void register_with_controller(self_ptr self) {
  auto& st = self->state;
  auto* ctl = st.cfg->controller();
  if (!ctl) return;
  msg::register_node r;
  r.node = st.net->self_name();
  r.roles = {"frontend"};
  r.schedule_epoch = st.routing_epoch;
  st.net->to_node(ctl->name, {{}, std::move(r)});
}

}  // namespace

frontend_actor spawn_frontend(caf::actor_system& sys, actor_args args) {
  return sys.spawn([args](self_ptr self) -> frontend_actor::behavior_type {
    auto& st = self->state;
    st.cfg = args.cfg;
    st.net = args.net;
    st.wall_us = args.wall_us;
    st.balancer = sched::make_balancer(args.cfg->runtime.balancer);
    for (size_t i = 0; i < st.cfg->pipelines.size(); ++i)
      st.pipeline_index.emplace(st.cfg->pipelines[i].name, i);
    st.splits.resize(st.cfg->pipelines.size());
    st.blockers.resize(st.cfg->pipelines.size());
    refresh_blockers(st);
    for (auto& p : st.cfg->pipelines)
      st.load.push_back({p.name, 0, std::vector<uint64_t>(p.stages.size(), 0)});
    st.last_report = self->clock().now();
    return {
        [=](start_atom) {
          register_with_controller(self);
          self->delayed_send(self, std::chrono::milliseconds(10), tick_atom::value);
          self->delayed_send(self, std::chrono::milliseconds(self->state.cfg->runtime.beacon_ms),
                             beacon_atom::value);
        },
        [=](ingress& in) { on_ingress(self, in); },
        [=](status_query& q) {
          auto why = readiness(self->state);
          self->state.net->to_client(q.client, msg::status_reply{q.request.token, why.empty(),
                                                                 why.empty() ? "ready" : why});
        },
        [=](msg::invocation_result& r) { on_result(self, r); },
        [=](msg::routing_table& t) { on_routing(self, t); },
        [=](peer_down_atom, const std::string& node) { on_peer_down(self, node); },
        [=](peer_up_atom, const std::string& node) {
          self->state.down.erase(node);
          set_live(self->state, node, true);
        },
        [=](tick_atom) {
          on_tick(self);
          self->delayed_send(self, std::chrono::milliseconds(10), tick_atom::value);
        },
        [=](beacon_atom) {
          register_with_controller(self);
          report_load(self);
          self->delayed_send(self, std::chrono::milliseconds(self->state.cfg->runtime.beacon_ms),
                             beacon_atom::value);
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
