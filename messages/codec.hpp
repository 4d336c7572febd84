#pragma once
// Cap'n Proto encoding of messages, and decoding that validates what arrives from the network.

#include <optional>
#include <string>
#include <string_view>

#include "messages/types.hpp"

namespace sloserve::msg {

struct decode_limits {
  uint64_t max_payload_bytes = 64ULL << 20;  // sum of tensor bytes in one message
  uint64_t max_frame_bytes() const { return max_payload_bytes + (1ULL << 20); }
};

struct decode_error {
  std::string reason;
  // Set when the frame was a client request whose id could be read, so the ERROR can be matched.
  std::optional<uint64_t> request_id;
  // Set for invocations whose id could be read, so the frontend's invocation can be failed.
  std::optional<uint64_t> invocation_id;
  std::string from;
};

struct decoded {
  std::optional<envelope> value;
  decode_error error;  // meaningful when !value
};

std::string encode(const envelope& e);
decoded decode(std::string_view frame, const decode_limits& limits);

}  // namespace sloserve::msg
