#pragma once
// CurveZMQ keys: Z85 key pairs, key files, and the per-socket settings the transport and the
// load client share. A key file is two lines of YAML written by `sloserve keys`:
//   public: "<40 Z85 characters>"
//   secret: "<40 Z85 characters>"     (only in NAME.key, never in NAME.pub)

#include <cstdint>
#include <string>
#include <vector>

#include "pipelines/expected.hpp"

namespace sloserve {

struct curve_pair {
  std::string public_key;  // Z85, 40 characters
  std::string secret_key;  // Z85, 40 characters; empty when only the public half is known
};

// True when `key` is 40 characters of the Z85 alphabet that decode to 32 bytes.
bool is_z85_key(const std::string& key);

// A fresh key pair from libzmq (needs libsodium/tweetnacl support, which Debian's has).
expected<curve_pair> generate_curve_pair();

// Reads a key file; `need_secret` fails on a .pub file. Errors name the file and line.
expected<curve_pair> read_curve_file(const std::string& path, bool need_secret);

// A bearer token of the HTTP ingress (`security.tokens`, `load --token`): the file's first line,
// trailing space cut, at least 16 characters.
expected<std::string> read_token_file(const std::string& path);
// The same for the file's text; `path` only names it in errors.
expected<curve_pair> parse_curve_text(const std::string& text, const std::string& path, bool need_secret);

// Writes DIR/NAME.key (mode 0600, both halves) and DIR/NAME.pub (public half only). Refuses to
// replace existing files unless `force`.
status write_curve_files(const std::string& dir, const std::string& name, const curve_pair& keys, bool force);

// Client side of a socket: our pair, and the public key of the server it connects to.
// Applies nothing when `ours` is empty (plain connection).
status set_curve_client(void* socket, const curve_pair& ours, const std::string& server_public);

// Handshake failures (a refused key, a plain client at a CURVE socket, a wrong server key) come
// only as socket-monitor events. Starts monitoring `socket` for them through `endpoint` (an
// inproc name unique in `ctx`) and returns the PAIR socket to read them from.
void* watch_handshake_failures(void* ctx, void* socket, const char* endpoint);
// The next queued failure, without waiting: its ZMQ_EVENT_HANDSHAKE_FAILED_* event and value.
// False when none is queued.
bool next_handshake_failure(void* monitor, uint16_t& event, uint32_t& value);

// The public key of a CURVE peer in the 32-byte binary form ZAP hands over, as Z85.
std::string z85_of(const void* key32);

}  // namespace sloserve
