// The frontend's request path: each stage's invocation sent to an instance by its deadline, results
// walked on through the DAG, and one reply per query.

#include <algorithm>
#include <cmath>

#include "actors/frontend_state.hpp"
#include "config/start_layer.hpp"

namespace sloserve::frontend_impl {
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

void count_reply(self_ptr self, const std::string* pipeline, msg::status code, double seconds, bool within_slo) {
  auto& st = self->state;
  st.net->metrics.request_done(pipeline ? *pipeline : std::string("_unknown"), outcome_label(code), seconds, within_slo,
                               seconds_of(self->clock().now()));
  st.net->metrics.in_flight(st.queries.size());
}

bool servers_miss(const query& q, clock_time now, bool answered) {
  if (!q.route || !(q.route->budget_ms > 0)) return true;
  return ms_between(q.arrival, now) > (answered ? 1.0 : 0.5) * q.route->budget_ms;
}

// Abandoned invocations kept at most (a bound on the memory a dead path's timeouts take).
constexpr size_t max_abandoned = 1 << 16;

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
  double queue_ms = 0, exec_ms = 0, executions = 0;
  for (auto& t : q.timings) {
    queue_ms += t.queue_ms;
    exec_ms += t.exec_ms;
    if (t.batch > 0) executions += 1.0 / t.batch;
  }
  st.net->metrics.request_statistics(q.pipe().name, code == msg::status::ok, static_cast<int64_t>(r.total_ms * 1e6),
                                     static_cast<int64_t>(queue_ms * 1e6), static_cast<int64_t>(exec_ms * 1e6),
                                     executions,
                                     static_cast<uint64_t>(std::max<int64_t>(0, st.wall_us ? st.wall_us() / 1000 : 0)));
  if (q.traced) write_trace(st, q, r, now);
  r.timings = std::move(q.timings);
  // The mapping may have moved since the request came (its uplink did): the client sends what
  // this reply advises next.
  auto* now_route = q.named.empty() ? nullptr : st.clients.route(q.named, q.pipe().name);
  if (auto* a = now_route ? now_route : q.route ? &*q.route : nullptr)
    r.input_height = a->input_height, r.input_width = a->input_width;
  if (code == msg::status::ok) r.outputs = q.walk->take_results(), r.late_paths = q.late_paths;
  if (code == msg::status::ok && q.cached_as) keep_in_cache(self, *q.cached_as, r.outputs);
  bool late = now > q.deadline || !q.late_paths.empty();
  if (!q.named.empty()) {
    bool missed = code != msg::status::ok || late;
    st.clients.on_outcome(q.pipe().name, missed, missed && servers_miss(q, now, code == msg::status::ok),
                          seconds_of(now));
  }
  st.net->queued.release(q.bytes);
  if (auto c = st.client_in_flight.find(q.client); c != st.client_in_flight.end() && --c->second <= 0)
    st.client_in_flight.erase(c);
  for (auto inv : q.invocations) {
    auto f = st.invocations.find(inv);
    if (f == st.invocations.end()) continue;
    if (!f->second.from_cache) st.routes->release(f->second.model, f->second.node, f->second.device);
    if (f->second.device != msg::forwarded_device && !f->second.node.empty() && st.abandoned.size() < max_abandoned)
      st.abandoned.emplace(inv,
                           frontend_state::abandoned_invocation{f->second.node, f->second.sent, f->second.deadline});
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
  auto& p = q.pipe();
  bool within = code == msg::status::ok && !late;
  if (q.cfg == st.cfg)
    st.routes->on_outcome(q.pipeline, within, code != msg::status::error,
                          seconds_of(now));  // an index of the file it came under
  double seconds = r.total_ms / 1e3;
  if (q.sink)
    (*q.sink)(std::move(r));
  else
    st.net->to_client(q.client, std::move(r));
  st.queries.erase(it);
  count_reply(self, &p.name, code, seconds, within);
}

namespace {

// Sends invocation `f` of query `qid`; false when no instance of its model was live (the query is
// then answered with the reason, `why` appended).
bool launch(self_ptr self, uint64_t qid, query& q, in_flight f, const std::string& why) {
  auto& st = self->state;
  auto id = st.next_invocation++;
  auto [it, _] = st.invocations.emplace(id, std::move(f));
  std::string refused;
  if (!send_invocation(self, id, it->second, &refused)) {
    auto model = it->second.model;
    st.invocations.erase(id);
    if (!refused.empty())
      finish(self, qid, msg::status::overloaded, refused);
    else
      finish(self, qid, msg::status::error, "no live instance serves model '" + model + "'" + why);
    return false;
  }
  q.invocations.push_back(id);
  return true;
}

// The Windowed ε-Greedy state of cascade stage `stage` of pipeline `pi` under `skew`.
sched::weg& weg_of(frontend_state& st, size_t pi, size_t stage) {
  auto it = st.skew.find({pi, stage});
  if (it != st.skew.end()) return it->second;
  auto& c = *st.cfg->pipelines[pi].stages[stage].cascade;
  sched::weg_options o;
  static_cast<skew_options&>(o) = *c.skew;
  o.oracle_accuracy = st.cfg->models[c.second_index].accuracy.value_or(100) / 100;
  return st.skew.emplace(std::pair{pi, stage}, sched::weg(o)).first->second;
}

// The stage budgets and stage models of `q`'s pipeline: the routing table's, or, for a query an
// apply left on its old stages, those it was running under.
const slo_split& split_of(const frontend_state& st, const query& q) {
  return q.held ? q.held->split : *st.routes->split(q.pipeline);
}

// False when no instance was live: the query has then been answered and `q` is gone.
bool spawn_stage(self_ptr self, uint64_t qid, query& q, size_t stage, uint32_t item, std::vector<tensor> inputs) {
  auto& st = self->state;
  auto& p = q.pipe();
  auto& models = q.cfg->models;
  auto& split = split_of(st, q);
  auto span = q.deadline - q.arrival;
  in_flight f;
  f.query = qid;
  f.stage = stage;
  f.item = item;
  f.model = stage_model_of(st, q, stage);
  // A stage over versions of its model: the version the request asks for, else one by the weights
  // among those routed now (a version an apply just brought takes traffic once it is loaded).
  if (auto& vs = p.stages[stage].versions; !vs.empty()) {
    std::vector<stage_version> routed;
    for (auto& v : vs)
      if (st.routes->serves(models[v.model_index].name)) routed.push_back(v);
    bool any = std::any_of(routed.begin(), routed.end(), [](auto& v) { return v.weight > 0; });
    f.model = models[pick_version(q.version > 0 || !any ? vs : routed, q.version, st.rng)].name;
  }
  // A cascade's first model finishes by its share of the stage's budget: the second may follow.
  f.deadline = q.arrival + nanoseconds(first_model_finish_ns(p, models, split, stage, span.count()));
  // A client the table maps runs the variant on the device it was mapped to.
  if (q.route) {
    auto& vi = p.stages[stage].variant_indices;
    if (std::any_of(vi.begin(), vi.end(), [&](size_t m) { return models[m].name == q.route->model; })) {
      f.model = q.route->model;
      f.at.emplace(q.route->node, q.route->device);
    }
  }
  // A partitioned model: the layer ranges its fragment's route names, in turn, each by its share
  // of the time left; without a route, the rest of the model from where the client stopped.
  if (auto& whole = models[p.stages[stage].model_index]; whole.partitioned()) {
    if (auto* fr = q.held ? nullptr : st.routes->fragment_route(q.pipeline, q.start, q.slo_ms, st.rng)) {
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
  // A cascade's second model answers alone, by the stage's deadline: under `skew` while no skew
  // pays (the oracle, which tells WEG the class), or where the table runs it alone (IPA's choice).
  auto& c = p.stages[stage].cascade;
  if (c && c->skew && !q.held && !weg_of(st, q.pipeline, stage).cascades()) f.model = models[c->second_index].name;
  bool alone = c && f.model == models[c->second_index].name;
  if (alone) {
    f.deadline = q.arrival + nanoseconds(stage_finish_ns(p, split, stage, span.count()));
    f.fallback = true;
    if (c->skew) f.skew = in_flight::skew_role::oracle_alone;
  }
  // A model that keeps its outputs answers an input it has seen. The load is counted under the
  // configuration in force, of what devices run.
  bool cached = stage_from_cache(self, q, f);
  if (!cached && !launch(self, qid, q, std::move(f), {})) return false;
  if (q.held || cached) return true;
  ++st.load[q.pipeline].stage_invocations[stage];
  if (alone) ++st.load[q.pipeline].fallthroughs[stage];
  return true;
}

// A cascade's first model was unsure: its second runs on the same input by the stage's deadline.
// False when no instance was live (the query has then been answered).
bool fall_through(self_ptr self, uint64_t qid, query& q, in_flight& first) {
  auto& st = self->state;
  auto& p = q.pipe();
  auto& s = p.stages[first.stage];
  auto& split = split_of(st, q);
  auto span = q.deadline - q.arrival;
  in_flight f;
  f.query = qid;
  f.stage = first.stage;
  f.item = first.item;
  f.model = q.cfg->models[s.cascade->second_index].name;
  f.deadline = q.arrival + nanoseconds(stage_finish_ns(p, split, first.stage, span.count()));
  f.checked = first.checked;  // the same input, of the same declared tensor
  f.inputs = std::move(first.inputs);
  f.fallback = true;
  f.skew = first.skew;
  f.compact_class = first.compact_class;
  if (!launch(self, qid, q, std::move(f), " (stage '" + s.name + "' falls through to it)")) return false;
  if (!q.held) ++st.load[q.pipeline].fallthroughs[first.stage];
  return true;
}

// A fragment route: the next layer range of a query's fragment runs on what the last one made. False when no
// instance was live (the query has then been answered).
bool next_range(self_ptr self, query& q, in_flight& done, std::vector<tensor> outputs) {
  in_flight f;
  f.query = done.query;
  f.stage = done.stage;
  f.item = done.item;
  f.model = done.chain.front();
  f.deadline = done.chain_deadlines.front();
  f.chain.assign(done.chain.begin() + 1, done.chain.end());
  f.chain_deadlines.assign(done.chain_deadlines.begin() + 1, done.chain_deadlines.end());
  f.inputs = std::move(outputs);
  return launch(self, done.query, q, std::move(f), {});
}

}  // namespace

bool send_all(self_ptr self, uint64_t qid, query& q, std::vector<query_walk::spawn> spawns) {
  for (auto& sp : spawns)
    if (!spawn_stage(self, qid, q, sp.stage, sp.item, std::move(sp.inputs))) return false;
  if (!q.walk->done()) return true;
  finish(self, qid, msg::status::ok, {});
  return false;
}

namespace {

// WEG hears what a cascade stage under `skew` answered (scheduling/specialization.hpp). False
// when the second model is to run: the compact model was unsure, or it was sure and WEG has the
// oracle check it this time (the query then gets the oracle's answer).
bool observe_skew(frontend_state& st, size_t pi, in_flight& f, const std::vector<tensor>& outputs) {
  auto& w = weg_of(st, pi, f.stage);
  auto& s = st.cfg->pipelines[pi].stages[f.stage];
  int y = top_class(outputs);
  switch (f.skew) {
    case in_flight::skew_role::oracle_alone:
      w.oracle_answered(y);
      return true;
    case in_flight::skew_role::after_unsure:
      w.cascade_answered(y, false, std::nullopt);
      return true;
    case in_flight::skew_role::check:
      w.cascade_answered(f.compact_class, true, y);
      return true;
    case in_flight::skew_role::none:
      break;
  }
  if (!cascade_confident(st.cfg->models[s.model_index], *s.cascade, outputs, f.query, f.stage)) {
    f.skew = in_flight::skew_role::after_unsure;
    return false;
  }
  if (w.check(st.rng)) {
    f.skew = in_flight::skew_role::check;
    f.compact_class = y;
    return false;
  }
  w.cascade_answered(y, true, std::nullopt);
  return true;
}

// The reply `r` from worker `node` to an invocation sent at `sent` for `deadline`: what its round
// trip says of the path (the transit guard's standing queue; the beacon's transfer time).
void observe_path(self_ptr self, const std::string& node, clock_time sent, clock_time deadline,
                  const msg::invocation_result& r) {
  auto& st = self->state;
  auto now = self->clock().now();
  auto round_ms = std::chrono::duration<double, std::milli>(now - sent).count();
  auto worker_ms = static_cast<double>(r.queue_ns + r.exec_ns) / 1e6;
  st.transit.on_reply(node, seconds_of(now), round_ms / 1e3, worker_ms / 1e3,
                      std::chrono::duration<double>(deadline - sent).count());
  if (r.code != msg::status::ok) return;
  auto& t = st.transfer[node];
  if (t.results == 0) t.since = now;
  t.sum_ms += std::max(0.0, round_ms - worker_ms);
  ++t.results;
}

}  // namespace

void on_result(self_ptr self, msg::invocation_result& r) {
  auto& st = self->state;
  // One this frontend placed for another: released here, relayed there.
  if (auto fw = st.forwarded.find(r.id); fw != st.forwarded.end()) {
    st.routes->release(fw->second.model, fw->second.node, fw->second.device);
    st.net->queued.release(fw->second.bytes);
    r.id = fw->second.id;
    auto origin = std::move(fw->second.origin);
    st.forwarded.erase(fw);
    return st.net->to_node(origin, {{}, std::move(r)});
  }
  if (auto d = st.dummies.find(r.id); d != st.dummies.end()) {
    if (!d->second.node.empty()) st.routes->release(d->second.model, d->second.node, d->second.device);
    st.dummies.erase(d);
    return st.net->metrics.count(node_metrics::event::dummy, outcome_label(r.code));
  }
  auto fit = st.invocations.find(r.id);
  if (fit == st.invocations.end()) {
    // Answered already (re-routed, or its query finished): a late reply still says what the path
    // to its worker takes, most of all when the path holds everything past its deadline.
    if (auto a = st.abandoned.find(r.id); a != st.abandoned.end()) {
      observe_path(self, a->second.node, a->second.sent, a->second.deadline, r);
      st.abandoned.erase(a);
    }
    return;
  }
  auto f = std::move(fit->second);
  st.invocations.erase(fit);
  if (!f.from_cache) st.routes->release(f.model, f.node, f.device);
  auto qit = st.queries.find(f.query);
  if (qit == st.queries.end()) return;
  auto& q = qit->second;
  auto& p = q.pipe();
  auto& s = p.stages[f.stage];
  std::erase(q.invocations, r.id);
  auto* spec = q.cfg->find_model(f.model);
  auto version = spec ? spec->version : 1;
  q.timings.push_back({s.name, f.from_cache ? "cache" : r.node, r.device, r.batch, r.queue_ns / 1e6, r.exec_ns / 1e6,
                       f.model, static_cast<uint32_t>(version)});
  if (q.traced) q.spans.emplace_back(f.sent, self->clock().now());
  if (f.device != msg::forwarded_device && !f.from_cache)  // a worker's link, not a dispatcher's
    observe_path(self, f.node, f.sent, f.deadline, r);
  st.net->metrics.stage_done(p.name, s.name, std::chrono::duration<double>(self->clock().now() - f.sent).count());
  if (!f.from_cache)
    st.net->metrics.model_done(spec ? spec->family() : f.model, version, outcome_label(r.code),
                               static_cast<double>(r.queue_ns) / 1e9, static_cast<double>(r.exec_ns) / 1e9);
  if (r.code != msg::status::ok) {
    finish(self, f.query, r.code, "stage '" + s.name + "' on " + r.node + ": " + r.reason);
    return;
  }
  if (f.cached_as) keep_in_cache(self, *f.cached_as, r.outputs);
  if (!f.chain.empty()) return void(next_range(self, q, f, std::move(r.outputs)));
  bool skew = s.cascade && s.cascade->skew && !q.held;  // a held query's stage is WEG's no more
  if (skew && !observe_skew(st, q.pipeline, f, r.outputs)) return void(fall_through(self, f.query, q, f));
  if (s.cascade && !skew && !f.fallback &&
      !cascade_confident(q.cfg->models[s.model_index], *s.cascade, r.outputs, f.query, f.stage))
    return void(fall_through(self, f.query, q, f));
  // A leaf with an SLO of its own: its path is late once the leaf finishes after it.
  if (path_late(p, f.stage, (self->clock().now() - q.arrival).count(), (q.deadline - q.arrival).count()) &&
      std::find(q.late_paths.begin(), q.late_paths.end(), s.name) == q.late_paths.end())
    q.late_paths.push_back(s.name);
  send_all(self, f.query, q, q.walk->on_result(f.stage, std::move(r.outputs), f.item));
}

}  // namespace sloserve::frontend_impl
