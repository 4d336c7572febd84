// The frontend's sends: each invocation to the instance the balancer picks (or to the frontend that
// dispatches its model for all), the padding requests (dummies) that close batches, and the
// invocations other frontends forward to this one as their model's dispatcher.

#include <algorithm>

#include "actors/frontend_state.hpp"

namespace sloserve::frontend_impl {

namespace {

// Sends one padding request (dummy) of `model` to (node, device): an invocation of the model's
// input, which the device runs in its batch and answers without outputs. `counted`: it took a
// place in the turn (released on its reply).
void send_dummy(self_ptr self, const std::string& model, const std::string& node, uint32_t device, int64_t budget_ns,
                bool counted, clock_time now) {
  auto& st = self->state;
  auto* m = st.cfg->find_model(model);
  if (!m) return;
  auto& inputs = st.dummy_inputs[model];
  if (inputs.empty()) inputs.push_back(make_tensor(m->input, 0, m->input_name));
  msg::invocation inv;
  inv.id = st.next_invocation++;
  inv.frontend = st.net->self_name();
  inv.model = model;
  inv.device = device;
  inv.budget_ns = budget_ns;
  inv.inputs = inputs;
  inv.dummy = true;
  st.dummies.emplace(inv.id, frontend_state::dummy_sent{now, counted ? model : "", counted ? node : "", device});
  ++st.dummies_sent;
  st.net->metrics.count(node_metrics::event::dummy, "sent");
  st.net->to_node(node, {{}, std::move(inv)});
}

// Invocation `id` of `model` for `device`, to finish by `deadline`, its result to this frontend.
msg::invocation invocation(self_ptr self, uint64_t id, const std::string& model, uint32_t device, clock_time deadline,
                           const std::vector<tensor>& inputs, clock_time now) {
  msg::invocation inv;
  inv.id = id;
  inv.frontend = self->state.net->self_name();
  inv.model = model;
  inv.device = device;
  inv.budget_ns = (deadline - now).count();
  inv.inputs = inputs;
  return inv;
}

// Sends invocation `id` of `model` to instance `to`, to finish by `deadline`, and the dummies that
// close the batch it joined; a batch it opened is closed by its deadline.
void send_to(self_ptr self, uint64_t id, const std::string& model, const frontend_routes::backend& to,
             clock_time deadline, const std::vector<tensor>& inputs, bool checked, clock_time now) {
  auto& st = self->state;
  auto inv = invocation(self, id, model, to.device, deadline, inputs, now);
  inv.checked = checked;
  // The worker's deadline runs from when it takes the invocation in: less what the path to it
  // holds it standing.
  auto one_way =
      st.cfg->runtime.path_guard ? static_cast<int64_t>(st.transit.one_way_s(to.node, seconds_of(now)) * 1e9) : 0;
  inv.budget_ns = std::max<int64_t>(0, inv.budget_ns - one_way);
  auto budget = inv.budget_ns;
  st.net->to_node(to.node, {{}, std::move(inv)});
  for (auto& d : st.routes->padding_due(model, st.rng)) send_dummy(self, model, d.node, d.device, budget, true, now);
  if (auto at = st.routes->padding_deadline(model)) {
    auto wait = std::chrono::nanoseconds(static_cast<int64_t>(std::max(0.0, *at - seconds_of(now)) * 1e9));
    self->delayed_send(self, wait, pad_atom::value, model);
  }
}

}  // namespace

bool send_invocation(self_ptr self, uint64_t id, in_flight& f, std::string* refused) {
  auto& st = self->state;
  auto now = self->clock().now();
  f.sent = now;
  // A model another frontend dispatches for all takes its place in that frontend's turn.
  if (!f.at)
    if (auto& d = st.routes->dispatcher(f.model); !d.empty()) {
      f.node = d;
      f.device = msg::forwarded_device;
      st.net->to_node(d, {{}, invocation(self, id, f.model, f.device, f.deadline, f.inputs, now)});
      st.net->metrics.count(node_metrics::event::forwarded, "sent");
      return true;
    }
  st.routes->set_clock(seconds_of(now));
  auto b = f.at ? st.routes->pick_at(f.model, f.at->first, f.at->second, st.rng) : st.routes->pick(f.model, st.rng);
  if (!b && f.at) {
    // The mapped variant has no live instance here: the stage's own model serves it.
    auto& q = st.queries.at(f.query);
    f.at.reset();
    f.model = stage_model_of(st, q, f.stage);
    return send_invocation(self, id, f, refused);
  }
  if (!b) return false;
  // The in-flight count (a walk over the routes) only where the path holds a standing queue.
  auto left_s = std::chrono::duration<double>(f.deadline - now).count();
  if (auto why = st.cfg->runtime.path_guard && st.transit.standing(b->node, seconds_of(now))
                     ? st.transit.refusal(b->node, seconds_of(now), left_s, st.routes->outstanding_at(b->node))
                     : std::string();
      !why.empty()) {
    st.routes->release(f.model, b->node, b->device);
    st.net->metrics.dropped("path_backed_up");
    if (refused) *refused = std::move(why);
    return false;
  }
  f.node = b->node;
  f.device = b->device;
  send_to(self, id, f.model, *b, f.deadline, f.inputs, f.checked, now);
  return true;
}

namespace {

// Answers invocation `id` that frontend `origin` forwarded with a failure.
void fail_back(self_ptr self, const std::string& origin, uint64_t id, msg::status code, std::string why) {
  auto& st = self->state;
  st.net->metrics.count(node_metrics::event::forwarded, "failed");
  st.net->to_node(origin,
                  {{}, msg::failed_invocation(id, code, std::move(why), st.net->self_name(), msg::forwarded_device)});
}

// Answers forwarded invocation `id` (this frontend's id for it) with a failure and forgets it.
void fail_forwarded(self_ptr self, uint64_t id, msg::status code, std::string why) {
  auto& st = self->state;
  auto it = st.forwarded.find(id);
  if (it == st.forwarded.end()) return;
  st.net->queued.release(it->second.bytes);
  fail_back(self, it->second.origin, it->second.id, code, std::move(why));
  st.forwarded.erase(it);
}

// Places forwarded invocation `id` in its model's turn; false when no instance is live.
bool place_forwarded(self_ptr self, uint64_t id, frontend_state::forwarded_invocation& fw) {
  auto& st = self->state;
  auto now = self->clock().now();
  st.routes->set_clock(seconds_of(now));
  auto b = st.routes->pick(fw.model, st.rng);
  if (!b) return false;
  fw.node = b->node;
  fw.device = b->device;
  send_to(self, id, fw.model, *b, fw.deadline, fw.inputs, false, now);
  return true;
}

}  // namespace

void on_forwarded(self_ptr self, msg::invocation& inv) {
  auto& st = self->state;
  auto bytes = payload_bytes(inv.inputs);
  if (!st.net->queued.try_charge(bytes, st.cfg->runtime.max_queued_mb << 20))
    return fail_back(
        self, inv.frontend, inv.id, msg::status::overloaded,
        fmt::format("node '{}' holds {:.1f} MB of request payloads (runtime.max_queued_mb {})", st.net->self_name(),
                    st.net->queued.used() / 1048576.0, st.cfg->runtime.max_queued_mb));
  auto id = st.next_invocation++;
  auto& placed = st.forwarded[id];
  placed.origin = inv.frontend;
  placed.id = inv.id;
  placed.model = inv.model;
  placed.deadline = self->clock().now() + nanoseconds(inv.budget_ns);
  placed.bytes = bytes;
  placed.inputs = std::move(inv.inputs);
  if (place_forwarded(self, id, placed)) return st.net->metrics.count(node_metrics::event::forwarded, "placed");
  fail_forwarded(self, id, msg::status::error,
                 "no live instance serves model '" + inv.model + "' at its dispatcher " + st.net->self_name());
}

void reroute_forwarded(self_ptr self, const std::string& node) {
  auto& st = self->state;
  std::vector<uint64_t> affected;
  for (auto& [id, fw] : st.forwarded)
    if (fw.node == node) affected.push_back(id);
  auto now = self->clock().now();
  for (auto id : affected) {
    auto& fw = st.forwarded.at(id);
    if (fw.deadline > now && place_forwarded(self, id, fw)) {
      ++st.stats.rerouted;
      st.net->metrics.count(node_metrics::event::rerouted);
      continue;
    }
    fail_forwarded(self, id, msg::status::error,
                   "worker node '" + node + "' failed and no other instance could meet the deadline");
  }
}

void expire_forwarded(self_ptr self, clock_time now) {
  auto& st = self->state;
  auto grace = std::chrono::milliseconds(st.cfg->runtime.reply_grace_ms);
  std::erase_if(st.forwarded, [&](auto& e) {
    auto& fw = e.second;
    if (fw.deadline + grace > now) return false;
    st.routes->release(fw.model, fw.node, fw.device);
    st.net->queued.release(fw.bytes);
    return true;
  });
}

void pad_batch(self_ptr self, const std::string& model) {
  auto& st = self->state;
  if (!st.routes) return;
  auto now = self->clock().now();
  st.routes->set_clock(seconds_of(now));
  auto budget = static_cast<int64_t>(st.routes->budget_ms(model) * 1e6);
  for (auto& to : st.routes->padding_due(model, st.rng)) send_dummy(self, model, to.node, to.device, budget, true, now);
}

// Sends the padding requests (dummies) that are due on the clock, to the instances they pad; they
// do not count as outstanding work (the balancer's weights leave them out too). Where the model's
// instances take whole batches in turn, its dummies go with the batches instead (send_invocation).
void send_dummies(self_ptr self, clock_time now) {
  auto& st = self->state;
  for (auto& d : st.padding.due(seconds_of(now))) {
    if (st.unheard.count(d.node) || (st.routes && st.routes->in_turn(d.model))) continue;
    send_dummy(self, d.model, d.node, d.device, static_cast<int64_t>(d.budget_ms * 1e6), false, now);
  }
}

}  // namespace sloserve::frontend_impl
