#include "sim/simulator.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <queue>
#include <random>
#include <set>
#include <unordered_map>

#include "actors/scaler_core.hpp"
#include "loadgen/arrivals.hpp"
#include "pipelines/query_walk.hpp"
#include "scheduling/balancer.hpp"
#include "scheduling/drop_policy.hpp"
#include "scheduling/epoch.hpp"
#include "scheduling/pipeline_load.hpp"
#include "scheduling/placement.hpp"
#include "scheduling/session_queue.hpp"

namespace sloserve::sim {
namespace {

using ns = int64_t;
constexpr ns ns_per_ms = 1'000'000;
constexpr uint32_t none = UINT32_MAX;

ns to_ns(double ms) {
  return static_cast<ns>(std::llround(ms * 1e6));
}
sched::time_point at(ns t) {
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
  expire
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

// A query's progress through its DAG: query_walk's rules (pipelines/query_walk.hpp), on counts.
struct walk {
  std::vector<uint32_t> outstanding;
  std::vector<uint8_t> finished, joined, has_output;
  bool done = false;
};

struct query {
  uint32_t pipeline = 0;
  uint64_t qid = 0;
  ns sent = 0, arrival = 0, deadline = 0;
  bool measured = false, answered = false;
  uint32_t second = 0;
  uint32_t pending = 0;  // invocations not yet answered
  walk w;
  double queue_ms = 0, exec_ms = 0;
  uint32_t first_node = none;
};

struct invocation {
  uint32_t query = 0, stage = 0, model = 0, device = 0;
  ns deadline = 0;         // at the frontend
  ns device_deadline = 0;  // as the device sees it: the budget runs from when it took it in
  ns enqueued = 0;
  bool live = false;
};

struct dev_session {
  uint32_t model = 0;
  int batch = 1;
  bool draining = false;
  sched::session_queue<uint32_t> queue;
  uint64_t arrived = 0;   // since the scaler last looked
  double budget_sum = 0;  // of those, ms left to their deadlines on arrival
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
};

struct node_state {
  std::string name;
  bool up = true;    // running
  bool seen = true;  // as the frontend and the controller see it (heartbeats)
  std::vector<uint32_t> devices;
};

struct route {
  std::vector<uint32_t> devices;
  std::vector<sched::backend_load> loads;
};

class engine {
 public:
  engine(const cluster_config& cfg, const options& o)
      : cfg_(cfg),
        o_(o),
        rng_(o.seed),
        net_rng_(o.seed * 7 + 1),
        exec_rng_(o.seed * 13 + 3),
        policy_(sched::make_drop_policy(cfg.runtime.drop_policy)),
        balancer_(sched::make_balancer(cfg.runtime.balancer)) {}

  expected<result> run();

 private:
  // The wire.
  ns delay(uint32_t from, uint32_t to) {
    if (from == to) return 20'000;  // in-process hand-over
    double f = std::uniform_real_distribution<double>(1 - o_.network_jitter, 1 + o_.network_jitter)(net_rng_);
    return to_ns(o_.network_ms * f);
  }
  void post(ns t, kind what, uint32_t a = 0, uint64_t b = 0) { events_.push({t, seq_++, what, a, b}); }

  // Frontend.
  void on_send(ns now);
  void on_arrival(ns now, uint32_t q);
  bool spawn(ns now, uint32_t q, uint32_t stage);
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

  // Control plane.
  void on_beacon(ns now);
  void on_scale(ns now);
  void tell_scaler();
  void plan(ns now);
  void adopt(ns now, cluster_placement p, bool immediately, std::vector<instance_assignment> cores = {});
  void on_apply(ns now, uint32_t which);
  void on_fail(ns now, uint32_t n);
  void on_detect(ns now, uint32_t n);
  void on_back(ns now, uint32_t n);

  const cluster_config& cfg_;
  const options& o_;
  std::mt19937_64 rng_, net_rng_, exec_rng_;
  std::unique_ptr<sched::drop_policy> policy_;
  std::unique_ptr<sched::balancer> balancer_;
  std::priority_queue<event, std::vector<event>, later> events_;
  uint64_t seq_ = 0, events_run_ = 0;

  std::unordered_map<std::string, uint32_t> model_id_, node_id_;
  std::vector<node_state> nodes_;
  std::vector<device> devices_;
  std::map<std::pair<std::string, uint32_t>, uint32_t> device_at_;
  uint32_t frontend_ = 0;

  std::vector<route> routes_;                                    // per model
  std::vector<std::unordered_map<uint32_t, size_t>> route_pos_;  // per model: device -> index in its route
  std::vector<std::optional<slo_split>> splits_;                 // per pipeline
  std::vector<std::vector<uint32_t>> stage_model_;               // per pipeline and stage
  std::vector<int64_t> rows_;                                    // per model: rows of its output, for fan-out

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

  // Scheduling.
  std::unique_ptr<sched::pipeline_load> load_;
  std::vector<uint64_t> window_queries_;
  std::vector<std::vector<uint64_t>> window_stages_;
  ns last_epoch_ = 0;
  std::shared_ptr<sched::epoch_result> previous_;
  std::vector<double> planned_for_;
  bool planned_ = false;
  uint64_t epoch_ = 1;
  struct pending_placement {
    cluster_placement placement;
    std::vector<instance_assignment> cores;  // the scaler's: each instance's cores
  };
  std::vector<pending_placement> pending_;
  size_t plans_ = 0, peak_used_ = 0;

  // Scaling: the cluster's scaler_core over a local provisioner, polled as the actor polls it.
  std::unique_ptr<scaler_core> scaler_;
  ns now_ = 0, last_scale_ = 0;
  std::vector<msg::stage_budget> budgets_;  // the routing table's, for deployments that carry none
  std::set<instance_key> applied_;          // instances of the placement applied last
};

// ---- the frontend -------------------------------------------------------------------------

void engine::on_send(ns now) {
  uint32_t p = traffic_[traffic_.size() == 1 ? 0 : std::uniform_int_distribution<size_t>(0, traffic_.size() - 1)(rng_)];
  uint32_t q;
  if (!free_queries_.empty()) {
    q = free_queries_.back();
    free_queries_.pop_back();
  } else {
    q = static_cast<uint32_t>(queries_.size());
    queries_.emplace_back();
  }
  auto& qq = queries_[q];
  qq = query{};
  qq.pipeline = p;
  qq.sent = now;
  qq.measured = now >= warmup_;
  qq.second = qq.measured ? static_cast<uint32_t>((now - warmup_) / (1000 * ns_per_ms)) : 0;
  post(now + delay(none, frontend_), kind::arrival, q);
  // The next request.
  double secs = static_cast<double>(now) / 1e9;
  double rate = o_.rate;
  if (!o_.trace.empty()) {
    double s = std::max(0.0, secs - static_cast<double>(warmup_) / 1e9);
    rate = o_.trace[std::min(o_.trace.size() - 1, static_cast<size_t>(s))];
  }
  ns next = now + static_cast<ns>(gaps_->gap_s(std::max(rate, 1e-3)) * 1e9);
  if (next < end_send_) post(next, kind::send);
}

void engine::on_arrival(ns now, uint32_t q) {
  auto& qq = queries_[q];
  auto& p = cfg_.pipelines[qq.pipeline];
  qq.arrival = now;
  qq.qid = next_qid_++;
  if (!splits_[qq.pipeline]) return finish(now, q, msg::status::error, "not ready: no stage budgets");
  for (auto m : stage_model_[qq.pipeline])
    if (std::none_of(routes_[m].loads.begin(), routes_[m].loads.end(), [](auto& l) { return l.live; }))
      return finish(now, q, msg::status::error, "not ready: a model has no live instance");
  // The SLO has lost the upload: the time since the client sent it.
  double budget_ms = p.slo_ms - static_cast<double>(now - qq.sent) / 1e6;
  if (budget_ms <= 0) return finish(now, q, msg::status::dropped, "stale on arrival");
  qq.deadline = now + to_ns(budget_ms);
  auto n = p.stages.size();
  qq.w.outstanding.assign(n, 0);
  qq.w.finished.assign(n, 0);
  qq.w.joined.assign(n, 0);
  qq.w.has_output.assign(n, 0);
  ++window_queries_[qq.pipeline];
  post(qq.deadline + cfg_.runtime.reply_grace_ms * ns_per_ms, kind::expire, q, qq.qid);
  for (auto r : p.roots()) {
    ++qq.w.outstanding[r];
    if (!spawn(now, q, static_cast<uint32_t>(r))) return;
  }
}

// False when the query was answered (no live instance).
bool engine::spawn(ns now, uint32_t q, uint32_t stage) {
  auto& qq = queries_[q];
  auto& p = cfg_.pipelines[qq.pipeline];
  auto& split = *splits_[qq.pipeline];
  uint32_t inv;
  if (!free_invocations_.empty()) {
    inv = free_invocations_.back();
    free_invocations_.pop_back();
  } else {
    inv = static_cast<uint32_t>(invocations_.size());
    invocations_.emplace_back();
  }
  auto span = static_cast<double>(qq.deadline - qq.arrival);
  auto& f = invocations_[inv];
  f = invocation{};
  f.query = q;
  f.stage = stage;
  f.model = stage_model_[qq.pipeline][stage];
  f.deadline = std::min(qq.deadline, qq.arrival + static_cast<ns>(span * split.finish_offset_ms[stage] / p.slo_ms));
  f.live = true;
  ++qq.pending;
  ++window_stages_[qq.pipeline][stage];
  if (route_invocation(now, inv)) return true;
  f.live = false;
  --qq.pending;
  free_invocations_.push_back(inv);
  finish(now, q, msg::status::error, "no live instance serves model '" + p.stages[stage].model + "'");
  return false;
}

bool engine::route_invocation(ns now, uint32_t inv) {
  auto& f = invocations_[inv];
  auto& r = routes_[f.model];
  auto k = balancer_->pick(r.loads, rng_);
  if (!k) return false;
  ++r.loads[*k].outstanding;
  f.device = r.devices[*k];
  ns d = delay(frontend_, devices_[f.device].node);
  f.device_deadline = f.deadline + d;
  post(now + d, kind::invoke, inv);
  return true;
}

void engine::spawn_from(query& qq, uint32_t stage, uint32_t parent, std::vector<uint32_t>& spawns) {
  auto& s = cfg_.pipelines[qq.pipeline].stages[stage];
  int64_t k = 1;
  if (s.fanout) k = fanout_rows(qq.qid, stage, *s.fanout, rows_[stage_model_[qq.pipeline][parent]]);
  for (int64_t i = 0; i < k; ++i) {
    ++qq.w.outstanding[stage];
    spawns.push_back(stage);
  }
}

void engine::settle(query& qq, std::vector<uint32_t>& spawns) {
  auto& p = cfg_.pipelines[qq.pipeline];
  bool all = true;
  for (auto v : p.topo) {
    if (qq.w.finished[v]) continue;
    auto& s = p.stages[v];
    bool parents_done = std::all_of(s.parents.begin(), s.parents.end(), [&](size_t u) { return qq.w.finished[u]; });
    bool join = s.parents.size() > 1;
    if (join && parents_done && !qq.w.joined[v]) {
      qq.w.joined[v] = 1;
      if (qq.w.has_output[s.parents.front()])
        spawn_from(qq, static_cast<uint32_t>(v), static_cast<uint32_t>(s.parents.front()), spawns);
    }
    if (parents_done && qq.w.outstanding[v] == 0 && (!join || qq.w.joined[v])) qq.w.finished[v] = 1;
    all &= qq.w.finished[v] != 0;
  }
  qq.w.done = all;
}

void engine::walk_result(uint32_t q, uint32_t stage, std::vector<uint32_t>& spawns) {
  auto& qq = queries_[q];
  auto& s = cfg_.pipelines[qq.pipeline].stages[stage];
  if (qq.w.outstanding[stage]) --qq.w.outstanding[stage];
  qq.w.has_output[stage] = 1;
  for (auto c : s.children)
    if (cfg_.pipelines[qq.pipeline].stages[c].parents.size() == 1)
      spawn_from(qq, static_cast<uint32_t>(c), stage, spawns);
  settle(qq, spawns);
}

void engine::on_result(ns now, uint32_t inv, msg::status code) {
  auto& f = invocations_[inv];
  if (!f.live) return;
  f.live = false;
  auto q = f.query;
  auto stage = f.stage;
  auto& pos = route_pos_[f.model];
  if (auto it = pos.find(f.device); it != pos.end() && routes_[f.model].loads[it->second].outstanding > 0)
    --routes_[f.model].loads[it->second].outstanding;
  free_invocations_.push_back(inv);
  auto& qq = queries_[q];
  --qq.pending;
  if (qq.answered) return release(q);
  switch (code) {
    case msg::status::ok:
      break;
    case msg::status::dropped:
      return finish(now, q, code, "early drop by " + std::string(policy_->name()));
    case msg::status::overloaded:
      return finish(now, q, code, "device queue full (runtime.max_queue_length)");
    case msg::status::error:
      return finish(now, q, code, "model not scheduled on the device it was sent to");
  }
  std::vector<uint32_t> spawns;
  walk_result(q, stage, spawns);
  for (auto s : spawns)
    if (!spawn(now, q, s)) return;
  if (qq.w.done) finish(now, q, msg::status::ok, {});
}

void engine::finish(ns now, uint32_t q, msg::status code, const std::string& reason) {
  auto& qq = queries_[q];
  if (qq.answered) return;
  qq.answered = true;
  ns back = now + delay(frontend_, none);
  if (qq.measured && static_cast<ns>(qq.second) * 1000 * ns_per_ms < end_send_ - warmup_) {
    msg::client_reply r;
    r.code = code;
    r.reason = reason;
    r.total_ms = static_cast<double>(now - qq.arrival) / 1e6;
    if (code == msg::status::ok) {
      msg::stage_timing t;
      t.node = qq.first_node == none ? "" : nodes_[qq.first_node].name;
      t.queue_ms = qq.queue_ms;
      t.exec_ms = qq.exec_ms;
      r.timings.push_back(std::move(t));
    }
    auto& p = cfg_.pipelines[qq.pipeline];
    lanes_[0].sent(qq.second);
    lanes_[0].reply(r, qq.second, static_cast<double>(back - qq.sent) / 1e6, 0, p.slo_ms);
  }
  release(q);
}

void engine::release(uint32_t q) {
  auto& qq = queries_[q];
  if (qq.answered && qq.pending == 0) free_queries_.push_back(q), qq.qid = 0;
}

// ---- devices ------------------------------------------------------------------------------

void engine::answer(ns now, uint32_t inv, msg::status code) {
  auto& f = invocations_[inv];
  post(now + delay(devices_[f.device].node, frontend_), kind::result, inv, static_cast<uint64_t>(code));
}

void engine::on_invoke(ns now, uint32_t inv) {
  auto& f = invocations_[inv];
  auto& d = devices_[f.device];
  if (!nodes_[d.node].up || !f.live) return;  // gone with its node; the frontend re-routes it later
  dev_session* s = nullptr;
  for (auto& x : d.sessions)
    if (x.model == f.model && (!s || s->draining)) s = &x;
  if (!s) return answer(now, inv, msg::status::error);
  if (static_cast<int>(s->queue.size()) >= cfg_.runtime.max_queue_length)
    return answer(now, inv, msg::status::overloaded);
  f.enqueued = now;
  ++s->arrived;
  s->budget_sum += static_cast<double>(f.device_deadline - now) / 1e6;
  s->queue.push(at(f.device_deadline), inv);
  if (!d.busy) start_next(now, f.device);
}

void engine::start_next(ns now, uint32_t di) {
  auto& d = devices_[di];
  if (d.busy || d.sessions.empty()) return;
  std::vector<sched::session_queue<uint32_t>::entry> batch, dropped;
  for (size_t k = 0; k < d.sessions.size(); ++k) {
    auto idx = (d.next + k) % d.sessions.size();
    auto& s = d.sessions[idx];
    if (s.queue.empty()) continue;
    auto& m = cfg_.models[s.model];
    int threads = d.threads;
    auto ms_at = [&m, threads](int b) { return m.cores ? m.cores->at(b, threads) : m.profile.latency_ms_at(b); };
    auto l = [&ms_at](int b) { return std::chrono::nanoseconds(to_ns(ms_at(b))); };
    batch.clear();
    dropped.clear();
    s.queue.form_batch(*policy_, at(now), s.batch, l, batch, dropped);
    for (auto& e : dropped) answer(now, e.item, msg::status::dropped);
    if (batch.empty()) continue;
    double ms = ms_at(static_cast<int>(batch.size()));
    if (m.jitter > 0) ms *= std::uniform_real_distribution<double>(1 - m.jitter, 1 + m.jitter)(exec_rng_);
    d.busy = true;
    d.started = now;
    d.running.clear();
    for (auto& e : batch) d.running.push_back(e.item);
    d.next = idx + 1;
    post(now + to_ns(ms + o_.batch_overhead_ms), kind::batch_done, di, d.generation);
    return;
  }
}

void engine::on_batch_done(ns now, uint32_t di, uint64_t generation) {
  auto& d = devices_[di];
  if (generation != d.generation) return;
  for (auto inv : d.running) {
    auto& f = invocations_[inv];
    auto& qq = queries_[f.query];
    qq.queue_ms += static_cast<double>(d.started - f.enqueued) / 1e6;
    qq.exec_ms += static_cast<double>(now - d.started) / 1e6;
    if (qq.first_node == none) qq.first_node = d.node;
    answer(now, inv, msg::status::ok);
  }
  d.running.clear();
  d.busy = false;
  // Draining sessions leave once empty.
  std::erase_if(d.sessions, [](const dev_session& s) { return s.draining && s.queue.empty(); });
  start_next(now, di);
}

// ---- the control plane --------------------------------------------------------------------

void engine::on_beacon(ns now) {
  for (size_t p = 0; p < cfg_.pipelines.size(); ++p) {
    load_->count(p, window_queries_[p], window_stages_[p]);
    window_queries_[p] = 0;
    std::fill(window_stages_[p].begin(), window_stages_[p].end(), 0);
  }
  load_->close_window(cfg_.runtime.beacon_ms / 1000.0);
  auto& so = cfg_.scheduler;
  if (so.policy != scheduler_policy::static_plan && !cfg_.scaler.enabled()) {
    sched::epoch_rule rule{so.epoch_s, so.min_epoch_s, so.rate_band_low, so.rate_band_high,
                           sched::settle_windows(cfg_.runtime.beacon_ms)};
    double since = static_cast<double>(now - last_epoch_) / 1e9;
    if (sched::epoch_due(rule, load_->rates(), planned_ ? &planned_for_ : nullptr, since)) plan(now);
  }
  if (now < end_send_ + 10'000 * ns_per_ms) post(now + cfg_.runtime.beacon_ms * ns_per_ms, kind::beacon);
}

void engine::plan(ns now) {
  auto in = planning_input(cfg_, cfg_.models);
  std::erase_if(in.slots, [&](const sched::device_slot& s) { return !nodes_[node_id_.at(s.node)].seen; });
  sched::set_measured_load(in, load_->rates(), cfg_.scheduler.headroom);
  planned_for_.clear();
  for (auto& p : load_->rates().pipelines) planned_for_.push_back(p.rate);
  planned_ = true;
  last_epoch_ = now;
  auto planned = sched::plan_scaled_epoch(in, previous_.get());
  if (!planned) return;
  previous_ = std::make_shared<sched::epoch_result>(std::move(planned->result));
  ++plans_;
  peak_used_ = std::max(peak_used_, previous_->placement.devices.size());
  adopt(now, epoch_placement(cfg_, in, *previous_, ++epoch_), false);
}

// A placement reaches the workers; each loads the models it lacks (emulated cold start) and the
// routes switch once all have (make before break).
void engine::adopt(ns now, cluster_placement p, bool immediately, std::vector<instance_assignment> cores) {
  ns ready = 0;
  for (auto& [node, sched] : p.schedules) {
    auto n = node_id_.find(node);
    if (n == node_id_.end() || !nodes_[n->second].up) continue;
    for (auto& ds : sched.devices) {
      auto it = device_at_.find({node, ds.device});
      if (it == device_at_.end()) continue;
      auto& d = devices_[it->second];
      for (auto& s : ds.sessions) {
        auto m = model_id_.find(s.model);
        if (m == model_id_.end()) continue;
        bool held = std::any_of(d.sessions.begin(), d.sessions.end(), [&](auto& x) { return x.model == m->second; });
        if (!held) ready = std::max(ready, to_ns(cfg_.models[m->second].load_ms));
      }
    }
  }
  // Cores change in place at once (the controller's resize), apart from the schedule, which
  // waits for the models to load.
  for (auto& c : cores)
    if (auto it = device_at_.find({c.node, c.device}); it != device_at_.end())
      devices_[it->second].threads = static_cast<int>(std::max(1u, c.cores));
  pending_.push_back({std::move(p), std::move(cores)});
  auto which = static_cast<uint32_t>(pending_.size() - 1);
  if (immediately) return on_apply(now, which);
  post(now + delay(frontend_, none) + ready, kind::apply, which);
}

void engine::on_apply(ns now, uint32_t which) {
  auto p = std::move(pending_[which].placement);
  applied_.clear();
  for (auto& [node, sched] : p.schedules)
    for (auto& ds : sched.devices)
      for (auto& ss : ds.sessions) applied_.insert({node, ds.device, ss.model});
  for (auto& [node, sched] : p.schedules) {
    auto n = node_id_.find(node);
    if (n == node_id_.end() || !nodes_[n->second].up) continue;
    for (auto& ds : sched.devices) {
      auto it = device_at_.find({node, ds.device});
      if (it == device_at_.end()) continue;
      auto& d = devices_[it->second];
      std::vector<dev_session> next;
      for (auto& s : ds.sessions) {
        auto m = model_id_.find(s.model);
        if (m == model_id_.end()) continue;
        dev_session x;
        x.model = m->second;
        x.batch = static_cast<int>(std::max(1u, s.batch));
        // A kept session keeps its queue.
        for (auto& old : d.sessions)
          if (old.model == x.model && !old.draining && !old.queue.empty())
            x.queue = std::move(old.queue), old.draining = true;
        next.push_back(std::move(x));
      }
      // What leaves drains what it holds.
      for (auto& old : d.sessions)
        if (!old.queue.empty()) old.draining = true, next.push_back(std::move(old));
      d.sessions = std::move(next);
      d.next = 0;
      if (!d.busy) start_next(now, it->second);
    }
  }
  // The routing table: instances per model, carrying the outstanding counts of those kept.
  std::vector<route> routes(cfg_.models.size());
  std::vector<std::unordered_map<uint32_t, size_t>> pos(cfg_.models.size());
  for (auto& r : p.table.routes) {
    auto m = model_id_.find(r.model);
    if (m == model_id_.end()) continue;
    for (auto& inst : r.instances) {
      auto it = device_at_.find({inst.node, inst.device});
      if (it == device_at_.end()) continue;
      sched::backend_load l;
      l.weight = inst.weight;
      l.live = nodes_[devices_[it->second].node].seen;
      if (auto old = route_pos_[m->second].find(it->second); old != route_pos_[m->second].end())
        l.outstanding = routes_[m->second].loads[old->second].outstanding;
      pos[m->second][it->second] = routes[m->second].devices.size();
      routes[m->second].devices.push_back(it->second);
      routes[m->second].loads.push_back(l);
    }
  }
  routes_ = std::move(routes);
  route_pos_ = std::move(pos);
  for (size_t pi = 0; pi < cfg_.pipelines.size(); ++pi) {
    auto& pl = cfg_.pipelines[pi];
    std::vector<double> budget(pl.stages.size(), -1);
    for (auto& b : p.table.budgets)
      if (b.pipeline == pl.name)
        if (auto s = pl.find_stage(b.stage)) budget[*s] = b.budget_ms;
    if (std::none_of(budget.begin(), budget.end(), [](double b) { return b < 0; }))
      splits_[pi] = offsets_from_budgets(pl, budget);
  }
  budgets_ = p.table.budgets;
  tell_scaler();
}

// The controller tells the scaler which workers are up and which instances it routes to.
void engine::tell_scaler() {
  if (!scaler_) return;
  worker_set w;
  for (auto& n : nodes_)
    if (n.up && n.seen && !n.devices.empty()) w.up.push_back(n.name);
  w.acknowledged.assign(applied_.begin(), applied_.end());
  scaler_->on_workers(w);
}

// The scaler's poll of the monitor: per session of every device, the rate since the last poll,
// the mean budget left on arrival and the queue.
void engine::on_scale(ns now) {
  cluster_load load;
  double dt = static_cast<double>(now - last_scale_) / 1e9;
  last_scale_ = now;
  for (auto& d : devices_) {
    if (!nodes_[d.node].up) continue;
    for (auto& s : d.sessions) {
      if (s.draining) continue;
      session_rate r;
      r.node = nodes_[d.node].name;
      r.device = d.index;
      r.model = cfg_.models[s.model].name;
      r.last_rate = r.rate = dt > 0 ? static_cast<double>(s.arrived) / dt : 0;
      r.budget_ms = s.arrived ? s.budget_sum / static_cast<double>(s.arrived) : 0;
      r.queue_length = static_cast<uint32_t>(s.queue.size());
      load.sessions.push_back(std::move(r));
      s.arrived = 0;
      s.budget_sum = 0;
    }
  }
  scaler_->decide(load, dt);
  if (now < end_send_) post(now + std::chrono::nanoseconds(scaler_->poll_period()).count(), kind::scale);
}

void engine::on_fail(ns now, uint32_t n) {
  nodes_[n].up = false;
  for (auto di : nodes_[n].devices) {
    auto& d = devices_[di];
    ++d.generation;
    d.busy = false;
    d.running.clear();
    d.sessions.clear();
  }
  post(now + cfg_.runtime.peer_timeout_ms * ns_per_ms, kind::detect, n);
}

// The frontend and the controller hear no more heartbeats: out of routing, its invocations sent
// elsewhere, and a plan for the survivors.
void engine::on_detect(ns now, uint32_t n) {
  if (nodes_[n].up) return;
  nodes_[n].seen = false;
  for (size_t m = 0; m < routes_.size(); ++m)
    for (size_t k = 0; k < routes_[m].devices.size(); ++k)
      if (devices_[routes_[m].devices[k]].node == n) routes_[m].loads[k].live = false;
  for (uint32_t inv = 0; inv < invocations_.size(); ++inv) {
    auto& f = invocations_[inv];
    if (!f.live || devices_[f.device].node != n) continue;
    if (auto it = route_pos_[f.model].find(f.device); it != route_pos_[f.model].end())
      routes_[f.model].loads[it->second].outstanding = 0;
    if (route_invocation(now, inv)) continue;
    f.live = false;
    free_invocations_.push_back(inv);
    --queries_[f.query].pending;
    finish(now, f.query, msg::status::error, "no live instance serves the model");
  }
  if (cfg_.scheduler.policy != scheduler_policy::static_plan && !cfg_.scaler.enabled() && planned_) plan(now);
  tell_scaler();
}

void engine::on_back(ns now, uint32_t n) {
  nodes_[n].up = true;
  nodes_[n].seen = true;
  if (scaler_) return tell_scaler();
  if (cfg_.scheduler.policy == scheduler_policy::static_plan || !planned_)
    adopt(now, static_placement(cfg_, ++epoch_), false);
  else
    plan(now);
}

expected<result> engine::run() {
  for (size_t m = 0; m < cfg_.models.size(); ++m) {
    model_id_[cfg_.models[m].name] = static_cast<uint32_t>(m);
    auto& shape = cfg_.models[m].output.shape;
    rows_.push_back(shape.empty() ? 1 : shape.front());
  }
  for (size_t n = 0; n < cfg_.nodes.size(); ++n) {
    node_id_[cfg_.nodes[n].name] = static_cast<uint32_t>(n);
    nodes_.push_back({cfg_.nodes[n].name, true, true, {}});
  }
  bool have_frontend = false;
  for (size_t n = 0; n < cfg_.nodes.size() && !have_frontend; ++n)
    if (cfg_.nodes[n].has_role(role::frontend)) frontend_ = static_cast<uint32_t>(n), have_frontend = true;
  if (!have_frontend) return fail("the cluster has no frontend node");
  for (auto& slot : device_slots(cfg_)) {
    auto n = node_id_.at(slot.node);
    device_at_[{slot.node, slot.device}] = static_cast<uint32_t>(devices_.size());
    nodes_[n].devices.push_back(static_cast<uint32_t>(devices_.size()));
    devices_.push_back({n, slot.device, {}, 0, false, {}, 0, 0});
  }
  for (auto& name : o_.pipelines) {
    auto* p = cfg_.find_pipeline(name);
    if (!p) return fail("no pipeline '" + name + "' in the cluster file");
    traffic_.push_back(static_cast<uint32_t>(p - cfg_.pipelines.data()));
  }
  if (o_.pipelines.empty())
    for (size_t p = 0; p < cfg_.pipelines.size(); ++p) traffic_.push_back(static_cast<uint32_t>(p));
  if (traffic_.empty()) return fail("the cluster file has no pipeline");
  splits_.assign(cfg_.pipelines.size(), std::nullopt);
  routes_.assign(cfg_.models.size(), {});
  route_pos_.assign(cfg_.models.size(), {});
  std::vector<size_t> stages;
  for (auto& p : cfg_.pipelines) {
    stages.push_back(p.stages.size());
    std::vector<uint32_t> ms;
    for (auto& s : p.stages) ms.push_back(static_cast<uint32_t>(s.model_index));
    stage_model_.push_back(std::move(ms));
    window_stages_.emplace_back(p.stages.size(), 0);
  }
  window_queries_.assign(cfg_.pipelines.size(), 0);
  load_ = std::make_unique<sched::pipeline_load>(stages, sched::settle_windows(cfg_.runtime.beacon_ms));
  std::vector<failure> fails = o_.failures;
  for (auto& f : fails) {
    auto n = node_id_.find(f.node);
    if (n == node_id_.end()) return fail("--fail: no node '" + f.node + "' in the cluster file");
    post(to_ns(f.at_s * 1000), kind::fail, n->second);
    if (f.back_s >= 0) post(to_ns(f.back_s * 1000), kind::back, n->second);
  }
  double duration = o_.trace.empty() ? o_.duration_s : static_cast<double>(o_.trace.size());
  warmup_ = to_ns(o_.warmup_s * 1000);
  end_send_ = warmup_ + to_ns(duration * 1000);
  lanes_.emplace_back(static_cast<size_t>(std::ceil(duration)));
  gaps_ = std::make_unique<arrivals>(o_.arrival, o_.cv, o_.seed);
  adopt(0, static_placement(cfg_, epoch_), true);
  if (cfg_.scaler.enabled()) {
    auto prov = std::make_unique<local_provisioner>(cfg_, [this](deployment d) {
      auto p = deployment_placement(cfg_, d, ++epoch_, budgets_);
      adopt(now_, std::move(p), false, d.instances);
    });
    scaler_ = std::make_unique<scaler_core>(cfg_, std::move(prov), "sim");
    scaler_->start();
    tell_scaler();
    post(std::chrono::nanoseconds(scaler_->poll_period()).count(), kind::scale);
  }
  post(0, kind::send);
  post(cfg_.runtime.beacon_ms * ns_per_ms, kind::beacon);
  while (!events_.empty()) {
    auto e = events_.top();
    events_.pop();
    ++events_run_;
    now_ = e.t;
    switch (e.what) {
      case kind::send:
        on_send(e.t);
        break;
      case kind::arrival:
        on_arrival(e.t, e.a);
        break;
      case kind::invoke:
        on_invoke(e.t, e.a);
        break;
      case kind::batch_done:
        on_batch_done(e.t, e.a, e.b);
        break;
      case kind::result:
        on_result(e.t, e.a, static_cast<msg::status>(e.b));
        break;
      case kind::beacon:
        on_beacon(e.t);
        break;
      case kind::scale:
        on_scale(e.t);
        break;
      case kind::apply:
        on_apply(e.t, e.a);
        break;
      case kind::fail:
        on_fail(e.t, e.a);
        break;
      case kind::back:
        on_back(e.t, e.a);
        break;
      case kind::detect:
        on_detect(e.t, e.a);
        break;
      case kind::expire:
        if (queries_[e.a].qid == e.b && !queries_[e.a].answered)
          finish(e.t, e.a, msg::status::error, "no reply by the deadline and runtime.reply_grace_ms");
        break;
    }
  }
  result out;
  out.summary = merge_lanes(lanes_, duration);
  out.events = events_run_;
  out.plans = plans_;
  out.devices = devices_.size();
  out.peak_devices_used = peak_used_;
  if (scaler_) out.scaling = scaler_->stats();
  auto& d = out.described;
  for (auto p : traffic_) d.pipeline += (d.pipeline.empty() ? "" : ",") + cfg_.pipelines[p].name;
  d.address = "sim";
  d.arrival = o_.arrival;
  d.rate = o_.rate;
  d.slo_ms = cfg_.pipelines[traffic_.front()].slo_ms;
  d.duration_s = duration;
  return out;
}

}  // namespace

expected<result> simulate(const cluster_config& cfg, const options& o) {
  engine e(cfg, o);
  return e.run();
}

expected<failure> parse_failure(const std::string& text) {
  auto at_sign = text.find('@');
  if (at_sign == std::string::npos || at_sign == 0) return fail("'" + text + "': expected NODE@SECONDS[-SECONDS]");
  failure f;
  f.node = text.substr(0, at_sign);
  auto times = text.substr(at_sign + 1);
  auto dash = times.find('-');
  try {
    size_t used = 0;
    f.at_s = std::stod(times.substr(0, dash), &used);
    if (used != (dash == std::string::npos ? times.size() : dash)) throw std::invalid_argument("at");
    if (dash != std::string::npos) {
      f.back_s = std::stod(times.substr(dash + 1), &used);
      if (used != times.size() - dash - 1 || f.back_s <= f.at_s) throw std::invalid_argument("back");
    }
  } catch (const std::exception&) {
    return fail("'" + text + "': expected NODE@SECONDS[-SECONDS] with the return after the failure");
  }
  if (f.at_s < 0) return fail("'" + text + "': the failure time must not be negative");
  return f;
}

}  // namespace sloserve::sim
