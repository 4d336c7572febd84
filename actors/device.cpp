// A device: one deadline-ordered queue per scheduled session, early drop by the configured
// policy, and batches run round-robin across sessions, one at a time.

#include "actors/device_state.hpp"
#include "gpu/image.hpp"
#include "scheduling/turn_order.hpp"

namespace sloserve::device_impl {

double seconds_of(clock_time t) {
  return std::chrono::duration<double>(t.time_since_epoch()).count();
}

// The device's name in metrics: NODE/INDEX.
std::string metric_name(const device_state& st) {
  return st.net->self_name() + "/" + std::to_string(st.index);
}

void count_queue(self_ptr self, const session& s) {
  self->state.net->metrics.queue_length(s.model->name, metric_name(self->state), s.queue.size());
}

void answer(self_ptr self, const msg::invocation& inv, msg::status code, std::string reason,
            std::vector<tensor> outputs = {}, uint32_t batch = 0, int64_t queue_ns = 0, int64_t exec_ns = 0) {
  auto& st = self->state;
  auto r = msg::failed_invocation(inv.id, code, std::move(reason), st.net->self_name(), st.index);
  r.outputs = std::move(outputs);
  r.batch = batch;
  r.queue_ns = queue_ns;
  r.exec_ns = exec_ns;
  st.net->to_node(inv.frontend, {{}, std::move(r)});
}

// Forms a batch of session `s` by the drop policy at `now`, answering what it drops. `family`
// requests of the other variants of its prefix family run in the same pass: the prefix runs over
// all of them, so a batch of b costs what b + family costs (the variant's profile covers its
// prefix and its suffix).
std::vector<sched::session_queue<pending>::entry> form(self_ptr self, session& s, clock_time now, int family = 0) {
  auto& st = self->state;
  auto* m = s.model;
  // The profile as the controller last refreshed it (the schedule's scale).
  auto ms = [&st, m, family, scale = s.latency_scale](int b) {
    return st.executor->latency_ms(*m, b + family) * scale;
  };
  auto l = [&ms](int b) { return nanoseconds(static_cast<int64_t>(ms(b) * 1e6)); };
  std::vector<sched::session_queue<pending>::entry> batch, dropped;
  // The window the policy tried: the scheduled batch, or all that is queued if fewer.
  auto window = static_cast<int>(std::min<size_t>(static_cast<size_t>(s.batch), s.queue.size()));
  s.queue.form_batch(*st.policy, now, s.batch, l, batch, dropped);
  for (auto* v : {&batch, &dropped})
    for (auto& e : *v) st.net->queued.release(e.item.bytes);
  if (!dropped.empty() || !batch.empty()) count_queue(self, s);
  for (auto& d : dropped) {
    ++s.load.dropped;
    st.net->metrics.dropped("early_drop");
    auto left = std::chrono::duration<double, std::milli>(d.deadline - now).count();
    answer(self, d.item.inv, msg::status::dropped,
           fmt::format("early drop by {}: {:.1f} ms left, a batch of {} {} needs {:.1f} ms", st.policy->name(), left,
                       window + family, m->name, ms(window)),
           {}, 0, (now - d.item.enqueued).count());
  }
  return batch;
}

// The order in which sessions are offered the device (sched::turn_order): round robin, the
// sessions of higher-priority pipelines first.
std::vector<size_t> session_turns(device_state& st) {
  auto& sessions = st.sessions.all();
  if (st.priorities_for != st.cfg.get()) {
    st.priorities_for = st.cfg.get();
    st.model_priority.clear();
    auto by_index = model_priorities(st.cfg->pipelines, st.cfg->models.size());
    for (size_t m = 0; m < by_index.size(); ++m) st.model_priority[st.cfg->models[m].name] = by_index[m];
  }
  st.session_priority.assign(sessions.size(), 0);
  for (size_t i = 0; i < sessions.size(); ++i)
    if (auto it = st.model_priority.find(sessions[i].model->name); it != st.model_priority.end())
      st.session_priority[i] = it->second;
  sched::turn_order(st.next, st.session_priority, st.order);
  return st.order;
}

// Starts the next batch, round-robin over the sessions; false when none could start. With a
// batch in flight (pipelined executors), only a session that has a full batch queued may stage
// its next one, and the drop policy judges it at the time the running batch should end.
bool start_next(self_ptr self) {
  auto& st = self->state;
  auto& sessions = st.sessions.all();
  if (sessions.empty() || static_cast<int>(st.runs.size()) >= std::max(1, st.executor->depth())) return false;
  auto now = self->clock().now();
  bool staging = !st.runs.empty();
  auto at = staging ? std::max(now, st.runs.back().expected_done) : now;
  for (auto idx : session_turns(st)) {  // a copy: answering may start batches again
    auto& s = sessions[idx];
    if (s.queue.empty()) continue;
    if (staging && (s.model->is_variant() || s.queue.size() < static_cast<size_t>(s.batch))) continue;
    // Whole batches in turn: wait for the batch, unless the most urgent can wait no longer;
    // dummies beyond a batch give way to the work queued.
    if (s.collect > 0 && !s.draining && !staging) {
      std::vector<sched::session_queue<pending>::entry> shed;
      s.queue.shed_padding(
          static_cast<size_t>(s.collect), [](const pending& p) { return p.inv.dummy; }, shed);
      for (auto& e : shed) {
        st.net->queued.release(e.item.bytes);
        answer(self, e.item.inv, msg::status::dropped, "padding not needed: a batch of work is queued");
      }
      if (!shed.empty()) count_queue(self, s);
      auto l = nanoseconds(static_cast<int64_t>(st.executor->latency_ms(*s.model, s.collect) * s.latency_scale * 1e6));
      auto fill = nanoseconds(static_cast<int64_t>(s.collect_ms * 1e6));
      if (auto when =
              s.queue.start_at(now, static_cast<size_t>(s.collect), l, s.queue.front().enqueued, s.last_arrival, fill);
          when > now) {
        if (!st.wake_at || when < *st.wake_at) {
          st.wake_at = when;
          self->delayed_send(self, when - now, batch_done_atom::value, uint64_t{0});
        }
        continue;
      }
    }
    // A variant's turn runs its whole prefix family on this device: one pass of the prefix.
    std::vector<family_group> groups;
    device_state::batch_run run;
    auto member = [&](const session& other) {
      return &other == &s || (s.model->is_variant() && other.model->prefix == s.model->prefix);
    };
    // What each member would bring, for the others' cost: its scheduled batch, or all it has.
    int family = 0;
    for (auto& other : sessions)
      if (member(other))
        family += static_cast<int>(std::min<size_t>(static_cast<size_t>(other.batch), other.queue.size()));
    for (auto& other : sessions) {
      if (!member(other) || other.queue.empty()) continue;
      int own = static_cast<int>(std::min<size_t>(static_cast<size_t>(other.batch), other.queue.size()));
      auto batch = form(self, other, at, family - own);
      if (batch.empty()) continue;
      for (auto& e : batch) run.entries.emplace_back(other.model, std::move(e));
      groups.push_back({other.model, {}});
    }
    if (run.entries.empty()) continue;
    run.token = ++st.token;
    run.started = now;
    run.expected_done =
        at + nanoseconds(static_cast<int64_t>(st.executor->latency_ms(*s.model, static_cast<int>(run.entries.size())) *
                                              s.latency_scale * 1e6));
    st.next = idx + 1;
    // Inputs point into the run's entries, which stay put (a deque keeps its elements) until done.
    auto& r = st.runs.emplace_back(std::move(run));
    size_t g = 0;
    for (size_t i = 0; i < r.entries.size(); ++i) {
      if (i > 0 && r.entries[i].first != r.entries[i - 1].first) ++g;
      groups[g].inputs.push_back(&r.entries[i].second.item.inv.inputs);
    }
    auto outcome = groups.size() == 1 && !s.model->is_variant() ? st.executor->start(*groups[0].model, groups[0].inputs)
                                                                : st.executor->start_family(groups);
    if (outcome && !outcome->error.empty()) {
      for (auto& [m, e] : r.entries)
        answer(self, e.item.inv, msg::status::error, "device " + std::to_string(st.index) + ": " + outcome->error);
      st.runs.pop_back();
      continue;
    }
    auto busy = outcome ? outcome->busy : nanoseconds(0);
    r.outcome = std::move(outcome);
    if (busy.count() > 0)
      self->delayed_send(self, busy, batch_done_atom::value, r.token);
    else
      self->send(self, batch_done_atom::value, r.token);  // a pipelined executor finishes it there
    return true;
  }
  return false;
}

void run_next(self_ptr self) {
  while (start_next(self)) {
  }
}

void on_done(self_ptr self, uint64_t token) {
  auto& st = self->state;
  if (st.runs.empty() || st.runs.front().token != token) return;
  auto& r = st.runs.front();
  if (!r.outcome) r.outcome = st.executor->finish();  // waits for the oldest pipelined batch
  for (auto& note : st.executor->take_notes()) spdlog::info("{}: device {}: {}", st.net->self_name(), st.index, note);
  auto& outcome = *r.outcome;
  auto now = self->clock().now();
  auto exec_ns = (now - r.started).count();
  auto b = static_cast<uint32_t>(r.entries.size());
  st.net->metrics.busy(metric_name(st), seconds_of(r.started), seconds_of(now));
  for (size_t i = 0, from = 0; i <= r.entries.size(); ++i)
    if (i == r.entries.size() || r.entries[i].first != r.entries[from].first) {
      st.net->metrics.batch(r.entries[from].first->name, static_cast<int>(i - from));
      from = i;
    }
  // The batch's time against its model's profile, for the controller's online profile refresh:
  // batches of one model only (a family's mixed batch has no one profile to compare with).
  // A pipelined executor stages a batch while the one before runs: it runs from when that one ended.
  auto ran_ns = (now - std::max(r.started, st.last_done)).count();
  st.last_done = now;
  if (outcome.error.empty() &&
      std::all_of(r.entries.begin(), r.entries.end(), [&](auto& x) { return x.first == r.entries.front().first; }))
    if (auto* s = st.sessions.find(r.entries.front().first->name)) {
      s->load.exec_ms += static_cast<double>(ran_ns) / 1e6;
      s->load.expected_exec_ms += st.executor->latency_ms(*r.entries.front().first, static_cast<int>(b));
      ++s->load.exec_batches;
    }
  for (size_t i = 0; i < r.entries.size(); ++i) {
    auto& [m, e] = r.entries[i];
    auto queue_ns = (r.started - e.item.enqueued).count();
    for (auto& s : st.sessions.all())
      if (s.model == m && !e.item.inv.dummy) {
        ++s.load.completed;
        s.latency_sum_ms += (now - e.item.enqueued).count() / 1e6;
      }
    auto where = "device " + std::to_string(st.index) + ": ";
    if (!outcome.error.empty())
      answer(self, e.item.inv, msg::status::error, where + outcome.error, {}, b, queue_ns, exec_ns);
    else if (i < outcome.failed.size() && !outcome.failed[i].empty())
      answer(self, e.item.inv, msg::status::error, where + outcome.failed[i], {}, b, queue_ns, exec_ns);
    else if (i < outcome.outputs.size())
      answer(self, e.item.inv, msg::status::ok, {},
             e.item.inv.dummy ? std::vector<tensor>{} : std::move(outcome.outputs[i]), b, queue_ns, exec_ns);
    else
      answer(self, e.item.inv, msg::status::error, where + "the executor returned no output for this request", {}, b,
             queue_ns, exec_ns);
  }
  st.runs.pop_front();
  run_next(self);
}

// Drops draining sessions that have been idle long enough for every frontend to have moved on.
void prune(self_ptr self) {
  auto& st = self->state;
  std::vector<std::string> before;
  for (auto& s : st.sessions.all()) before.push_back(s.model->name);
  st.sessions.prune(self->clock().now(), std::chrono::milliseconds(2 * st.cfg->runtime.beacon_ms),
                    [&](const model_spec* m) { return st.is_running(m); });
  // A model an apply removed is unloaded once its session has drained.
  for (auto& name : before)
    if (!st.sessions.find(name) && !st.cfg->find_model(name)) {
      spdlog::info("{}: device {}: unloading '{}' (no longer in the configuration)", st.net->self_name(), st.index,
                   name);
      st.executor->unload(name);
    }
}

void on_invocation(self_ptr self, msg::invocation& inv) {
  auto& st = self->state;
  prune(self);
  auto* s = st.sessions.find(inv.model);
  auto where = "device " + std::to_string(st.index) + " of " + st.net->self_name();
  if (!st.broken.empty()) return answer(self, inv, msg::status::error, where + ": " + st.broken);
  if (!s) {
    // A model its schedule asked for that would not load says why (a switch it does not fit).
    auto failed = st.load_failures.find(inv.model);
    return answer(self, inv, msg::status::error,
                  failed != st.load_failures.end()
                      ? "model '" + inv.model + "' could not load on " + where + ": " + failed->second
                      : "model '" + inv.model + "' is not scheduled on " + where);
  }
  if (inv.inputs.empty()) return answer(self, inv, msg::status::error, "invocation carries no input tensor");
  // Once per node: inputs the frontend of this node checked at ingress are not checked again.
  if (!inv.checked)
    if (auto ok = check_input(inv.inputs.front(), *s->model); !ok)
      return answer(self, inv, msg::status::error, ok.error());
  // Padding requests (dummies) fill the batches; the session's load reports only real work.
  if (!inv.dummy) {
    ++s->load.arrived;
    s->budget_sum_ms += static_cast<double>(inv.budget_ns) / 1e6;
    s->budgets.add(static_cast<double>(inv.budget_ns) / 1e6);
  }
  if (static_cast<int>(s->queue.size()) >= st.cfg->runtime.max_queue_length) {
    st.net->metrics.dropped("queue_full");
    return answer(self, inv, msg::status::overloaded,
                  "queue of " + inv.model + " on " + where + " holds " +
                      std::to_string(st.cfg->runtime.max_queue_length) + " requests (runtime.max_queue_length)");
  }
  auto bytes = payload_bytes(inv.inputs);
  if (!st.net->queued.try_charge(bytes, st.cfg->runtime.max_queued_mb << 20)) {
    st.net->metrics.dropped("payload_budget");
    return answer(self, inv, msg::status::overloaded,
                  fmt::format("node '{}' holds {:.1f} MB of queued payloads (runtime.max_queued_mb {})",
                              st.net->self_name(), st.net->queued.used() / 1048576.0, st.cfg->runtime.max_queued_mb));
  }
  auto now = self->clock().now();
  s->last_arrival = now;
  // A real device reads its mailbox only between batches: time the invocation waited there
  // counts as queueing, and its deadline runs from when the worker took it in.
  auto arrived = inv.received_ns > 0 ? std::min(now, clock_time(nanoseconds(inv.received_ns))) : now;
  auto deadline = arrived + nanoseconds(inv.budget_ns);
  s->queue.push(deadline, pending{std::move(inv), arrived, bytes});
  run_next(self);
  count_queue(self, *s);  // run_next leaves the sessions where they are
}

device_actor spawn_device_with(caf::actor_system& sys, actor_args args, uint32_t index,
                               std::unique_ptr<device_executor> made, std::string broken) {
  auto executor = std::make_shared<std::unique_ptr<device_executor>>(std::move(made));
  bool blocks = (*executor)->blocks();
  auto init = [args, index, executor, broken](self_ptr self) -> device_actor::behavior_type {
    auto& st = self->state;
    st.cfg = args.cfg;
    st.net = args.net;
    st.index = index;
    st.sessions = device_sessions(*st.cfg, index);
    auto* node = st.cfg->find_node(st.net->self_name());
    auto* group = node ? node->group_of(static_cast<int>(index)) : nullptr;
    st.threads = group ? group->threads : 1;
    st.executor = std::move(*executor);
    for (auto& note : st.executor->take_notes()) spdlog::info("{}: device {}: {}", st.net->self_name(), index, note);
    st.broken = broken;
    st.policy = sched::make_drop_policy(args.cfg->runtime.drop_policy);
    return {
        [=](msg::invocation& inv) { on_invocation(self, inv); },
        [=](msg::device_schedule& ds) -> caf::result<std::vector<msg::unloaded_model>> {
          // The reply comes once every model it could load is loaded and warm, and lists those
          // it could not.
          auto& st = self->state;
          ++st.schedule_seq;
          auto wait = cold_start(self, ds);
          if (wait.count() <= 0) return apply_schedule(self, ds);
          st.loading = std::move(ds);
          st.owed.push_back(self->make_response_promise<std::vector<msg::unloaded_model>>());
          self->delayed_send(self, wait, loaded_atom::value, st.schedule_seq);
          return st.owed.back();
        },
        [=](loaded_atom, uint64_t seq) {
          auto& st = self->state;
          if (seq != st.schedule_seq || !st.loading) return;  // a later schedule replaced it
          auto ds = std::move(*st.loading);
          apply_schedule(self, ds);
        },
        [=](msg::resize& r) {
          // Vertical scaling in place: the next batch runs with the new intra-op thread count.
          // Batches run one at a time on this device, so none is resized while it runs.
          auto& st = self->state;
          auto threads = std::max<int>(1, static_cast<int>(r.threads));
          if (threads == st.threads) return;
          spdlog::info("{}: device {}: intra-op threads {} -> {}", st.net->self_name(), st.index, st.threads, threads);
          st.threads = threads;
          st.executor->set_threads(threads);
        },
        [=](batch_done_atom, uint64_t token) {
          if (token != 0) return on_done(self, token);
          self->state.wake_at.reset();  // a collecting session's wait is over
          run_next(self);
        },
        [=](new_config& c) { return reload_files(self, c); },
        [=](stats_atom) {
          prune(self);
          device_load out{self->state.sessions.take_load(self->clock().now())};
          return out;
        },
    };
  };
  // An executor that blocks in execute() gets a thread of its own instead of a scheduler worker.
  if (!blocks) return sys.spawn(init);
  return sys.spawn<caf::detached>(init);
}

}  // namespace sloserve::device_impl

namespace sloserve {

using device_impl::spawn_device_with;

device_actor spawn_device(caf::actor_system& sys, actor_args args, uint32_t index, device_kind kind) {
  auto* node = args.cfg->find_node(args.net->self_name());
  auto* group = node ? node->group_of(static_cast<int>(index)) : nullptr;
  auto executor = kind == device_kind::network_switch && group
                      ? expected<std::unique_ptr<device_executor>>(make_switch_executor(*group))
                      : make_executor(kind, args.incarnation * 1000 + index, group ? group->threads : 1,
                                      group ? group->type : "", node ? node->share_of(static_cast<int>(index)) : 1);
  if (!executor) {
    spdlog::error("{}: device {}: {}; it serves nothing", args.net->self_name(), index, executor.error());
    return spawn_device_with(sys, std::move(args), index, make_emulated_executor(index), executor.error());
  }
  return spawn_device_with(sys, std::move(args), index, std::move(*executor), {});
}

device_actor spawn_device(caf::actor_system& sys, actor_args args, uint32_t index,
                          std::unique_ptr<device_executor> executor) {
  return spawn_device_with(sys, std::move(args), index, std::move(executor), {});
}

}  // namespace sloserve
