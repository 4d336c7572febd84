#pragma once
// The ZeroMQ link of a node (actors/node_runtime): same-node destinations get plain CAF
// messages; other nodes get Cap'n Proto over ZeroMQ. Private to the node's units.

#include <string>
#include <utility>
#include <variant>

#include "actors/link.hpp"
#include "messages/codec.hpp"
#include "messages/transport.hpp"

namespace sloserve {

namespace node_detail {

// Whether `e` travels on a peer's control connection: heartbeats (not the link probes, which time
// the data connection), registrations and load reports, which no invocation must hold up.
inline bool is_control(const msg::envelope& e) {
  if (auto* hb = std::get_if<msg::heartbeat>(&e.content)) return !hb->probe && !hb->echo && hb->padding.empty();
  return std::holds_alternative<msg::register_node>(e.content) || std::holds_alternative<msg::load_report>(e.content);
}

}  // namespace node_detail

// Same-node destinations get plain CAF messages; other nodes get Cap'n Proto over ZeroMQ.
class zmq_link final : public link {
 public:
  zmq_link(std::string self, transport* t) : self_(std::move(self)), transport_(t) {}

  const std::string& self_name() const override { return self_; }
  const local_actors& local() const override { return actors_; }

  void to_node(const std::string& node, msg::envelope e) override {
    e.from = self_;
    if (node == self_) {
      dispatch(*this, std::move(e), {});
      return;
    }
    // As parts: a tensor's bytes go to the socket as they are, not copied into a frame.
    transport_->send_to_peer(node, msg::encode_parts(e), node_detail::is_control(e));
  }

  void to_client(const std::string& client, msg::body b) override {
    transport_->send_to_identity(client, msg::encode_frame({self_, std::move(b)}));
  }

  local_actors actors_;

 private:
  std::string self_;
  transport* transport_;
};

}  // namespace sloserve
