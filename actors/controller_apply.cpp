// `sloserve apply` on the controller: a new cluster file checked against the running one (what may
// change while it serves), the difference said, and the change made: every node gets the file and
// runs it from now on, then the controller plans at once. Make before break: workers acknowledge
// a schedule only once its new models are loaded and warm, frontends route to an instance only once
// its worker acknowledged it, and sessions a schedule drops drain before they go (and a model the
// file dropped is unloaded then).

#include <spdlog/spdlog.h>

#include "actors/controller_state.hpp"
#include "config/live_apply.hpp"

namespace sloserve::control {
namespace {

// Where the static placement of `next` puts models that `now` does not, and the reverse.
std::vector<std::string> static_moves(const cluster_config& now, const cluster_config& next) {
  std::vector<std::string> out;
  auto a = static_placement(now, 0), b = static_placement(next, 0);
  auto sessions = [](const cluster_placement& p) {
    std::set<std::string> s;
    for (auto& [node, sched] : p.schedules)
      for (auto& d : sched.devices)
        for (auto& x : d.sessions) s.insert(x.model + " on " + node + " device " + std::to_string(d.device));
    return s;
  };
  auto was = sessions(a), will = sessions(b);
  for (auto& s : will)
    if (!was.count(s)) out.push_back("load " + s + ", then route to it");
  for (auto& s : was)
    if (!will.count(s)) out.push_back("drain " + s + ", then drop it");
  return out;
}

// What the controller does to move from `now` to `next`, one line each.
std::vector<std::string> plan_lines(const controller_state& st, const cluster_config& next,
                                    const std::vector<live_change>& changes) {
  std::vector<std::string> out;
  for (auto& c : changes)
    if (c.section == "pipelines" && c.what == live_change::kind::removed)
      out.push_back("refuse new requests of pipeline '" + c.name + "'; answer those in flight");
  if (st.cfg->scaler.enabled())
    out.push_back("the " + std::string(knob_name(st.cfg->scaler.policy)) +
                  " scaler places and sizes with the new knobs from its next period");
  else if (st.rounds)
    out.push_back("re-decide the " + std::string(st.cfg->scheduler.name()) + " policy's round on the clients heard");
  else if (st.plan || st.plan_pending)
    out.push_back("plan a " + std::string(st.cfg->scheduler.name()) +
                  " epoch at once for the measured rates; new models load and warm up before frontends route to "
                  "them");
  else
    for (auto& line : static_moves(*st.cfg, next)) out.push_back(line);
  return out;
}

// The controller's own view of `next`: its models (with the profiles workers measured), rates
// carried over by pipeline name, the policy's rounds made afresh; then a plan at once.
void adopt_config(self_ptr self, std::shared_ptr<const cluster_config> next) {
  auto& st = self->state;
  std::vector<model_spec> models = next->models;
  for (auto& m : models)
    for (auto& was : st.models)
      if (was.name == m.name && m.needs_profile && was.measured) m.profile = was.profile, m.measured = true;
  st.models = std::move(models);
  std::erase_if(st.profile_scales, [&](auto& kv) { return !next->find_model(kv.first); });
  for (auto& [name, scale] : st.profile_scales)
    for (auto& m : st.models)
      if (m.name == name) scale_latency(m, scale);  // the refreshed profile holds for the new file's too
  sched::pipeline_rates rates;
  rates.windows_with_load = st.rates.windows_with_load;
  for (auto& p : next->pipelines) {
    auto* was = st.cfg->find_pipeline(p.name);
    auto i = was ? static_cast<size_t>(was - st.cfg->pipelines.data()) : SIZE_MAX;
    if (i < st.rates.pipelines.size() && st.rates.pipelines[i].stage.size() == p.stages.size())
      rates.pipelines.push_back(st.rates.pipelines[i]);
    else
      rates.pipelines.push_back({0, std::vector<double>(p.stages.size(), 0), std::vector<double>(p.stages.size(), 0)});
  }
  st.rates = std::move(rates);
  for (auto& p : next->pipelines)
    if (!st.cfg->find_pipeline(p.name)) st.unmeasured.insert(p.name);
  st.cfg = std::move(next);
  floor_unmeasured(st);
  if (st.cfg->scaler.enabled()) return;  // the scaler owns placement; it took the new knobs itself
  if (st.rounds) {
    st.rounds = st.policy->rounds(*st.cfg);
    return ask_clients(self);
  }
  if (st.plan || st.plan_pending) {
    // The plan in force was made for the pipelines before: the next one is made afresh.
    st.plan.reset();
    if (st.plan_pending) return void(st.replan = true);
    return run_epoch(self);
  }
  adopt(self, static_placement(*st.cfg, ++st.epoch));
}

}  // namespace

void floor_unmeasured(controller_state& st) {
  for (auto it = st.unmeasured.begin(); it != st.unmeasured.end();) {
    auto* p = st.cfg->find_pipeline(*it);
    auto i = p ? static_cast<size_t>(p - st.cfg->pipelines.data()) : SIZE_MAX;
    if (i >= st.rates.pipelines.size() || st.rates.pipelines[i].rate > 0) {
      it = st.unmeasured.erase(it);  // measured (or gone): its own rate from now on
      continue;
    }
    auto& r = st.rates.pipelines[i];
    r.peak = std::max(r.peak, controller_state::unmeasured_rate);
    ++it;
  }
}

namespace {

void check_and_apply(self_ptr self, admin_call& call);
void answer_apply(controller_state& st, std::vector<controller_state::pending_apply>::iterator it);

}  // namespace

void on_config_ack(self_ptr self, const msg::config_ack& ack) {
  auto& st = self->state;
  for (auto it = st.applying.begin(); it != st.applying.end(); ++it) {
    if (it->reply.revision != ack.revision || !it->waiting.erase(ack.node)) continue;
    std::string line = ack.node + ": applied";
    if (!ack.problems.empty()) {
      line = ack.node + ":";
      for (size_t i = 0; i < ack.problems.size(); ++i) line += (i ? "; " : " ") + ack.problems[i];
    }
    it->said[ack.node] = std::move(line);
    if (it->waiting.empty()) answer_apply(st, it);
    return;
  }
}

void on_apply_wait_over(self_ptr self, uint64_t token) {
  auto& st = self->state;
  for (auto it = st.applying.begin(); it != st.applying.end(); ++it) {
    if (it->reply.token != token) continue;
    for (auto& n : it->waiting)
      it->said[n] = fmt::format("{}: no acknowledgement within {} s", n, controller_state::apply_wait.count());
    return answer_apply(st, it);
  }
}

void on_apply(self_ptr self, admin_call& call) {
  // Whatever an operator's file holds, the controller stays up and the caller gets an answer.
  try {
    check_and_apply(self, call);
  } catch (const std::exception& e) {
    msg::apply_reply reply;
    reply.token = call.request.token;
    reply.revision = self->state.revision;
    reply.reason = std::string("the controller could not read the file: ") + e.what();
    spdlog::error("{}: apply of {}: {}", self->state.net->self_name(), call.request.file, reply.reason);
    self->state.net->to_client(call.client, std::move(reply));
  }
}

namespace {

void check_and_apply(self_ptr self, admin_call& call) {
  auto& st = self->state;
  auto& rq = call.request;
  msg::apply_reply reply;
  reply.token = rq.token;
  reply.revision = st.revision;
  auto answer = [&] { st.net->to_client(call.client, std::move(reply)); };
  auto parsed = parse_cluster_config(rq.text, rq.file);
  if (!parsed) {
    reply.reason = parsed.error_text();
    return answer();
  }
  auto changes = diff_configs(*st.cfg, *parsed.config);
  for (auto& c : changes) reply.changes.push_back(c.to_string());
  if (auto why = live_refusal_text(*st.cfg, *parsed.config, rq.text); !why.empty()) {
    reply.reason = std::move(why);
    spdlog::warn("{}: refused an apply of {}: {}", st.net->self_name(), rq.file, reply.reason);
    return answer();
  }
  auto next = std::make_shared<const cluster_config>(merge_live(*st.cfg, std::move(*parsed.config)));
  reply.ok = true;
  if (changes.empty()) {
    reply.plan.push_back("nothing: the cluster runs this configuration");
    return answer();
  }
  reply.plan = plan_lines(st, *next, changes);
  if (rq.dry_run) return answer();
  msg::config_update u{config_revision(rq.text), rq.text, rq.file};
  // The caller hears once the nodes have said what they made of it. Nodes not heard now get it
  // when they register again (on_register): the answer says so.
  reply.revision = u.revision;
  controller_state::pending_apply wait{call.client, std::move(reply), {}, {}};
  for (auto& n : st.cfg->nodes)
    if (st.unheard.count(n.name))
      wait.said[n.name] =
          fmt::format("{}: not heard now: it gets revision {:016x} when it registers again", n.name, u.revision);
    else
      wait.waiting.insert(n.name);
  st.applying.push_back(std::move(wait));
  self->delayed_send(self, controller_state::apply_wait, applied_atom::value, rq.token);
  // Every node first (over each link, the update goes before any schedule or table made for it),
  // then this node's other roles, then the plan.
  for (auto& n : st.cfg->nodes)
    if (n.name != st.net->self_name()) st.net->to_node(n.name, {{}, u});
  if (auto here = apply_config_update(*st.net, u); !here)
    spdlog::error("{}: its own node refused the configuration: {}", st.net->self_name(), here.error());
  st.revision = u.revision;
  st.revision_text = rq.text;
  st.revision_file = rq.file;
  st.workers.forget_unloadable();  // the files it names may load now
  spdlog::info("{}: applying {} (revision {:016x}): {} changes", st.net->self_name(), rq.file, u.revision,
               changes.size());
  for (auto& line : st.applying.back().reply.changes) spdlog::info("{}:   {}", st.net->self_name(), line);
  adopt_config(self, next);
}

// Answers the caller of `it` with each node's line, in the file's order, and forgets it.
void answer_apply(controller_state& st, std::vector<controller_state::pending_apply>::iterator it) {
  auto& p = *it;
  size_t short_of = 0;
  for (auto& n : st.cfg->nodes) {
    auto line = p.said.find(n.name);
    if (line == p.said.end()) continue;
    if (line->second != n.name + ": applied") ++short_of;
    p.reply.nodes.push_back(line->second);
  }
  if (short_of) {
    p.reply.ok = false;
    p.reply.reason = fmt::format("{} of {} nodes do not run all of revision {:016x}", short_of, p.reply.nodes.size(),
                                 p.reply.revision);
    spdlog::warn("{}: apply: {}", st.net->self_name(), p.reply.reason);
  }
  st.net->to_client(p.client, std::move(p.reply));
  st.applying.erase(it);
}

}  // namespace
}  // namespace sloserve::control
