#pragma once
// One connection of the load client to a frontend: a ZeroMQ DEALER, with CurveZMQ when keys are
// given, that sends frames by reference and tells why a handshake was refused.

#include <string>

#include "loadgen/options.hpp"
#include "messages/types.hpp"
#include "pipelines/bytes.hpp"
#include "pipelines/expected.hpp"

namespace sloserve {

// A connection of one lane to a frontend: frames of the sloserve protocol in and out, whatever
// travels on the wire.
class load_connection {
 public:
  virtual ~load_connection() = default;
  virtual status connect() = 0;
  virtual void send(bytes frame) = 0;
  // Waits up to `timeout_ms` for one frame.
  virtual bool recv(std::string& out, int timeout_ms) = 0;
  // Why the server refused the handshake, or empty.
  virtual std::string refused() = 0;
};

class load_socket final : public load_connection {
 public:
  explicit load_socket(const load_options& o);
  ~load_socket() override;
  load_socket(const load_socket&) = delete;
  load_socket& operator=(const load_socket&) = delete;

  status connect() override;
  // The frame's bytes go to ZeroMQ by reference.
  void send(bytes frame) override;
  bool recv(std::string& out, int timeout_ms) override;
  std::string refused() override;

 private:
  const load_options& o_;
  void* ctx_;
  void* sock_;
  void* monitor_ = nullptr;
};

// Asks the frontend whether it can serve until it says so, for up to o.wait_ready_s; an error
// (its last reason, or why the handshake failed) when it never does. The reply says how many
// dummy requests the frontend has sent (Piccolo's padding).
expected<msg::status_reply> wait_ready(load_connection& c, const load_options& o);

}  // namespace sloserve
