#include "loadgen/socket.hpp"

#include <fmt/format.h>
#include <zmq.h>

#include <chrono>
#include <thread>

#include "messages/codec.hpp"

namespace sloserve {

using steady = std::chrono::steady_clock;

load_socket::load_socket(const load_options& o) : o_(o) {
  ctx_ = zmq_ctx_new();
  sock_ = zmq_socket(ctx_, ZMQ_DEALER);
  int v = 0;
  zmq_setsockopt(sock_, ZMQ_LINGER, &v, sizeof v);
  v = 1000000;
  zmq_setsockopt(sock_, ZMQ_SNDHWM, &v, sizeof v);
  zmq_setsockopt(sock_, ZMQ_RCVHWM, &v, sizeof v);
}

load_socket::~load_socket() {
  if (monitor_) zmq_close(monitor_);
  zmq_close(sock_);
  zmq_ctx_term(ctx_);
}

status load_socket::connect() {
  if (auto s = set_curve_client(sock_, o_.key, o_.server_key); !s) return s;
  // Handshake failures (a refused key, a plain client at a CURVE node) come only as monitor
  // events; without them a refused client would just see silence.
  monitor_ = watch_handshake_failures(ctx_, sock_, "inproc://load.monitor");
  if (zmq_connect(sock_, o_.address.c_str()) != 0)
    return fail("cannot connect to " + o_.address + ": " + zmq_strerror(zmq_errno()));
  return {};
}

void load_socket::send(bytes frame) {
  auto* held = new bytes(std::move(frame));
  zmq_msg_t m;
  zmq_msg_init_data(
      &m, const_cast<char*>(held->data()), held->size(), [](void*, void* hint) { delete static_cast<bytes*>(hint); },
      held);
  if (zmq_msg_send(&m, sock_, 0) < 0) zmq_msg_close(&m);
}

std::string load_socket::refused() {
  std::string why;
  uint16_t event;
  uint32_t value;
  while (next_handshake_failure(monitor_, event, value))
    why = event == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH
              ? "the node refused this client's public key (is it listed under security.clients?)"
          : o_.key.public_key.empty()
              ? "the handshake failed; the node requires CurveZMQ (pass --key)"
              : "the CurveZMQ handshake failed (wrong server key, or the node does not use CURVE)";
  return why;
}

bool load_socket::recv(std::string& out, int timeout_ms) {
  zmq_pollitem_t it{sock_, 0, ZMQ_POLLIN, 0};
  if (zmq_poll(&it, 1, timeout_ms) <= 0) return false;
  zmq_msg_t m;
  zmq_msg_init(&m);
  if (zmq_msg_recv(&m, sock_, ZMQ_DONTWAIT) < 0) {
    zmq_msg_close(&m);
    return false;
  }
  out.assign(static_cast<const char*>(zmq_msg_data(&m)), zmq_msg_size(&m));
  zmq_msg_close(&m);
  return true;
}

expected<msg::status_reply> wait_ready(load_connection& c, const load_options& o) {
  auto until = steady::now() + std::chrono::milliseconds(static_cast<int64_t>(o.wait_ready_s * 1000));
  std::string detail = "no answer", frame;
  msg::decode_limits limits;
  for (uint64_t token = 1; steady::now() < until; ++token) {
    // A run of one pipeline waits for that pipeline alone; a mix for them all.
    c.send(msg::encode_frame({{}, msg::status_request{token, o.mix.empty() ? o.pipeline : std::string()}}));
    auto wait_until = steady::now() + std::chrono::milliseconds(200);
    while (steady::now() < wait_until) {
      if (auto why = c.refused(); !why.empty()) return fail("frontend at " + o.address + ": " + why);
      if (!c.recv(frame, 50)) continue;
      auto d = msg::decode(frame, limits);
      if (!d.value) continue;
      if (auto* r = std::get_if<msg::status_reply>(&d.value->content); r && r->token == token) {
        if (r->ready) return *r;
        detail = r->detail;
        break;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return fail(fmt::format("frontend at {} not ready after {:g} s: {}", o.address, o.wait_ready_s, detail));
}

}  // namespace sloserve
