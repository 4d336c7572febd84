#pragma once
// Cap'n Proto encoding of messages, and decoding that validates what arrives from the network.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "messages/types.hpp"

namespace sloserve::msg {

struct decode_limits {
  uint64_t max_payload_bytes = 16ULL << 20;  // sum of tensor bytes in one message
  // The largest frame: one payload and the message around it. Nodes set ZMQ_MAXMSGSIZE to it,
  // so that nothing larger is buffered.
  static constexpr uint64_t header_allowance = 64 << 10;
  uint64_t max_frame_bytes() const { return max_payload_bytes + header_allowance; }
};

struct decode_error {
  std::string reason;
  std::string_view kind;  // too_large, malformed, invalid, payload_too_large: for metrics and logs
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

// The wire frame of `e`, built in place: tensor bytes are copied once, into the frame.
bytes encode_frame(const envelope& e);
// Tensors of the result share `frame`'s bytes (no copy) and keep it alive.
decoded decode_frame(const bytes& frame, const decode_limits& limits);

// `e` as the parts of one multipart ZeroMQ message, with no copy of its large tensors: one part
// is a frame as encode_frame's; more than one are the message's Cap'n Proto segments (no segment
// table: each part is one segment), a large tensor's bytes being a segment of their own that
// shares them. The parts keep what they reference alive.
std::vector<bytes> encode_parts(const envelope& e);
// Reads either form; the tensors of the result share the parts' bytes. At most `max_parts`.
decoded decode_parts(const std::vector<bytes>& parts, const decode_limits& limits);
constexpr size_t max_parts = 1024;

// The same over plain strings, for tools and tests (one more copy each).
std::string encode(const envelope& e);
decoded decode(std::string_view frame, const decode_limits& limits);

}  // namespace sloserve::msg
