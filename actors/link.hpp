#pragma once
// How actors reach other nodes and clients. The ZeroMQ link serializes to peers and short-cuts
// the node itself with plain CAF messages; tests use an in-process link between many "nodes".

#include <memory>
#include <string>

#include "actors/interfaces.hpp"
#include "messages/types.hpp"

namespace sloserve {

class link {
 public:
  virtual ~link() = default;
  virtual const std::string& self_name() const = 0;
  virtual const local_actors& local() const = 0;
  // Sends to the named node (this node included); `e.from` is filled in.
  virtual void to_node(const std::string& node, msg::envelope e) = 0;
  // Answers a client (a client_reply or status_reply).
  virtual void to_client(const std::string& client, msg::body b) = 0;
};

// Delivers `e` to the local actor that handles its kind. Returns false when this node has no
// actor for it (then a client request is answered with an ERROR through `l`).
bool dispatch(link& l, msg::envelope&& e, const std::string& client_identity);

}  // namespace sloserve
