#include <spdlog/spdlog.h>

#include "actors/link.hpp"
#include "config/live_apply.hpp"

namespace sloserve {

int64_t payload_bytes(const std::vector<tensor>& ts) {
  int64_t n = 0;
  for (auto& t : ts) n += static_cast<int64_t>(t.data.size());
  return n;
}

namespace {
template <class Handle, class T>
bool deliver(const Handle& h, T&& x) {
  if (!h) return false;
  caf::anon_send(h, std::forward<T>(x));
  return true;
}
}  // namespace

bool dispatch(link& l, msg::envelope&& e, const std::string& client) {
  auto& a = l.local();
  return std::visit(
      [&](auto& m) -> bool {
        using T = std::decay_t<decltype(m)>;
        if constexpr (std::is_same_v<T, msg::client_request>) {
          auto id = m.request_id;
          if (deliver(a.frontend, ingress{client, std::move(m)})) return true;
          l.to_client(client, msg::client_reply{
                                  id, msg::status::error, "node '" + l.self_name() + "' is not a frontend", {}, {}, 0});
          return false;
        } else if constexpr (std::is_same_v<T, msg::status_request>) {
          auto pipeline = m.pipeline;
          if (deliver(a.frontend, status_query{client, m, std::move(pipeline)})) return true;
          l.to_client(client, msg::status_reply{m.token, false, "not a frontend"});
          return false;
        } else if constexpr (std::is_same_v<T, msg::invocation_result> || std::is_same_v<T, msg::routing_table>) {
          return deliver(a.frontend, std::move(m));
        } else if constexpr (std::is_same_v<T, msg::invocation>) {
          // Straight to its device; the deadline runs from now, not from when the device gets
          // to its mailbox. One forwarded for its model's turn goes to this node's frontend.
          if (!m.received_ns) m.received_ns = l.now_ns();
          if (m.device == msg::forwarded_device) {
            auto id = m.id;
            auto origin = m.frontend;
            if (deliver(a.frontend, std::move(m))) return true;
            l.to_node(origin,
                      {{},
                       msg::failed_invocation(id, msg::status::error, "node '" + l.self_name() + "' is not a frontend",
                                              l.self_name(), msg::forwarded_device)});
            return false;
          }
          if (m.device < a.devices.size()) {
            return deliver(a.devices[m.device], std::move(m));
          }
          auto why = a.devices.empty() ? "node '" + l.self_name() + "' is not a worker"
                                       : "node '" + l.self_name() + "' has no device " + std::to_string(m.device);
          l.to_node(m.frontend, {{}, msg::failed_invocation(m.id, msg::status::error, why, l.self_name())});
          return false;
        } else if constexpr (std::is_same_v<T, msg::schedule> || std::is_same_v<T, msg::resize>) {
          return deliver(a.worker, std::move(m));
        } else if constexpr (std::is_same_v<T, msg::register_node>) {
          return deliver(a.controller, std::move(m));
        } else if constexpr (std::is_same_v<T, msg::apply_request>) {
          auto token = m.token;
          if (deliver(a.controller, admin_call{client, std::move(m)})) return true;
          msg::apply_reply r;
          r.token = token;
          r.reason = "node '" + l.self_name() + "' is not the controller";
          l.to_client(client, std::move(r));
          return false;
        } else if constexpr (std::is_same_v<T, msg::config_update>) {
          auto* ctl = l.config ? l.config->get()->controller() : nullptr;
          if (!ctl || ctl->name != e.from) {
            spdlog::warn("{}: ignoring a configuration from '{}', which is not the controller", l.self_name(), e.from);
            return false;
          }
          if (auto done = apply_config_update(l, m); !done) {
            spdlog::error("{}: refused the configuration from '{}': {}", l.self_name(), e.from, done.error());
            return false;
          }
          return true;
        } else if constexpr (std::is_same_v<T, msg::config_ack>) {
          return deliver(a.controller, std::move(m));
        } else if constexpr (std::is_same_v<T, msg::load_report>) {
          // Another frontend's capped tenants' rates go to this node's frontend too.
          bool tenants = !m.tenants.empty() && m.node != l.self_name() && deliver(a.frontend, m);
          return deliver(a.monitor, std::move(m)) || tenants;  // the controller and the scaler read it there
        } else if constexpr (std::is_same_v<T, msg::heartbeat>) {
          if (m.probe) {
            // A frontend times the link: answered here, at once, so that the round trip is the
            // link's and not this node's actors'.
            msg::heartbeat echo;
            echo.node = l.self_name();
            echo.echo = m.probe;
            l.to_node(e.from, {{}, std::move(echo)});
            return true;
          }
          if (m.echo) m.received_ns = l.now_ns();
          return deliver(a.agent, std::move(m));
        } else {
          spdlog::warn("{}: ignoring a message meant for clients from '{}'", l.self_name(), e.from);
          return false;
        }
      },
      e.content);
}

namespace {

// Runs it; sets `worker_acks` when the node's worker was handed it and acknowledges it.
status run_config_update(link& l, const msg::config_update& u, bool& worker_acks);

}  // namespace

void acknowledge_config(link& l, uint64_t revision, std::vector<std::string> problems) {
  auto* ctl = l.config ? l.config->get()->controller() : nullptr;
  if (ctl) l.to_node(ctl->name, {{}, msg::config_ack{revision, l.self_name(), std::move(problems)}});
}

status apply_config_update(link& l, const msg::config_update& u) {
  status done;
  bool worker_acks = false;
  try {
    done = run_config_update(l, u, worker_acks);
  } catch (const std::exception& e) {
    done = fail(std::string("cannot read the configuration: ") + e.what());
  }
  // A worker acknowledges once its devices have loaded what changed; every other node now.
  if (!done)
    acknowledge_config(l, u.revision, {"refused it: " + done.error()});
  else if (!worker_acks)
    acknowledge_config(l, u.revision, {});
  return done;
}

namespace {

status run_config_update(link& l, const msg::config_update& u, bool& worker_acks) {
  if (!l.config) return fail("this node has no configuration to replace");
  if (u.revision == l.config->revision()) return {};  // sent again: it runs it already
  auto running = l.config->get();
  auto parsed = parse_cluster_config(u.text, u.file);
  if (!parsed) return fail(parsed.error_text());
  if (auto why = live_refusal_text(*running, *parsed.config, u.text); !why.empty()) return fail(why);
  auto next = std::make_shared<const cluster_config>(merge_live(*running, std::move(*parsed.config)));
  if (!l.config->set(next, u.revision)) return {};
  spdlog::info("{}: runs configuration revision {:016x} from {}", l.self_name(), u.revision, u.file);
  auto& a = l.local();
  if (a.frontend) caf::anon_send(a.frontend, new_config{next, u.revision});
  if (a.worker) caf::anon_send(a.worker, new_config{next, u.revision});
  worker_acks = static_cast<bool>(a.worker);
  if (a.monitor) caf::anon_send(a.monitor, new_config{next, u.revision});
  if (a.scaler) caf::anon_send(a.scaler, new_config{next, u.revision});
  return {};
}

}  // namespace

}  // namespace sloserve
