// What a frontend tells others: the controller its load (admitted and shed), its clients and the
// workers it does not hear, and its registration; the other frontends its capped tenants' rates,
// and theirs summed into the admission, so that a cap holds across the cluster.

#include "actors/frontend_state.hpp"

namespace sloserve::frontend_impl {

namespace {

// The capped tenants' rates here, as this frontend reports them to the others.
std::vector<msg::tenant_load> tenants_here(self_ptr self, caf::actor_clock::time_point now) {
  auto& st = self->state;
  std::vector<msg::tenant_load> out;
  auto& tenants = st.cfg->security.tenants;
  for (size_t t = 0; t < tenants.size(); ++t)
    if (tenants[t].rate)
      out.push_back({tenants[t].name, st.routes->tenant_offered_here(static_cast<int>(t), seconds_of(now))});
  return out;
}

// The capped tenants' rates at the other frontends heard within three beacons, summed, for the
// admission to split their caps by; none heard: an even split.
void share_caps(self_ptr self) {
  auto& st = self->state;
  auto now = self->clock().now();
  auto fresh = std::chrono::milliseconds(3 * st.cfg->runtime.beacon_ms);
  std::erase_if(st.peers_tenants, [&](auto& kv) { return now - kv.second.at > fresh; });
  std::optional<std::vector<double>> sum;
  for (auto& [node, t] : st.peers_tenants) {
    if (!sum) sum.emplace(st.cfg->security.tenants.size(), 0.0);
    for (size_t i = 0; i < t.offered.size() && i < sum->size(); ++i) (*sum)[i] += t.offered[i];
  }
  st.routes->set_tenants_elsewhere(std::move(sum));
}

}  // namespace

// Sends the controller what this frontend knows of its clients, for a policy that places on them
// (scheduling_policy::clients).
void report_clients(self_ptr self, clock_time now) {
  auto& st = self->state;
  auto* ctl = st.cfg->controller();
  double window = std::chrono::duration<double>(now - st.last_client_report).count();
  st.last_client_report = now;
  if (!ctl) return;
  msg::load_report r;
  r.node = st.net->self_name();
  r.clients = st.clients.report(seconds_of(now), window, 10);
  for (auto& p : st.cfg->pipelines)
    if (double q = st.clients.uplink_quantile(p.name); q >= 0)
      st.net->metrics.uplink_quantile(p.name, q, st.clients.wait_share(p.name), st.clients.headroom_share(p.name));
  if (!r.clients.empty()) st.net->to_node(ctl->name, {{}, std::move(r)});
}

// Adds the workers this frontend does not hear to a load report.
void add_unheard(const frontend_state& st, msg::load_report& r) {
  for (auto& node : st.unheard) {
    msg::link_load l;
    l.node = node;
    l.unheard = true;
    r.links.push_back(std::move(l));
  }
}

// Another frontend's report of its capped tenants' rates.
void on_peer_report(self_ptr self, const msg::load_report& r) {
  auto& st = self->state;
  if (r.node == st.net->self_name()) return;
  auto& t = st.peers_tenants[r.node];
  t.at = self->clock().now();
  t.offered.assign(st.cfg->security.tenants.size(), 0);
  for (auto& x : r.tenants)
    if (auto* known = st.cfg->security.find_tenant(x.tenant))
      t.offered[static_cast<size_t>(known - st.cfg->security.tenants.data())] = x.offered;
  share_caps(self);
}

// Sends the controller what this frontend admitted (and shed) since the last beacon.
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
  // A path's transfer time once it has the evidence to be judged by (a path that stalls returns
  // few results, each late), or is 2 s old.
  std::erase_if(st.transfer, [&](auto& kv) {
    auto& t = kv.second;
    if (t.results < frontend_state::transfer_tally::evidence && now - t.since < std::chrono::seconds(2)) return false;
    r.links.push_back({kv.first, t.sum_ms / static_cast<double>(t.results), t.results});
    return true;
  });
  std::erase_if(st.abandoned, [&](auto& kv) { return now - kv.second.sent > std::chrono::seconds(10); });
  add_unheard(st, r);
  for (size_t pi = 0; pi < st.fragments.size(); ++pi) {
    for (auto& [key, t] : st.fragments[pi])
      r.pipelines[pi].fragments.push_back(
          {key.first, key.second, t.queries, static_cast<uint32_t>(std::max<size_t>(1, t.clients.size()))});
    st.fragments[pi].clear();
  }
  for (auto& l : st.load) {
    l.queries = l.shed = 0;
    std::fill(l.stage_invocations.begin(), l.stage_invocations.end(), 0);
    std::fill(l.fallthroughs.begin(), l.fallthroughs.end(), 0);
  }
  auto tenants = tenants_here(self, now);
  r.tenants = tenants;
  st.net->to_node(ctl->name, {{}, std::move(r)});
  if (!tenants.empty())
    for (auto& n : st.cfg->nodes)
      if (n.has_role(role::frontend) && n.name != ctl->name && n.name != st.net->self_name()) {
        msg::load_report mine;
        mine.node = st.net->self_name();
        mine.tenants = tenants;
        st.net->to_node(n.name, {{}, std::move(mine)});
      }
  share_caps(self);  // what went quiet elsewhere is forgotten
  expire_forwarded(self, now);
  // Dummies whose worker never answered (it failed) are forgotten after a while.
  std::erase_if(st.dummies, [&](auto& d) {
    if (now - d.second.at <= std::chrono::seconds(30)) return false;
    if (!d.second.node.empty()) st.routes->release(d.second.model, d.second.node, d.second.device);
    return true;
  });
}

void register_with_controller(self_ptr self) {
  auto& st = self->state;
  auto* ctl = st.cfg->controller();
  if (!ctl) return;
  msg::register_node r;
  r.node = st.net->self_name();
  r.roles = {std::string(knob_name(role::frontend))};
  r.schedule_epoch = st.routes->epoch();
  r.config_revision = st.net->config ? st.net->config->revision() : 0;
  st.net->to_node(ctl->name, {{}, std::move(r)});
}

// A beacon's counts of pipeline `p` before any query.
msg::pipeline_load no_load(const pipeline& p) {
  return {p.name, 0, std::vector<uint64_t>(p.stages.size(), 0), std::vector<uint64_t>(p.stages.size(), 0), {}};
}

}  // namespace sloserve::frontend_impl
