// The frontend: stamps deadlines, walks each query's DAG, balances invocations over instances,
// re-routes around failed nodes, and answers every request exactly once.

#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <cmath>

#include "actors/frontend_state.hpp"
#include "config/start_layer.hpp"
#include "gpu/image.hpp"
#include "pipelines/request_limits.hpp"

namespace sloserve::frontend_impl {
namespace {

using namespace std::chrono_literals;

// What is wrong with a request for pipeline `p` before anything is charged for it: its inputs
// against the roots' declared tensors (or an image for a model that preprocesses: its device
// decodes it; a device on this node takes the roots' invocations without checking them again),
// from the layer it starts at (a partitioned model's request may carry what the layers before
// made), and what a client says of itself. Empty when nothing is.
std::string request_error(const frontend_state& st, const pipeline& p, const msg::client_request& rq) {
  if (rq.inputs.empty()) return "request carries no input tensor";
  auto started = start_model(*st.cfg, p, rq.start_layer, "startLayer");
  if (!started) return started.error();
  for (auto r : p.roots()) {
    auto* m = rq.start_layer > 0 ? *started : &st.cfg->models[p.stages[r].model_index];
    if (auto ok = check_input(rq.inputs.front(), *m); !ok) return "stage '" + p.stages[r].name + "': " + ok.error();
  }
  if (rq.client.size() > 256) return "client id longer than 256 bytes";
  if (rq.version > 0)
    if (auto vs = pipeline_versions(p); !std::count(vs.begin(), vs.end(), rq.version))
      return "pipeline '" + p.name + "' has no version " + std::to_string(rq.version) +
             "; its versions: " + fmt::format("{}", fmt::join(vs, ", "));
  if (!limits::slo_in_range(rq.slo_ms) || !(rq.rate_hz >= 0 && rq.rate_hz <= 1e6) || std::isnan(rq.rtt_ms))
    return std::string("a client's sloMs must be in ") + limits::slo_range + " and rateHz in [0, 1000000]";
  return {};
}

// Why the SLO leaves no budget (`budget_ms` <= 0): sent too long ago, or the network took it.
std::pair<std::string, std::string_view> no_budget(double spent_ms, double network_ms, double waited_ms,
                                                   double slo_ms) {
  if (waited_ms > network_ms)
    return {fmt::format("stale on arrival: sent {:.1f} ms ago, beyond the {} ms SLO", spent_ms, slo_ms),
            "stale_on_arrival"};
  return {
      "network time " + std::to_string(network_ms) + " ms leaves nothing of the " + std::to_string(slo_ms) + " ms SLO",
      "network_time"};
}

// Starts query `q` of pipeline `pi`: counted, its expiry armed, its roots sent.
void admit(self_ptr self, size_t pi, query q, std::vector<tensor> inputs, const std::string& client_id) {
  auto& st = self->state;
  auto qid = st.next_query++;
  auto& p = st.cfg->pipelines[pi];
  q.cfg = st.cfg;
  q.walk.emplace(p, st.cfg->models, qid);
  if (st.cfg->models[p.stages.front().model_index].partitioned()) {
    auto& tally = st.fragments[pi][{static_cast<uint32_t>(q.start), q.slo_ms}];
    ++tally.queries;
    if (tally.clients.size() < 1024) tally.clients.insert(client_id.empty() ? q.client : client_id);
  }
  auto deadline = q.deadline;
  ++st.client_in_flight[q.client];
  ++st.load[pi].queries;
  auto& qq = st.queries.emplace(qid, std::move(q)).first->second;
  st.expiries.emplace(deadline + std::chrono::milliseconds(st.cfg->runtime.reply_grace_ms), qid);
  send_all(self, qid, qq, qq.walk->start(std::move(inputs)));
}

void on_ingress(self_ptr self, ingress& in) {
  auto& st = self->state;
  ++st.stats.received;
  if (in.request.received_ns > 0) {  // counted by the node's intake gate: taken in now
    auto* p = st.cfg->find_pipeline(in.request.pipeline);
    st.net->intake.taken(st.net->now_ns(), in.request.received_ns, msg::slo_ms_of(in.request, p ? p->slo_ms : 0) / 1e3);
  }
  const std::string* known = nullptr;
  bool named = false;  // a named client's request, counted in the registry
  auto reject = [&](msg::status code, std::string reason, std::string_view drop = {}) {
    if (!drop.empty()) st.net->metrics.dropped(drop);
    if (named && known)  // refused at the door: the servers' only where the node is backed up
      st.clients.on_outcome(*known, true, code == msg::status::overloaded, seconds_of(self->clock().now()));
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
  auto& rq = in.request;
  int tenant = -1;
  if (!rq.tenant.empty()) {
    auto* t = st.cfg->security.find_tenant(rq.tenant);
    if (!t) return reject(msg::status::error, "unknown tenant '" + rq.tenant + "'");
    tenant = static_cast<int>(t - st.cfg->security.tenants.data());
  }
  // A reply kept from the same request before: answered now, past the admission (it takes no device).
  std::optional<cache_key> cached_as;
  if (reply_from_cache(self, pit->second, in, cached_as)) return;
  auto v = st.routes->admit(pit->second, tenant, seconds_of(self->clock().now()));
  bool capped = v.result == sched::admission::outcome::capped;
  if (tenant >= 0)
    st.net->metrics.tenant_request(rq.tenant, v.result == sched::admission::outcome::admitted ? "admitted"
                                              : capped                                        ? "capped"
                                                                                              : "shed");
  if (v.result != sched::admission::outcome::admitted) {
    if (!capped) ++st.load[pit->second].shed;  // offered: the plan sees it
    return reject(msg::status::overloaded, std::move(v.why), capped ? "tenant_cap" : "priority");
  }
  if (auto why = request_error(st, p, rq); !why.empty()) return reject(msg::status::error, why);
  auto now = self->clock().now();
  // What the SLO has already lost: the network time, or the time since the client sent it.
  auto t = st.client_times.on_request(in.client, rq.network_ms, rq.sent_at_us, st.wall_us(), now,
                                      st.cfg->runtime.clock_tolerance_ms);
  query q;
  q.slo_ms = msg::slo_ms_of(rq, p.slo_ms);  // a client may declare its own
  if (!rq.client.empty()) {
    st.clients.on_request({rq.client, p.name, rq.slo_ms, rq.rate_hz, rq.rtt_ms, payload_bytes(rq.inputs),
                           image_pixels_of(rq.inputs.front()), t.waited_ms, p.slo_ms, rq.queued_ms, rq.skipped},
                          seconds_of(now));
    named = true;
    q.named = rq.client;
    if (auto* r = st.clients.route(rq.client, p.name)) q.route = *r;
    // An uplink that moved much, or across the rate a size it sends takes, is reported at once
    // (a policy that places on clients re-places), at most every 20 ms.
    if (st.client_report_ms > 0 && now - st.last_client_report >= 20ms &&
        st.clients.moved(rq.client, p.name, seconds_of(now)))
      report_clients(self, now);
  }
  double budget_ms = q.slo_ms - t.spent_ms;
  if (budget_ms <= 0) {
    auto [why, drop] = no_budget(t.spent_ms, t.network_ms, t.waited_ms, q.slo_ms);
    return reject(msg::status::dropped, why, drop);
  }
  if (auto c = st.client_in_flight.find(in.client);
      c != st.client_in_flight.end() && c->second >= st.cfg->runtime.max_client_in_flight)
    return reject(msg::status::overloaded,
                  fmt::format("this client has {} requests in flight (runtime.max_client_in_flight)", c->second),
                  "client_in_flight");
  q.bytes = payload_bytes(rq.inputs);
  if (!st.net->queued.try_charge(q.bytes, st.cfg->runtime.max_queued_mb << 20))
    return reject(msg::status::overloaded,
                  fmt::format("node '{}' holds {:.1f} MB of request payloads (runtime.max_queued_mb {})",
                              st.net->self_name(), st.net->queued.used() / 1048576.0, st.cfg->runtime.max_queued_mb),
                  "payload_budget");
  q.client = std::move(in.client);
  q.sink = std::move(in.sink);
  q.request_id = rq.request_id;
  q.pipeline = pit->second;
  q.arrival = now;
  q.deadline = now + nanoseconds(ns_of_ms(budget_ms));
  q.start = static_cast<int>(rq.start_layer);
  q.version = rq.version;
  q.cached_as = cached_as;
  q.traced = traced(st, p.name);
  admit(self, pit->second, std::move(q), std::move(rq.inputs), rq.client);
}

void on_routing(self_ptr self, msg::routing_table& t) {
  auto& st = self->state;
  st.routes->apply(t);
  st.clients.apply(t.clients);
  st.padding.apply(t);
  // The controller says each routing epoch once; every frontend repeating it says nothing more.
  spdlog::debug("{}: routing table epoch {} ({} models)", st.net->self_name(), t.epoch, t.routes.size());
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
  reroute_forwarded(self, node);
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

// Whether queries admitted to `a` can go on as `b`'s: the same stages, in the same DAG.
bool same_shape(const pipeline& a, const pipeline& b) {
  if (a.stages.size() != b.stages.size()) return false;
  for (size_t i = 0; i < a.stages.size(); ++i) {
    auto &x = a.stages[i], &y = b.stages[i];
    if (x.name != y.name || x.after != y.after || x.cascade.has_value() != y.cascade.has_value() ||
        x.fanout != y.fanout || x.items.has_value() != y.items.has_value())
      return false;
  }
  return true;
}

// An apply: the pipelines and models of `next` from now on. Queries of a pipeline it keeps in the
// same shape go on under it (their deadlines stay those they were admitted with); those of a
// pipeline it drops or reshapes finish on the stages they started on (the configuration they were
// admitted under, its stage budgets and models held), on the instances still routed to them.
void on_new_config(self_ptr self, std::shared_ptr<const cluster_config> next) {
  auto& st = self->state;
  auto& old = *st.cfg;
  std::vector<std::optional<size_t>> from;
  std::unordered_map<std::string, size_t> index;
  for (size_t i = 0; i < next->pipelines.size(); ++i) {
    auto& p = next->pipelines[i];
    index.emplace(p.name, i);
    auto* was = old.find_pipeline(p.name);
    from.push_back(was && same_shape(*was, p) ? std::optional<size_t>(static_cast<size_t>(was - old.pipelines.data()))
                                              : std::nullopt);
  }
  std::vector<size_t> to(old.pipelines.size(), SIZE_MAX);
  for (size_t i = 0; i < from.size(); ++i)
    if (from[i]) to[*from[i]] = i;
  std::map<size_t, std::shared_ptr<const held_pipeline>> held;  // by the old pipeline's index
  std::vector<uint64_t> orphans;                                // no stage budgets to finish on
  for (auto& [qid, q] : st.queries) {
    if (q.held) continue;  // held by an earlier apply already
    if (to[q.pipeline] != SIZE_MAX) {
      q.cfg = next, q.pipeline = to[q.pipeline];
      continue;
    }
    auto& h = held[q.pipeline];
    if (!h)
      if (auto* split = st.routes->split(q.pipeline)) {
        std::vector<std::string> models;
        for (size_t s = 0; s < old.pipelines[q.pipeline].stages.size(); ++s)
          models.push_back(st.routes->stage_model(q.pipeline, s));
        h = std::make_shared<held_pipeline>(held_pipeline{*split, std::move(models)});
      }
    if (h)
      q.held = h;
    else
      orphans.push_back(qid);
  }
  for (auto qid : orphans) {
    auto& name = st.queries.at(qid).pipe().name;
    finish(self, qid, msg::status::error,
           "pipeline '" + name + "' was " + (index.count(name) ? "changed" : "removed") +
               " by an apply while this request was in flight");
  }
  std::vector<msg::pipeline_load> load;
  std::vector<std::map<std::pair<uint32_t, double>, frontend_state::fragment_tally>> fragments(next->pipelines.size());
  for (size_t i = 0; i < next->pipelines.size(); ++i) {
    auto& p = next->pipelines[i];
    if (from[i]) {
      load.push_back(std::move(st.load[*from[i]]));
      fragments[i] = std::move(st.fragments[*from[i]]);
    } else {
      load.push_back(no_load(p));
    }
  }
  st.load = std::move(load);
  st.fragments = std::move(fragments);
  st.pipeline_index = std::move(index);
  st.skew.clear();           // per (pipeline, stage) index: learnt again
  st.peers_tenants.clear();  // by the tenants' indices: heard again
  st.cfg = std::move(next);
  st.routes->rebind(*st.cfg, from);
  configure_cache(st);
  spdlog::info("{}: frontend serves {} pipelines from now on{}", st.net->self_name(), st.cfg->pipelines.size(),
               orphans.empty() ? "" : fmt::format(" ({} requests of changed pipelines answered)", orphans.size()));
}

}  // namespace
}  // namespace sloserve::frontend_impl

namespace sloserve {

frontend_actor spawn_frontend(caf::actor_system& sys, actor_args args) {
  using namespace frontend_impl;
  return sys.spawn([args](self_ptr self) -> frontend_actor::behavior_type {
    auto& st = self->state;
    st.cfg = args.cfg;
    st.policy = &sched::policy_of(st.cfg->scheduler);
    auto tracking = st.policy->clients(*st.cfg);
    st.client_report_ms = tracking.report_ms;
    st.net = args.net;
    st.wall_us = args.wall_us;
    st.routes.emplace(*st.cfg, st.policy->dispatcher(args.cfg->runtime.balancer, args.cfg->scheduler.section));
    st.clients.plan_dips(tracking.uplink_quantile, tracking.miss_target, tracking.min_wait_share);
    for (size_t i = 0; i < st.cfg->pipelines.size(); ++i) st.pipeline_index.emplace(st.cfg->pipelines[i].name, i);
    for (auto& p : st.cfg->pipelines) st.load.push_back(no_load(p));
    st.fragments.resize(st.cfg->pipelines.size());
    configure_cache(st);
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
            why = st.routes->readiness(st.net->self_name());
          } else if (auto it = st.pipeline_index.find(q.pipeline); it == st.pipeline_index.end()) {
            why = "unknown pipeline '" + q.pipeline + "'";
          } else {
            why = st.routes->readiness(st.net->self_name(), it->second);
          }
          msg::status_reply r{q.request.token, why.empty(), why.empty() ? "ready" : why, st.dummies_sent};
          if (q.sink)
            (*q.sink)(std::move(r));
          else
            st.net->to_client(q.client, std::move(r));
        },
        [=](msg::invocation_result& r) { on_result(self, r); },
        [=](msg::invocation& inv) { on_forwarded(self, inv); },
        [=](msg::routing_table& t) { on_routing(self, t); },
        [=](const msg::load_report& r) { on_peer_report(self, r); },
        [=](peer_down_atom, const std::string& node) { on_peer_down(self, node); },
        [=](peer_up_atom, const std::string& node) {
          self->state.unheard.erase(node);
          self->state.routes->set_live(node, true);
        },
        [=](pad_atom, const std::string& model) { pad_batch(self, model); },
        [=](tick_atom) {
          on_tick(self);
          self->delayed_send(self, std::chrono::milliseconds(10), tick_atom::value);
        },
        [=](beacon_atom) {
          register_with_controller(self);
          report_load(self);
          self->delayed_send(self, std::chrono::milliseconds(self->state.cfg->runtime.beacon_ms), beacon_atom::value);
        },
        [=](new_config& c) { on_new_config(self, c.cfg); },
        [=](stats_atom) {
          auto s = self->state.stats;
          s.in_flight = self->state.queries.size();
          return s;
        },
    };
  });
}

}  // namespace sloserve
