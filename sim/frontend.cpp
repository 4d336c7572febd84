// The simulated frontend: arrivals, the query walk, routing, replies.

#include <cmath>

#include "pipelines/query_walk.hpp"
#include "sim/engine.hpp"

namespace sloserve::sim::detail {

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
  if (tenant_pick_) qq.tenant = tenant_of_[(*tenant_pick_)(rng_)];
  qq.sent = now;
  qq.measured = now >= warmup_;
  qq.second = qq.measured ? static_cast<uint32_t>((now - warmup_) / (1000 * ns_per_ms)) : 0;
  ns uplink = 0;
  if (!o_.uplink_ms.empty())
    uplink = to_ns(o_.uplink_ms[std::uniform_int_distribution<size_t>(0, o_.uplink_ms.size() - 1)(rng_)]);
  post(now + uplink + delay(none, frontend_), kind::arrival, q);
  // The next request: a trace's silent seconds send nothing.
  ns next = end_send_;
  if (o_.trace.empty()) {
    next = now + static_cast<ns>(gaps_->gap_s(o_.rate) * 1e9);
  } else {
    double at = next_arrival_s(*gaps_, o_.trace, 1, static_cast<double>(now - warmup_) / 1e9);
    if (at < static_cast<double>(end_send_ - warmup_) / 1e9) next = warmup_ + static_cast<ns>(at * 1e9);
  }
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
  auto v = admission_.admit(qq.pipeline, qq.tenant, static_cast<double>(now) / 1e9);
  if (v.result != sched::admission::outcome::admitted) {
    if (v.result != sched::admission::outcome::capped) ++window_shed_[qq.pipeline];  // offered: the plan sees it
    return finish(now, q, msg::status::overloaded, v.why);
  }
  qq.admitted = true;
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

// As the frontend draws it: one by the weights among the versions routed now (all of them when
// none with a weight is).
uint32_t engine::routed_version(const std::vector<stage_version>& vs) {
  routed_versions_.clear();
  for (auto& v : vs)
    if (!routes_[v.model_index].devices.empty()) routed_versions_.push_back(v);
  bool any = std::any_of(routed_versions_.begin(), routed_versions_.end(), [](auto& v) { return v.weight > 0; });
  return static_cast<uint32_t>(pick_version(any ? routed_versions_ : vs, 0, version_rng_));
}

// False when the query was answered (no live instance).
bool engine::spawn(ns now, uint32_t q, uint32_t stage) {
  auto& qq = queries_[q];
  auto& p = cfg_.pipelines[qq.pipeline];
  auto& split = *splits_[qq.pipeline];
  uint32_t inv = take_invocation();
  auto& f = invocations_[inv];
  f.query = q;
  f.stage = stage;
  f.model = stage_model_[qq.pipeline][stage];
  if (auto& vs = p.stages[stage].versions; !vs.empty()) f.model = routed_version(vs);
  if (stage < 64 && !(qq.stages_ran >> stage & 1)) {
    qq.stages_ran |= uint64_t{1} << stage;
    qq.accuracy *= accuracy_[f.model];
  }
  // A cascade's first model finishes by its share of the stage's budget, as at the frontend; its
  // second, where the table runs it alone, by the stage's deadline.
  auto& c = p.stages[stage].cascade;
  f.fallback = c && f.model == c->second_index;
  f.deadline =
      qq.arrival + (f.fallback ? stage_finish_ns(p, split, stage, qq.deadline - qq.arrival)
                               : first_model_finish_ns(p, cfg_.models, split, stage, qq.deadline - qq.arrival));
  if (f.fallback) ++window_fallthroughs_[qq.pipeline][stage];
  if (o_.on_invocation) o_.on_invocation(qq.qid, qq.pipeline, cfg_.models[f.model].name, f.deadline - qq.arrival);
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

// A free invocation slot, reset.
uint32_t engine::take_invocation() {
  uint32_t inv;
  if (!free_invocations_.empty()) {
    inv = free_invocations_.back();
    free_invocations_.pop_back();
  } else {
    inv = static_cast<uint32_t>(invocations_.size());
    invocations_.emplace_back();
  }
  invocations_[inv] = invocation{};
  return inv;
}

// The cascade's second model on the same input, by the stage's deadline. False when the query
// was answered (no live instance).
bool engine::fall_through(ns now, uint32_t q, uint32_t stage) {
  auto& qq = queries_[q];
  auto& p = cfg_.pipelines[qq.pipeline];
  auto& split = *splits_[qq.pipeline];
  uint32_t inv = take_invocation();
  auto& f = invocations_[inv];
  f.query = q;
  f.stage = stage;
  f.model = static_cast<uint32_t>(p.stages[stage].cascade->second_index);
  f.deadline = qq.arrival + stage_finish_ns(p, split, stage, qq.deadline - qq.arrival);
  if (o_.on_invocation) o_.on_invocation(qq.qid, qq.pipeline, cfg_.models[f.model].name, f.deadline - qq.arrival);
  f.live = true;
  f.fallback = true;
  ++qq.pending;
  ++window_fallthroughs_[qq.pipeline][stage];
  // The second model answers the stage: the query's accuracy is its, not the first's.
  if (stage < 64) qq.accuracy = qq.accuracy / accuracy_[p.stages[stage].model_index] * accuracy_[f.model];
  if (route_invocation(now, inv)) return true;
  f.live = false;
  --qq.pending;
  free_invocations_.push_back(inv);
  finish(now, q, msg::status::error, "no live instance serves model '" + cfg_.models[f.model].name + "'");
  return false;
}

bool engine::route_invocation(ns now, uint32_t inv) {
  auto& f = invocations_[inv];
  auto& r = routes_[f.model];
  r.turn.clock = static_cast<double>(now) / 1e9;
  auto k = balancer_->dispatch(r.loads, r.turn, rng_);
  if (!k) return false;
  ++r.loads[*k].outstanding;
  f.device = r.devices[*k];
  ns d = delay(frontend_, devices_[f.device].node);
  f.device_deadline = f.deadline + d;
  post(now + d, kind::invoke, inv);
  // Where the batch it joined owes its padding, the dummies close it now; a batch it opened is
  // closed by its deadline.
  auto model = f.model;
  pad(now, model, f.deadline - now);
  if (auto due = balancer_->padding_deadline(r.loads, r.turn); due && *due != r.deadline_told) {
    r.deadline_told = *due;
    post(std::max(now, static_cast<ns>(std::ceil(*due * 1e9))), kind::pad, model);
  }
  return true;
}

void engine::pad(ns now, uint32_t model, ns budget) {
  auto& r = routes_[model];
  r.turn.clock = static_cast<double>(now) / 1e9;
  for (auto n = balancer_->padding_due(r.loads, r.turn); n > 0; --n) {
    auto k = balancer_->dispatch_padding(r.loads, r.turn, rng_);
    if (!k) break;
    ++r.loads[*k].outstanding;
    send_dummy(now, model, r.devices[*k], budget, true);
  }
}

void engine::spawn_from(query& qq, uint32_t stage, uint32_t parent, std::vector<uint32_t>& spawns) {
  auto& s = cfg_.pipelines[qq.pipeline].stages[stage];
  int64_t k = 1;
  auto rows = rows_[stage_model_[qq.pipeline][parent]];
  if (s.items)
    k = drawn_items(qq.qid, stage, s.items->score_above, rows);
  else if (s.fanout)
    k = fanout_rows(qq.qid, stage, *s.fanout, rows);
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
  bool fallback = f.fallback;
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
  // A cascade's first model without `pass_rate` has no outputs here to judge: every request
  // falls through.
  auto& st = cfg_.pipelines[qq.pipeline].stages[stage];
  if (st.cascade && !fallback && !cascade_confident(cfg_.models[st.model_index], *st.cascade, {}, qq.qid, stage))
    return void(fall_through(now, q, stage));
  // A leaf with an SLO of its own: its path is late once the leaf finishes after it.
  auto& p = cfg_.pipelines[qq.pipeline];
  if (stage < 64 && path_late(p, stage, now - qq.arrival, qq.deadline - qq.arrival))
    qq.late_paths |= uint64_t{1} << stage;
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
  auto& p = cfg_.pipelines[qq.pipeline];
  bool within = code == msg::status::ok && !qq.late_paths && now <= qq.deadline;
  if (qq.admitted)
    admission_.on_outcome(qq.pipeline, within, code != msg::status::error, static_cast<double>(now) / 1e9);
  if (qq.measured && static_cast<ns>(qq.second) * 1000 * ns_per_ms < end_send_ - warmup_) {
    msg::client_reply r;
    r.code = code;
    r.reason = reason;
    r.total_ms = static_cast<double>(now - qq.arrival) / 1e6;
    if (code == msg::status::ok) {
      accuracy_sum_ += qq.accuracy;
      ++accuracy_n_;
      msg::stage_timing t;
      t.node = qq.first_node == none ? "" : nodes_[qq.first_node].name;
      t.queue_ms = qq.queue_ms;
      t.exec_ms = qq.exec_ms;
      r.timings.push_back(std::move(t));
    }
    if (code == msg::status::ok)
      for (size_t s = 0; s < p.stages.size() && s < 64; ++s)
        if (qq.late_paths >> s & 1) r.late_paths.push_back(p.stages[s].name);
    auto latency_ms = static_cast<double>(back - qq.sent) / 1e6;
    if (by_pipeline_.size() <= qq.pipeline) by_pipeline_.resize(cfg_.pipelines.size());
    bool in_time = code == msg::status::ok && r.late_paths.empty() && latency_ms <= p.slo_ms;
    bool shed = code == msg::status::overloaded && !qq.admitted;
    auto& counted = by_pipeline_[qq.pipeline];
    ++counted.sent, counted.within_slo += in_time, counted.shed += shed;
    if (qq.tenant >= 0) {
      auto& t = by_tenant_[static_cast<size_t>(qq.tenant)];
      ++t.sent, t.within_slo += in_time, t.shed += shed;
    }
    lanes_[0].sent(qq.second);
    lanes_[0].reply(r, qq.second, latency_ms, 0, p.slo_ms);
  }
  release(q);
}

void engine::release(uint32_t q) {
  auto& qq = queries_[q];
  if (qq.answered && qq.pending == 0) free_queries_.push_back(q), qq.qid = 0;
}

}  // namespace sloserve::sim::detail
