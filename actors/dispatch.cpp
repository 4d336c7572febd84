#include <spdlog/spdlog.h>

#include "actors/link.hpp"

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
          l.to_client(client, msg::client_reply{id, msg::status::error,
                                                "node '" + l.self_name() + "' is not a frontend",
                                                {}, {}, 0});
          return false;
        } else if constexpr (std::is_same_v<T, msg::status_request>) {
          if (deliver(a.frontend, status_query{client, m})) return true;
          l.to_client(client, msg::status_reply{m.token, false, "not a frontend"});
          return false;
        } else if constexpr (std::is_same_v<T, msg::invocation_result> ||
                             std::is_same_v<T, msg::routing_table>) {
          return deliver(a.frontend, std::move(m));
        } else if constexpr (std::is_same_v<T, msg::invocation>) {
          if (deliver(a.worker, std::move(m))) return true;
          msg::invocation_result r;
          r.id = m.id;
          r.code = msg::status::error;
          r.reason = "node '" + l.self_name() + "' is not a worker";
          r.node = l.self_name();
          l.to_node(m.frontend, {{}, std::move(r)});
          return false;
        } else if constexpr (std::is_same_v<T, msg::schedule> || std::is_same_v<T, msg::resize>) {
          return deliver(a.worker, std::move(m));
        } else if constexpr (std::is_same_v<T, msg::register_node>) {
          return deliver(a.controller, std::move(m));
        } else if constexpr (std::is_same_v<T, msg::load_report>) {
          // Frontends' pipeline counts drive the scheduler; everything feeds the monitor.
          if (!m.pipelines.empty()) deliver(a.controller, m);
          return deliver(a.monitor, std::move(m));
        } else if constexpr (std::is_same_v<T, msg::heartbeat>) {
          return deliver(a.agent, std::move(m));
        } else {
          spdlog::warn("{}: ignoring a message meant for clients from '{}'", l.self_name(), e.from);
          return false;
        }
      },
      e.content);
}

}  // namespace sloserve
