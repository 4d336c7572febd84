// The node agent heartbeats every peer and tells the local actors when a peer goes silent
// (runtime.peer_timeout_ms) or comes back, including as a new incarnation after a restart.
// A peer is up only while traffic flows both ways: each heartbeat echoes the last one heard
// from its receiver. After a cut link heals, one direction often recovers seconds before the
// other (TCP retransmission backoff); work sent down the dead direction would time out.

#include <spdlog/spdlog.h>

#include <map>

#include "actors/roles.hpp"

namespace sloserve {
namespace {

using clock_time = caf::actor_clock::time_point;

struct peer {
  clock_time last_seen;
  uint64_t incarnation = 0;
  uint64_t last_seq = 0;  // the latest heartbeat heard from it
  uint64_t heard = 0;     // the latest of ours it says it heard
  bool up = false;
};

struct agent_state {
  static inline const char* name = "node_agent";
  std::shared_ptr<const cluster_config> cfg;
  std::shared_ptr<link> net;
  uint64_t incarnation = 0;
  uint64_t seq = 0;
  std::map<std::string, peer> peers;
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

void tick(self_ptr self) {
  auto& st = self->state;
  auto now = self->clock().now();
  ++st.seq;
  for (auto& [name, p] : st.peers) {
    st.net->to_node(name, {{}, msg::heartbeat{st.net->self_name(), st.incarnation, st.seq, p.last_seq}});
    if (!p.up) continue;
    bool silent = now - p.last_seen > std::chrono::milliseconds(st.cfg->runtime.peer_timeout_ms);
    if (silent || !hears_us(st, p)) {
      p.up = false;
      st.net->metrics.count(node_metrics::event::peer_down, name);
      spdlog::warn("{}: peer {} {} for {} ms; marked down", st.net->self_name(), name,
                   silent ? "missed heartbeats" : "has not heard ours", st.cfg->runtime.peer_timeout_ms);
      notify(self, name, false);
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
    return {
        [=](start_atom) {
          tick(self);
          self->delayed_send(self, std::chrono::milliseconds(self->state.cfg->runtime.heartbeat_ms), tick_atom::value);
        },
        [=](msg::heartbeat& hb) {
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
            notify(self, hb.node, false);
            p.up = false;
          }
          p.incarnation = hb.incarnation;
          if (!p.up && hears_us(self->state, p)) {
            p.up = true;
            spdlog::info("{}: peer {} is up", self->state.net->self_name(), hb.node);
            notify(self, hb.node, true);
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
