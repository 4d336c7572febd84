#include "messages/curve.hpp"

#include <sys/stat.h>
#include <zmq.h>

#include <cstring>
#include <fstream>
#include <sstream>

namespace sloserve {

bool is_z85_key(const std::string& key) {
  if (key.size() != 40) return false;
  unsigned char bin[32];
  return zmq_z85_decode(bin, key.c_str()) != nullptr;
}

expected<curve_pair> generate_curve_pair() {
  char pub[41], sec[41];
  if (zmq_curve_keypair(pub, sec) != 0)
    return fail(std::string("cannot generate a CURVE key pair: ") + zmq_strerror(zmq_errno()));
  return curve_pair{pub, sec};
}

expected<curve_pair> read_curve_file(const std::string& path, bool need_secret) {
  std::ifstream in(path);
  if (!in) return fail(path + ": cannot open the key file");
  std::stringstream text;
  text << in.rdbuf();
  return parse_curve_text(text.str(), path, need_secret);
}

expected<curve_pair> parse_curve_text(const std::string& text, const std::string& path, bool need_secret) {
  std::istringstream in(text);
  curve_pair out;
  std::string line;
  for (int no = 1; std::getline(in, line); ++no) {
    // Z85 uses '#', so only whole lines are comments.
    auto first = line.find_first_not_of(" \t\r");
    if (first == std::string::npos || line[first] == '#') continue;
    auto at = path + ":" + std::to_string(no) + ": ";
    auto colon = line.find(':');
    if (colon == std::string::npos) return fail(at + "expected 'public: KEY' or 'secret: KEY'");
    auto trim = [](std::string s) {
      auto a = s.find_first_not_of(" \t\r\"'"), b = s.find_last_not_of(" \t\r\"'");
      return a == std::string::npos ? std::string() : s.substr(a, b - a + 1);
    };
    auto key = trim(line.substr(0, colon)), value = trim(line.substr(colon + 1));
    if (key != "public" && key != "secret") return fail(at + "unknown key '" + key + "' (expected public or secret)");
    if (!is_z85_key(value)) return fail(at + "the " + key + " key is not 40 Z85 characters");
    (key == "public" ? out.public_key : out.secret_key) = value;
  }
  if (out.public_key.empty()) return fail(path + ": has no public key");
  if (need_secret && out.secret_key.empty())
    return fail(path + ": has no secret key (a .pub file? pass the .key file written by `sloserve keys`)");
  return out;
}

status write_curve_files(const std::string& dir, const std::string& name, const curve_pair& keys, bool force) {
  auto base = (dir.empty() ? std::string(".") : dir) + "/" + name;
  struct stat sb;
  for (auto suffix : {".key", ".pub"})
    if (!force && stat((base + suffix).c_str(), &sb) == 0)
      return fail(base + suffix + " exists; pass --force to replace it");
  auto write = [&](const std::string& path, const std::string& text, mode_t mode) -> status {
    std::ofstream out(path, std::ios::trunc);
    out << text;
    out.close();
    if (!out || chmod(path.c_str(), mode) != 0) return fail(path + ": cannot write the key file");
    return {};
  };
  auto pub = "public: \"" + keys.public_key + "\"\n";
  if (auto s = write(base + ".key",
                     "# CurveZMQ key pair of '" + name + "' (sloserve keys). Keep it secret.\n" + pub + "secret: \"" +
                         keys.secret_key + "\"\n",
                     0600);
      !s)
    return s;
  return write(base + ".pub", "# CurveZMQ public key of '" + name + "' (sloserve keys).\n" + pub, 0644);
}

status set_curve_client(void* socket, const curve_pair& ours, const std::string& server_public) {
  if (ours.public_key.empty()) return {};
  if (zmq_setsockopt(socket, ZMQ_CURVE_SERVERKEY, server_public.c_str(), 40) != 0 ||
      zmq_setsockopt(socket, ZMQ_CURVE_PUBLICKEY, ours.public_key.c_str(), 40) != 0 ||
      zmq_setsockopt(socket, ZMQ_CURVE_SECRETKEY, ours.secret_key.c_str(), 40) != 0)
    return fail(std::string("cannot set CURVE keys: ") + zmq_strerror(zmq_errno()));
  return {};
}

void* watch_handshake_failures(void* ctx, void* socket, const char* endpoint) {
  zmq_socket_monitor(
      socket, endpoint,
      ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL | ZMQ_EVENT_HANDSHAKE_FAILED_AUTH);
  void* monitor = zmq_socket(ctx, ZMQ_PAIR);
  int zero = 0;
  zmq_setsockopt(monitor, ZMQ_LINGER, &zero, sizeof zero);
  zmq_connect(monitor, endpoint);
  return monitor;
}

bool next_handshake_failure(void* monitor, uint16_t& event, uint32_t& value) {
  // An event is a 6-byte frame (event, value) followed by the endpoint.
  zmq_msg_t ev, addr;
  zmq_msg_init(&ev);
  if (zmq_msg_recv(&ev, monitor, ZMQ_DONTWAIT) < 0) {
    zmq_msg_close(&ev);
    return false;
  }
  event = 0;
  value = 0;
  if (zmq_msg_size(&ev) >= 6) {
    std::memcpy(&event, zmq_msg_data(&ev), 2);
    std::memcpy(&value, static_cast<const char*>(zmq_msg_data(&ev)) + 2, 4);
  }
  zmq_msg_init(&addr);
  if (zmq_msg_more(&ev)) zmq_msg_recv(&addr, monitor, 0);
  zmq_msg_close(&ev);
  zmq_msg_close(&addr);
  return true;
}

std::string z85_of(const void* key32) {
  char out[41];
  zmq_z85_encode(out, static_cast<const uint8_t*>(key32), 32);
  return out;
}

expected<std::string> read_token_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return fail("token file " + path + " cannot be read");
  std::string token;
  std::getline(in, token);
  while (!token.empty() && std::isspace(static_cast<unsigned char>(token.back()))) token.pop_back();
  if (token.size() < 16) return fail("token file " + path + " must hold a token of at least 16 characters");
  return token;
}

}  // namespace sloserve
