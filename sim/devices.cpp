// Simulated devices: deadline queues, the drop policy, batches round-robin over sessions (the
// higher priorities first, sched::turn_order).

#include "scheduling/turn_order.hpp"
#include "sim/engine.hpp"

namespace sloserve::sim::detail {

void engine::answer(ns now, uint32_t inv, msg::status code) {
  auto& f = invocations_[inv];
  if (f.dummy) {  // run and discarded
    f.live = false;
    free_invocations_.push_back(inv);
    auto& pos = route_pos_[f.model];
    if (auto it = pos.find(f.device);
        f.counted && it != pos.end() && routes_[f.model].loads[it->second].outstanding > 0)
      --routes_[f.model].loads[it->second].outstanding;
    return;
  }
  post(now + delay(devices_[f.device].node, frontend_), kind::result, inv, static_cast<uint64_t>(code));
}

void engine::on_dummy(ns now, uint32_t source, uint64_t generation) {
  // Padding goes on while the last requests may still be collected into batches (as the
  // cluster's frontends pad while the table says so).
  if (generation != dummy_generation_ || source >= dummies_.size() || now >= end_send_ + 2 * dummies_[source].budget)
    return;
  auto& d = dummies_[source];
  post(now + to_ns(1000 / d.rate), kind::dummy, source, generation);
  // Where the model's instances take whole batches in turn, its dummies go with the batches.
  auto& r = routes_[d.model];
  if (sched::takes_whole_batches(r.loads)) return;
  send_dummy(now, d.model, d.device, d.budget, false);
}

void engine::send_dummy(ns now, uint32_t model, uint32_t device, ns budget, bool counted) {
  if (now >= warmup_ && now < end_send_) ++dummies_sent_;
  auto inv = take_invocation();
  auto& f = invocations_[inv];
  f.model = model;
  f.device = device;
  f.dummy = true;
  f.counted = counted;
  f.live = true;
  ns wire = delay(frontend_, devices_[device].node);
  f.deadline = now + budget;
  f.device_deadline = f.deadline + wire;
  post(now + wire, kind::invoke, inv);
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
  s->last_arrival = now;
  ++s->arrived;
  s->budget_sum += static_cast<double>(f.device_deadline - now) / 1e6;
  s->budgets.add(static_cast<double>(f.device_deadline - now) / 1e6);
  s->queue.push(at(f.device_deadline), inv);
  if (!d.busy) start_next(now, f.device);
}

void engine::start_next(ns now, uint32_t di) {
  auto& d = devices_[di];
  if (d.busy || d.sessions.empty()) return;
  std::vector<sched::session_queue<uint32_t>::entry> batch, dropped;
  // Round robin; where the sessions serve pipelines of different priorities, the higher first.
  size_t n = d.sessions.size();
  turn_priority_.resize(n);
  bool ranked = false;
  for (size_t i = 0; i < n; ++i) {
    turn_priority_[i] = model_priority_[d.sessions[i].model];
    ranked |= turn_priority_[i] != turn_priority_[0];
  }
  std::vector<size_t> order;  // a copy where ranked: what the loop does may start another device
  if (ranked) sched::turn_order(d.next, turn_priority_, turn_order_), order = turn_order_;
  for (size_t k = 0; k < n; ++k) {
    auto idx = ranked ? order[k] : (d.next + k) % n;
    auto& s = d.sessions[idx];
    if (s.queue.empty()) continue;
    auto& m = cfg_.models[s.model];
    int threads = d.threads;
    double slow = m.share_slowdown(d.share);
    auto& profile = m.profile_for(d.type);
    auto ms_at = [&m, &profile, threads, slow](int b) {
      return (m.cores ? m.cores->at(b, threads) : profile.latency_ms_at(b)) * slow;
    };
    // Early drop judges by the profile the planner last adopted (the schedule's scale).
    auto scale = scales_.find(m.name);
    double adopted = scale == scales_.end() ? 1.0 : scale->second;
    auto l = [&ms_at, adopted](int b) { return std::chrono::nanoseconds(to_ns(ms_at(b) * adopted)); };
    // Whole batches in turn: wait for the batch, unless the most urgent can wait no longer;
    // dummies beyond a batch give way to the work queued.
    if (s.collect > 0 && !s.draining) {
      dropped.clear();
      s.queue.shed_padding(
          static_cast<size_t>(s.collect), [this](uint32_t i) { return invocations_[i].dummy; }, dropped);
      for (auto& e : dropped) answer(now, e.item, msg::status::dropped);
      auto when = s.queue.start_at(at(now), static_cast<size_t>(s.collect), l(s.collect),
                                   at(invocations_[s.queue.front()].enqueued), at(s.last_arrival),
                                   std::chrono::nanoseconds(to_ns(s.collect_ms)));
      if (when > at(now)) {
        ns t = (when - at(now)).count() + now;
        if (wake_at_.size() <= di) wake_at_.resize(devices_.size(), 0);
        if (wake_at_[di] == 0 || t < wake_at_[di]) wake_at_[di] = t, post(t, kind::wake, di);
        continue;
      }
    }
    batch.clear();
    dropped.clear();
    s.queue.form_batch(*policy_, at(now), s.batch, l, batch, dropped);
    for (auto& e : dropped) answer(now, e.item, msg::status::dropped);
    if (batch.empty()) continue;
    double said = ms_at(static_cast<int>(batch.size()));
    double ms = said;
    if (auto [lo, hi] = m.run_factors(); lo < hi) ms *= std::uniform_real_distribution<double>(lo, hi)(exec_rng_);
    if (o_.slowdown_factor != 1 && now >= to_ns(o_.slowdown_after_s * 1000)) ms *= o_.slowdown_factor;
    auto& x = exec_[s.model];
    x.took += ms, x.said += said, x.batches += 1;
    if (batch_sizes_.size() <= s.model) batch_sizes_.resize(s.model + 1);
    auto& sizes = batch_sizes_[s.model];
    if (sizes.size() <= batch.size()) sizes.resize(batch.size() + 1, 0);
    ++sizes[batch.size()];
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
    if (f.dummy) {
      answer(now, inv, msg::status::ok);
      continue;
    }
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

}  // namespace sloserve::sim::detail
