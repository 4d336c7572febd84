// The controller's plans: scheduler epochs, the scaler's deployments and a policy's own rounds.

#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>

#include "actors/controller_state.hpp"
#include "scheduling/backfill.hpp"
#include "scheduling/link_estimate.hpp"

namespace sloserve::control {
namespace {

void on_planned(self_ptr self, planned_epoch& p);

// Whether a plan may be made now: not while cut off (held for later), nor while a model lacks the
// profile a worker will measure.
bool may_plan(controller_state& st) {
  if (cut_off(st)) return st.held = true, false;
  if (auto* m = unprofiled_model(*st.cfg, st.models)) {
    if (!std::exchange(st.told_unprofiled, true))
      spdlog::info("{}: not planning yet: model '{}' has no profile until a worker measures it", st.net->self_name(),
                   m->name);
    return false;
  }
  return true;
}

}  // namespace

void run_epoch(self_ptr self, bool surge) {
  auto& st = self->state;
  if (!may_plan(st)) return;
  // Least-cost policies plan for load only: with none, what serves stays.
  if (st.policy->plans_least_cost() && sched::nothing_to_plan_for(st.rates)) return;
  if (std::exchange(st.plan_pending, true)) return void(st.replan = true);  // planned again on its return
  // Workers behind slow links are left out, unless that would leave none.
  bool fast_one = false;
  for (auto& n : st.cfg->nodes) fast_one |= n.has_role(role::worker) && st.workers.up(n.name) && !st.slow.count(n.name);
  auto req = epoch_request(
      *st.cfg, std::make_shared<const std::vector<model_spec>>(st.models), st.rates, st.plan,
      [&](const std::string& node) { return st.workers.up(node) && (!fast_one || !st.slow.count(node)); }, surge);
  // Models too large for a worker's link, or that a device of it could not load, are placed
  // elsewhere, while another worker can take them.
  auto off = st.far;
  for (auto& [node, models] : st.workers.unloadable())
    for (auto& m : models)
      if (auto& o = off[node]; std::find(o.begin(), o.end(), m) == o.end()) o.push_back(m);
  sched::keep_models_off(req.input.slots, off, st.models);
  if (st.budget) req.input.budget = st.budget->view(seconds_since_epoch(self->clock().now()));
  self->request(st.planner, caf::infinite, std::move(req)).then([=](planned_epoch& p) { on_planned(self, p); });
}

namespace {

// A plan arrived: applied unless what it was made for changed meanwhile (then it plans again).
void on_planned(self_ptr self, planned_epoch& p) {
  auto& st = self->state;
  st.plan_pending = false;
  // Cut off since it asked (the workers it lost just before were lost to it alone, most likely):
  // the plan is for a cluster it cannot see, and planning resumes when it hears it again.
  if (cut_off(st)) {
    st.held = true;
    st.replan = false;
    return;
  }
  if (std::exchange(st.replan, false)) return run_epoch(self);
  if (!p.error.empty()) return spdlog::error("{}: epoch failed: {}", st.net->self_name(), p.error);
  // What was planned for is each pipeline's measured peak with the scheduler's headroom, not the
  // rate clients send now: say so, so that the figure is not read as the load.
  if (p.scale < 1 && !p.capacity && p.input.slots.empty())
    spdlog::warn("{}: no worker device is up yet: nothing serves the planned {:.1f} queries/s", st.net->self_name(),
                 fmt::join(p.planned.rate, ", "));
  else if (p.scale < 1 && !p.capacity)
    spdlog::warn(
        "{}: the cluster has {} devices, too few for the planned {:.1f} queries/s (each pipeline's measured peak with "
        "scheduler.headroom); planning for {:.0f}% of it",
        st.net->self_name(), p.input.slots.size(), fmt::join(p.planned.rate, ", "), 100 * p.scale);
  // Variants given up for memory or the budget, said when that changes (MCDNN's catalogue).
  if (p.degraded != (st.plan ? st.plan->degraded : std::vector<std::string>{})) {
    if (p.degraded.empty())
      spdlog::info("{}: variants: every stage runs its most accurate variant again", st.net->self_name());
    else
      spdlog::warn("{}: variants: the most accurate do not fit the cluster's memory or the budget{}; running {}",
                   st.net->self_name(), p.variants_fit ? "" : " (nor do the smallest fit)",
                   fmt::join(p.degraded, "; "));
  }
  if (st.budget)
    st.budget->adopt(seconds_since_epoch(self->clock().now()), p.input.chosen ? *p.input.chosen : st.cfg->pipelines);
  ++st.epoch;
  auto plan = std::make_shared<planned_epoch>(std::move(p));
  plan->previous.reset();  // only the planning needed it
  st.plan = plan;
  st.last_epoch = self->clock().now();
  if (plan->capacity)
    spdlog::info(
        "{}: epoch {}: no load measured yet: {} sessions on {} of {} devices, for what they hold ({:.1f} "
        "queries/s per pipeline)",
        st.net->self_name(), st.epoch - st.epoch_base, plan->result.sessions.size(),
        plan->result.placement.devices.size(), plan->input.slots.size(), plan->scale);
  else
    spdlog::info(
        "{}: epoch {}: {} sessions on {} of {} devices ({} moved), planned for {:.2f}x the load ({:.1f} queries/s)",
        st.net->self_name(), st.epoch - st.epoch_base, plan->result.sessions.size(),
        plan->result.placement.devices.size(), plan->input.slots.size(), plan->result.placement.moved,
        plan->scale * (1 + st.cfg->scheduler.headroom), fmt::join(plan->planned.rate, ", "));
  if (auto news = st.policy->plan_news(plan->result); !news.empty()) spdlog::info("{}: {}", st.net->self_name(), news);
  auto placed = epoch_placement(*st.cfg, plan->input, plan->result, st.epoch, &st.current);
  // Short of devices: what the higher priorities leave idle on their devices goes to the lower
  // ones the plan cut, and the frontends admit what the plan carries (scheduling/backfill.hpp).
  std::vector<double> backfilled;
  if (!plan->capacity)
    backfilled =
        cover_shortfall(*st.cfg, plan->input, plan->result, plan->scale, plan->planned.rate, plan->running, placed);
  for (size_t pi = 0; pi < backfilled.size(); ++pi)
    if (backfilled[pi] > 0)
      spdlog::info(
          "{}: epoch {}: pipeline '{}' also runs in the time its higher priorities' devices leave idle: "
          "{:.1f} queries/s more",
          st.net->self_name(), st.epoch - st.epoch_base, (*plan->input.pipelines)[pi].name, backfilled[pi]);
  adopt(self, std::move(placed));
}

}  // namespace

void send_resizes(self_ptr self, const std::string& node, bool force) {
  auto& st = self->state;
  for (auto& i : st.deployed.instances) {
    if (i.node != node) continue;
    auto& sent = st.cores[{i.node, i.device}];
    if (!force && sent == i.cores) continue;
    sent = i.cores;
    st.net->to_node(node, {{}, msg::resize{i.device, i.cores}});
  }
}

void on_deployment(self_ptr self, deployment& d) {
  auto& st = self->state;
  auto p = deployment_placement(*st.cfg, d, ++st.epoch, st.current.table.budgets, &st.current, &st.models);
  st.deployed = std::move(d);
  // A worker whose devices did not change keeps its schedule and its epoch.
  for (auto& [name, s] : p.schedules) {
    auto old = st.current.schedules.find(name);
    if (old != st.current.schedules.end() && old->second.devices == s.devices) s = old->second;
  }
  adopt(self, std::move(p));  // the schedule first, then the cores: the worker applies them in that order
  for (auto& name : st.workers.up_workers()) send_resizes(self, name, false);
}

sched::epoch_reason epoch_due(const controller_state& st, clock_time now) {
  if (!plans_epochs(st) || st.plan_pending) return sched::epoch_reason::none;
  auto since = std::chrono::duration<double>(now - st.last_epoch).count();
  return sched::epoch_gate(*st.policy, epoch_rule_of(*st.cfg), st.rates, st.plan ? &st.plan->planned : nullptr,
                           st.plan ? &st.plan->result : nullptr, since);
}

namespace {

// One of the policy's rounds on the clients the frontends reported. A worker whose devices keep
// their sessions keeps its schedule; nothing is sent when nothing changed.
void client_round(self_ptr self, const std::vector<msg::client_load>& clients) {
  auto& st = self->state;
  if (!may_plan(st)) return;
  std::vector<sched::device_slot> slots;
  for (auto& s : device_slots(*st.cfg))
    if (st.workers.up(s.node)) slots.push_back(s);
  auto began = std::chrono::steady_clock::now();
  auto p = st.rounds->decide(clients, slots, st.models, st.epoch + 1);
  st.round_cost = std::chrono::steady_clock::now() - began;
  bool changed = false;
  for (auto& [name, s] : p.schedules) {
    auto old = st.current.schedules.find(name);
    if (old != st.current.schedules.end() && old->second.devices == s.devices)
      s = old->second;
    else
      changed = true;
  }
  auto& t = st.current.table;
  if (!changed && p.table.routes == t.routes && p.table.budgets == t.budgets && p.table.clients == t.clients) return;
  if (auto news = st.rounds->news(); !news.empty()) spdlog::info("{}: {}", st.net->self_name(), news);
  ++st.epoch;
  adopt(self, std::move(p));
}

}  // namespace

// Asks the monitor for the clients and re-schedules on them.
void ask_clients(self_ptr self) {
  auto& st = self->state;
  st.last_round = self->clock().now();
  if (auto mon = st.net->local().monitor)
    self->request(mon, caf::infinite, clients_atom::value).then([=](std::vector<msg::client_load>& c) {
      client_round(self, c);
    });
}

}  // namespace sloserve::control
