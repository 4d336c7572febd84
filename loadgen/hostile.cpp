#include "loadgen/hostile.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>
#include <zmq.h>

#include <chrono>
#include <random>

#include "messages/codec.hpp"

namespace sloserve {

namespace {

using namespace std::chrono_literals;

// A DEALER connected to `endpoint` that never reads: sends are dropped once its queue is full.
void* dealer(void* ctx, const std::string& endpoint) {
  void* s = zmq_socket(ctx, ZMQ_DEALER);
  int zero = 0, hwm = 100000;
  zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof zero);
  zmq_setsockopt(s, ZMQ_SNDHWM, &hwm, sizeof hwm);
  zmq_connect(s, endpoint.c_str());
  return s;
}

void send(void* s, const std::string& frame) {
  zmq_send(s, frame.data(), frame.size(), ZMQ_DONTWAIT);
}

// A TCP connection to HOST:PORT that has sent `text` (the caller closes it); -1 when it could
// not connect.
int tcp_sent(const std::string& host_port, const std::string& text) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  auto colon = host_port.rfind(':');
  inet_pton(AF_INET, host_port.substr(0, colon).c_str(), &to.sin_addr);
  to.sin_port = htons(static_cast<uint16_t>(std::stoi(host_port.substr(colon + 1))));
  if (connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to) != 0) {
    close(fd);
    return -1;
  }
  (void)::send(fd, text.data(), text.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  return fd;
}

std::string request_frame(const std::string& pipeline, uint64_t id, tensor t) {
  msg::client_request r{pipeline, id, {std::move(t)}};
  return msg::encode({"", r});
}

std::string post(const std::string& pipeline, size_t length, const std::string& body) {
  return "POST /v2/models/" + pipeline +
         "/infer HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(length) +
         "\r\n\r\n" + body;
}

}  // namespace

hostile_clients::hostile_clients(target t) : t_(std::move(t)), ctx_(zmq_ctx_new()) {
  // Each attacker: a body run every `every` until stopped, with sockets of its own (a ZeroMQ
  // socket is used by one thread only).
  auto every = [this](auto body, std::chrono::microseconds period) {
    threads_.emplace_back([this, body, period]() mutable {
      std::mt19937_64 rng(sent_.fetch_add(1) + 7);
      while (on_) {
        body(rng);
        ++sent_;
        std::this_thread::sleep_for(period);
      }
    });
  };
  auto kept = [this](void* s) { return sockets_.push_back(s), s; };
  auto limit = t_.max_payload_bytes;
  tensor image{"input", dtype::float32, {3, 32, 32}, std::string(3 * 32 * 32 * 4, '\1')};
  auto valid = request_frame(t_.pipeline, 1, image);
  every(
      [valid, garbage = kept(dealer(ctx_, t_.endpoint))](std::mt19937_64& rng) {
        std::string f(1 + rng() % 4096, '\0');
        for (auto& c : f) c = static_cast<char>(rng());
        send(garbage, f);
        send(garbage, valid.substr(0, rng() % valid.size()));
      },
      500us);
  auto lying = request_frame(t_.pipeline, 2, {"input", dtype::float32, {100000, 100000}, std::string(16, '\0')});
  auto over_payload = request_frame(
      t_.pipeline, 3, {"input", dtype::uint8, {static_cast<int64_t>(limit) + 8}, std::string(limit + 8, 'x')});
  auto over_frame = std::string(limit + 65536 + 1024, '\0');
  every(
      [this, lying, over_payload, over_frame, liar = kept(dealer(ctx_, t_.endpoint))](std::mt19937_64&) {
        send(liar, lying);
        void* s = dealer(ctx_, t_.endpoint);
        send(s, over_payload);
        send(s, over_frame);
        zmq_close(s);
      },
      20ms);
  every(
      [this](std::mt19937_64& rng) {
        void* s = dealer(ctx_, t_.endpoint);
        send(s, std::string(8 + rng() % 64, static_cast<char>(rng())));
        zmq_close(s);
      },
      3300us);
  // Its kernel receive buffer and ZeroMQ queue are small, so that the node's queue for it fills
  // within a short run.
  void* deaf = kept(zmq_socket(ctx_, ZMQ_DEALER));
  int tiny = 4096, one = 1, none = 0;
  zmq_setsockopt(deaf, ZMQ_RCVBUF, &tiny, sizeof tiny);
  zmq_setsockopt(deaf, ZMQ_RCVHWM, &one, sizeof one);
  zmq_setsockopt(deaf, ZMQ_LINGER, &none, sizeof none);
  zmq_connect(deaf, t_.endpoint.c_str());
  // Eight asks a tick, so that the replies outgrow the megabytes of kernel buffers the node's end
  // of the connection takes within seconds, whatever the pace of this thread's ticks.
  every(
      [ask = msg::encode({"", msg::status_request{9}}), deaf](std::mt19937_64&) {
        for (int i = 0; i < 8; ++i) send(deaf, ask);
      },
      200us);
  if (t_.http.empty()) return;
  every(
      [this, limit](std::mt19937_64& rng) {
        std::string noise(1 + rng() % 2048, '\0');
        for (auto& c : noise) c = static_cast<char>(rng());
        if (int fd = tcp_sent(t_.http, noise); fd >= 0) close(fd);
        for (auto& text : {post(t_.pipeline, limit - limit / 20, std::string(100, '{')),
                           post(t_.pipeline, 64 << 20, "{}"), post(t_.pipeline, 9, "not json!")}) {
          int fd = tcp_sent(t_.http, text);
          if (fd < 0) continue;
          char answer[512];
          pollfd p{fd, POLLIN, 0};
          if (poll(&p, 1, 5) > 0) (void)recv(fd, answer, sizeof answer, MSG_DONTWAIT);
          close(fd);
        }
      },
      10ms);
}

void hostile_clients::stop() {
  if (!ctx_) return;
  on_ = false;
  for (auto& t : threads_) t.join();
  threads_.clear();
  for (auto* s : sockets_) zmq_close(s);
  sockets_.clear();
  zmq_ctx_term(ctx_);
  ctx_ = nullptr;
}

}  // namespace sloserve
