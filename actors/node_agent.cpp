// The node agent heartbeats every peer and tells the local actors when a peer goes silent
// (runtime.peer_timeout_ms) or comes back, including as a new incarnation after a restart.
// A peer is up only while traffic flows both ways: each heartbeat echoes the last one heard
// from its receiver. After a cut link heals, one direction often recovers seconds before the
// other (TCP retransmission backoff); work sent down the dead direction would time out.
// Heartbeats travel on the control connections; a frontend that probes links also waits for a
// worker's first probe answer, which crosses both data connections (where invocations and their
// results go), before it calls the worker up: under CurveZMQ each connection has a handshake of
// its own, and a data connection still in its reconnect backoff would hold the first requests.
//
// On a frontend the agent also probes each worker's link (runtime.link_probe_ms): a round is an
// empty probe and one of runtime.link_probe_bytes, answered at once by the worker's I/O thread.
// It reports what the rounds find to the controller's monitor, which keeps models whose requests
// would take too long to cross a link off that worker. A link that one probe would hold for more
// than a tenth of the interval is probed 30 times less often: probes never take much of what a
// slow link carries.

#include <spdlog/spdlog.h>

#include <map>

#include "actors/roles.hpp"
#include "scheduling/link_estimate.hpp"

namespace sloserve {
namespace {

using clock_time = caf::actor_clock::time_point;

struct peer {
  clock_time last_seen;
  uint64_t incarnation = 0;
  uint64_t last_seq = 0;  // the latest heartbeat heard from it
  uint64_t heard = 0;     // the latest of ours it says it heard
  bool up = false;        // heartbeats flow both ways
  bool data_ok = false;   // a probe came back over the data connections (probing frontends)
  bool told = false;      // the local actors were told it is up
};

// One probe round in flight: its two probes' round trips as they come back.
struct probe_round {
  std::string worker;
  int64_t sent_ns = 0;
  double empty_ms = -1, loaded_ms = -1;
};

struct agent_state {
  static inline const char* name = "node_agent";
  std::shared_ptr<const cluster_config> cfg;
  std::shared_ptr<link> net;
  uint64_t incarnation = 0;
  uint64_t seq = 0;
  std::map<std::string, peer> peers;
  // Link probes (frontends only): rounds in flight by id (probe ids 2·id and 2·id + 1), each
  // worker's estimate and when its next round is due.
  bool probes = false;
  std::vector<msg::heartbeat> probe_pair;  // an empty probe and a loaded one, ids set per round
  uint64_t round = 0;
  std::map<uint64_t, probe_round> rounds;
  std::map<std::string, sched::link_estimate> links;
  std::map<std::string, clock_time> due;
  clock_time next_report;
};

using self_ptr = node_agent_actor::stateful_pointer<agent_state>;

void notify(self_ptr self, const std::string& node, bool up) {
  auto& a = self->state.net->local();
  auto tell = [&](const auto& h) {
    if (!h) return;
    if (up)
      self->send(h, peer_up_atom::value, node);
    else
      self->send(h, peer_down_atom::value, node);
  };
  tell(a.frontend);
  tell(a.worker);
  tell(a.controller);
}

// Whether `p` heard one of our heartbeats sent within the timeout.
bool hears_us(const agent_state& st, const peer& p) {
  auto window = static_cast<uint64_t>(st.cfg->runtime.peer_timeout_ms / st.cfg->runtime.heartbeat_ms);
  return p.heard > 0 && st.seq - p.heard <= std::max<uint64_t>(window, 1);
}

// Whether the local actors hear of `name` being up only once a probe came back from it.
bool waits_for_data(const agent_state& st, const std::string& name) {
  return st.probes && st.cfg->find_node(name)->has_role(role::worker);
}

// Tells the local actors that `name` is up, once it is (see waits_for_data).
void tell_up(self_ptr self, const std::string& name, peer& p) {
  auto& st = self->state;
  if (p.told || !p.up || (waits_for_data(st, name) && !p.data_ok)) return;
  p.told = true;
  spdlog::info("{}: peer {} is up", st.net->self_name(), name);
  notify(self, name, true);
}

void mark_down(self_ptr self, const std::string& name, peer& p) {
  if (p.told) notify(self, name, false);
  p.up = p.data_ok = p.told = false;
}

// One probe round to worker `name`: an empty probe and a loaded one.
void start_round(self_ptr self, const std::string& name, clock_time now) {
  auto& st = self->state;
  auto interval = std::chrono::milliseconds(st.cfg->runtime.link_probe_ms);
  auto& link = st.links[name];
  st.due[name] =
      now + (link.busy_for(st.cfg->runtime.link_probe_bytes, st.cfg->runtime.link_probe_ms / 10.0) ? 30 * interval
                                                                                                   : interval);
  auto id = ++st.round;
  st.rounds[id] = {name, st.net->now_ns()};
  for (uint64_t k = 0; k < 2; ++k) {
    auto probe = st.probe_pair[k];
    probe.probe = 2 * id + k;
    st.net->to_node(name, {{}, std::move(probe)});
  }
}

// Starts a round to every worker that is up and due one, forgets rounds that never came back,
// and reports the estimates to the controller once per interval.
void probe_links(self_ptr self, clock_time now) {
  auto& st = self->state;
  auto interval = std::chrono::milliseconds(st.cfg->runtime.link_probe_ms);
  for (auto& [name, p] : st.peers) {
    if (!p.up || !st.cfg->find_node(name)->has_role(role::worker)) continue;
    if (now < st.due[name]) continue;
    start_round(self, name, now);
  }
  auto stale = st.net->now_ns() - int64_t{10'000'000'000};
  std::erase_if(st.rounds, [&](auto& kv) { return kv.second.sent_ns < stale; });
  auto* ctl = st.cfg->controller();
  if (now < st.next_report || !ctl) return;
  st.next_report = now + interval;
  msg::load_report r;
  r.node = st.net->self_name();
  for (auto& [name, l] : st.links) {
    if (!l.known()) continue;
    msg::link_load x;
    x.node = name;
    x.ms_per_mb = l.ms_per_mb();
    x.base_ms = l.base_ms();
    r.links.push_back(std::move(x));
  }
  if (!r.links.empty()) st.net->to_node(ctl->name, {{}, std::move(r)});
}

// A worker answered a probe: its round is done when both of its probes are. The first answer
// after it came up shows its data connections carry traffic both ways.
void on_echo(self_ptr self, const msg::heartbeat& hb) {
  auto& st = self->state;
  auto it = st.rounds.find(hb.echo / 2);
  if (it == st.rounds.end() || it->second.worker != hb.node) return;
  if (auto peer = st.peers.find(hb.node); peer != st.peers.end() && peer->second.up) {
    peer->second.data_ok = true;
    tell_up(self, hb.node, peer->second);
  }
  auto& r = it->second;
  (hb.echo % 2 ? r.loaded_ms : r.empty_ms) = static_cast<double>(hb.received_ns - r.sent_ns) / 1e6;
  if (r.empty_ms < 0 || r.loaded_ms < 0) return;
  auto& l = st.links[r.worker];
  l.add(r.empty_ms, r.loaded_ms, st.cfg->runtime.link_probe_bytes);
  st.net->metrics.link(r.worker, l.ms_per_mb(), l.base_ms());
  st.rounds.erase(it);
}

void tick(self_ptr self) {
  auto& st = self->state;
  auto now = self->clock().now();
  if (st.probes) probe_links(self, now);
  ++st.seq;
  for (auto& [name, p] : st.peers) {
    st.net->to_node(name, {{}, msg::heartbeat{st.net->self_name(), st.incarnation, st.seq, p.last_seq}});
    if (!p.up) continue;
    bool silent = now - p.last_seen > std::chrono::milliseconds(st.cfg->runtime.peer_timeout_ms);
    if (silent || !hears_us(st, p)) {
      st.net->metrics.count(node_metrics::event::peer_down, name);
      spdlog::warn("{}: peer {} {} for {} ms; marked down", st.net->self_name(), name,
                   silent ? "missed heartbeats" : "has not heard ours", st.cfg->runtime.peer_timeout_ms);
      mark_down(self, name, p);
    }
  }
}

}  // namespace

node_agent_actor spawn_node_agent(caf::actor_system& sys, actor_args args) {
  return sys.spawn([args](self_ptr self) -> node_agent_actor::behavior_type {
    auto& st = self->state;
    st.cfg = args.cfg;
    st.net = args.net;
    st.incarnation = args.incarnation;
    for (auto& n : st.cfg->nodes)
      if (n.name != st.net->self_name()) st.peers[n.name];
    auto* me = st.cfg->find_node(st.net->self_name());
    st.probes = me && me->has_role(role::frontend) && st.cfg->runtime.link_probe_ms > 0;
    if (st.probes) {
      st.probe_pair.resize(2);
      for (auto& p : st.probe_pair) p.node = st.net->self_name(), p.incarnation = st.incarnation;
      char* out = nullptr;
      auto n = static_cast<size_t>(st.cfg->runtime.link_probe_bytes);
      auto load = bytes::allocate(n, out);
      st.probe_pair[1].padding.push_back({"probe", dtype::uint8, {static_cast<int64_t>(n)}, std::move(load)});
    }
    return {
        [=](start_atom) {
          tick(self);
          self->delayed_send(self, std::chrono::milliseconds(self->state.cfg->runtime.heartbeat_ms), tick_atom::value);
        },
        [=](msg::heartbeat& hb) {
          if (hb.echo) return on_echo(self, hb);
          auto it = self->state.peers.find(hb.node);
          if (it == self->state.peers.end()) return;
          auto& p = it->second;
          p.last_seen = self->clock().now();
          if (p.incarnation != hb.incarnation) p.last_seq = p.heard = 0;
          p.last_seq = std::max(p.last_seq, hb.seq);
          p.heard = std::max(p.heard, hb.heard);
          if (p.up && p.incarnation != hb.incarnation) {
            // Restarted faster than the timeout: its old work is gone all the same.
            spdlog::warn("{}: peer {} restarted", self->state.net->self_name(), hb.node);
            mark_down(self, hb.node, p);
          }
          p.incarnation = hb.incarnation;
          if (!p.up && hears_us(self->state, p)) {
            p.up = true;
            // A worker's data connections are tried at once rather than at its next round.
            if (waits_for_data(self->state, hb.node)) start_round(self, hb.node, self->clock().now());
            tell_up(self, hb.node, p);
          }
        },
        [=](tick_atom) {
          tick(self);
          self->delayed_send(self, std::chrono::milliseconds(self->state.cfg->runtime.heartbeat_ms), tick_atom::value);
        },
    };
  });
}

}  // namespace sloserve
