#pragma once
// One connection of the load client to a frontend: a ZeroMQ DEALER, with CurveZMQ when keys are
// given, that sends frames by reference and tells why a handshake was refused.

#include <string>

#include "loadgen/options.hpp"
#include "pipelines/bytes.hpp"

namespace sloserve {

class load_socket {
 public:
  explicit load_socket(const load_options& o);
  ~load_socket();
  load_socket(const load_socket&) = delete;
  load_socket& operator=(const load_socket&) = delete;

  status connect();
  // The frame's bytes go to ZeroMQ by reference.
  void send(bytes frame);
  // Waits up to `timeout_ms` for one frame.
  bool recv(std::string& out, int timeout_ms);
  // Why the server refused the handshake, or empty.
  std::string refused();

 private:
  const load_options& o_;
  void* ctx_;
  void* sock_;
  void* monitor_ = nullptr;
};

// Asks the frontend whether it can serve until it says so, for up to o.wait_ready_s; an error
// (its last reason, or why the handshake failed) when it never does.
status wait_ready(load_socket& c, const load_options& o);

}  // namespace sloserve
