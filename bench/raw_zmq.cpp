// The raw ZeroMQ baseline of bench/overhead: a relay and an echo, each a single-threaded process.

#include "bench/raw_zmq.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>
#include <zmq.h>

#include <algorithm>
#include <cstring>

#include "messages/codec.hpp"

namespace sloserve::raw_zmq {

int free_port() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof sa;
  bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa);
  getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len);
  close(fd);
  return ntohs(sa.sin_port);
}

std::string ep(int port) {
  return "tcp://127.0.0.1:" + std::to_string(port);
}

[[noreturn]] void run_echo(int port, std::optional<sloserve::tensor_spec> reply) {
  void* ctx = zmq_ctx_new();
  void* s = zmq_socket(ctx, ZMQ_ROUTER);
  zmq_bind(s, ep(port).c_str());
  msg::decode_limits limits;
  auto output = reply ? make_tensor(*reply, 3, "output") : tensor{};
  while (true) {
    zmq_msg_t parts[3];
    int n = 0;
    do {
      zmq_msg_init(&parts[n]);
      zmq_msg_recv(&parts[n], s, 0);
    } while (zmq_msg_more(&parts[n]) && ++n < 3);
    int last = std::min(n, 2);
    if (reply) {
      // Read the id without copying the payload (the frame outlives the decoded view).
      auto* data = static_cast<const char*>(zmq_msg_data(&parts[last]));
      auto d = msg::decode_frame(
          bytes(data, zmq_msg_size(&parts[last]), std::shared_ptr<const void>(data, [](const void*) {})), limits);
      auto* r = d.value ? std::get_if<msg::client_request>(&d.value->content) : nullptr;
      uint64_t id = r ? r->request_id : 0;
      auto f = msg::encode({{}, msg::client_reply{id, msg::status::ok, {}, {output}, {}, 0}});
      zmq_msg_close(&parts[last]);
      zmq_msg_init_size(&parts[last], f.size());
      std::memcpy(zmq_msg_data(&parts[last]), f.data(), f.size());
    }
    for (int i = 0; i <= last; ++i) zmq_msg_send(&parts[i], s, i < last ? ZMQ_SNDMORE : 0);
  }
}

[[noreturn]] void run_relay(int front, int back) {
  void* ctx = zmq_ctx_new();
  void* r = zmq_socket(ctx, ZMQ_ROUTER);
  void* d = zmq_socket(ctx, ZMQ_DEALER);
  zmq_bind(r, ep(front).c_str());
  zmq_connect(d, ep(back).c_str());
  zmq_pollitem_t items[2] = {{r, 0, ZMQ_POLLIN, 0}, {d, 0, ZMQ_POLLIN, 0}};
  auto forward = [](void* from, void* to) {
    while (true) {
      zmq_msg_t m;
      zmq_msg_init(&m);
      if (zmq_msg_recv(&m, from, ZMQ_DONTWAIT) < 0) {
        zmq_msg_close(&m);
        return;
      }
      bool more = zmq_msg_more(&m);
      zmq_msg_send(&m, to, more ? ZMQ_SNDMORE : 0);
      while (more) {
        zmq_msg_init(&m);
        zmq_msg_recv(&m, from, 0);
        more = zmq_msg_more(&m);
        zmq_msg_send(&m, to, more ? ZMQ_SNDMORE : 0);
      }
    }
  };
  while (true) {
    zmq_poll(items, 2, -1);
    if (items[0].revents & ZMQ_POLLIN) forward(r, d);
    if (items[1].revents & ZMQ_POLLIN) forward(d, r);
  }
}

pid_t fork_fn(std::function<void()> f) {
  pid_t p = fork();
  if (p == 0) {
    f();
    _exit(0);
  }
  return p;
}

}  // namespace sloserve::raw_zmq
