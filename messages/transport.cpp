#include "messages/transport.hpp"

#include <sys/eventfd.h>
#include <unistd.h>
#include <zmq.h>

#include <cerrno>
#include <cstring>

namespace sloserve {
namespace {

void set_int(void* s, int opt, int v) { zmq_setsockopt(s, opt, &v, sizeof v); }

// Hands a std::string's buffer to ZeroMQ without copying it.
bool send_string(void* sock, std::string&& frame, int flags) {
  auto* owned = new std::string(std::move(frame));
  zmq_msg_t msg;
  zmq_msg_init_data(
      &msg, owned->data(), owned->size(),
      [](void*, void* hint) { delete static_cast<std::string*>(hint); }, owned);
  if (zmq_msg_send(&msg, sock, flags) < 0) {
    zmq_msg_close(&msg);
    return false;
  }
  return true;
}

}  // namespace

transport::transport(transport_options opts, handler on_frame)
    : opts_(std::move(opts)), on_frame_(std::move(on_frame)) {}

transport::~transport() { stop(); }

std::string transport::start() {
  ctx_ = zmq_ctx_new();
  router_ = zmq_socket(ctx_, ZMQ_ROUTER);
  set_int(router_, ZMQ_LINGER, 0);
  set_int(router_, ZMQ_SNDHWM, opts_.send_hwm);
  set_int(router_, ZMQ_RCVHWM, opts_.recv_hwm);
  set_int(router_, ZMQ_ROUTER_MANDATORY, 1);
  if (zmq_bind(router_, opts_.bind.c_str()) != 0) {
    std::string err = "cannot bind " + opts_.bind + ": " + zmq_strerror(zmq_errno());
    zmq_close(router_);
    router_ = nullptr;
    zmq_ctx_term(ctx_);
    ctx_ = nullptr;
    return err;
  }
  char buf[256];
  size_t len = sizeof buf;
  zmq_getsockopt(router_, ZMQ_LAST_ENDPOINT, buf, &len);
  endpoint_ = buf;
  wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  running_ = true;
  io_ = std::thread([this] { run(); });
  return {};
}

void transport::stop() {
  if (!running_.exchange(false)) return;
  uint64_t one = 1;
  [[maybe_unused]] auto n = write(wake_fd_, &one, sizeof one);
  io_.join();
  for (auto& [name, s] : peers_) zmq_close(s);
  peers_.clear();
  zmq_close(router_);
  zmq_ctx_term(ctx_);
  close(wake_fd_);
}

void transport::enqueue(outbound o) {
  bool was_empty;
  {
    std::lock_guard<std::mutex> lock(mu_);
    was_empty = queue_.empty();
    queue_.push_back(std::move(o));
  }
  // Only the first frame after a drain wakes the I/O thread; it drains everything queued.
  if (was_empty) {
    uint64_t one = 1;
    [[maybe_unused]] auto n = write(wake_fd_, &one, sizeof one);
  }
}

void transport::connect_peer(const std::string& name, const std::string& address) {
  enqueue({outbound::connect, name, address});
}

void transport::send_to_peer(const std::string& name, std::string frame) {
  enqueue({outbound::peer, name, std::move(frame)});
}

void transport::send_to_identity(std::string identity, std::string frame) {
  enqueue({outbound::identity, std::move(identity), std::move(frame)});
}

void transport::flush(std::vector<outbound>& batch) {
  for (auto& o : batch) {
    switch (o.kind) {
      case outbound::connect: {
        void* s = nullptr;
        for (auto& [n, sock] : peers_)
          if (n == o.target) s = sock;
        if (s) break;  // already connected; ZeroMQ reconnects on its own
        s = zmq_socket(ctx_, ZMQ_DEALER);
        set_int(s, ZMQ_LINGER, 0);
        set_int(s, ZMQ_SNDHWM, opts_.send_hwm);
        set_int(s, ZMQ_RECONNECT_IVL, 50);
        set_int(s, ZMQ_RECONNECT_IVL_MAX, 500);
        zmq_connect(s, o.payload.c_str());
        peers_.emplace_back(o.target, s);
        break;
      }
      case outbound::peer: {
        void* s = nullptr;
        for (auto& [n, sock] : peers_)
          if (n == o.target) s = sock;
        if (s && send_string(s, std::move(o.payload), ZMQ_DONTWAIT)) ++counters_.sent;
        else ++counters_.send_failures;
        break;
      }
      case outbound::identity: {
        zmq_msg_t id;
        zmq_msg_init_size(&id, o.target.size());
        std::memcpy(zmq_msg_data(&id), o.target.data(), o.target.size());
        if (zmq_msg_send(&id, router_, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0) {
          zmq_msg_close(&id);
          ++counters_.send_failures;  // the client is gone
          break;
        }
        if (send_string(router_, std::move(o.payload), ZMQ_DONTWAIT)) ++counters_.sent;
        else ++counters_.send_failures;
        break;
      }
    }
  }
  batch.clear();
}

void transport::receive_all() {
  zmq_msg_t id, frame;
  for (int i = 0; i < 4096; ++i) {
    zmq_msg_init(&id);
    if (zmq_msg_recv(&id, router_, ZMQ_DONTWAIT) < 0) {
      zmq_msg_close(&id);
      return;
    }
    zmq_msg_init(&frame);
    bool have = zmq_msg_more(&id) && zmq_msg_recv(&frame, router_, 0) >= 0;
    // A sender may add frames we do not expect; discard them so the next read is aligned.
    while (have && zmq_msg_more(&frame)) {
      zmq_msg_t extra;
      zmq_msg_init(&extra);
      zmq_msg_recv(&extra, router_, 0);
      bool more = zmq_msg_more(&extra);
      zmq_msg_close(&extra);
      if (!more) break;
    }
    if (have) {
      ++counters_.received;
      on_frame_({static_cast<const char*>(zmq_msg_data(&id)), zmq_msg_size(&id)},
                {static_cast<const char*>(zmq_msg_data(&frame)), zmq_msg_size(&frame)});
    }
    zmq_msg_close(&frame);
    zmq_msg_close(&id);
  }
}

void transport::run() {
  std::vector<outbound> batch;
  zmq_pollitem_t items[2] = {{router_, 0, ZMQ_POLLIN, 0}, {nullptr, wake_fd_, ZMQ_POLLIN, 0}};
  while (running_) {
    if (zmq_poll(items, 2, 100) < 0 && zmq_errno() != EINTR) break;
    if (items[1].revents & ZMQ_POLLIN) {
      uint64_t v;
      [[maybe_unused]] auto n = read(wake_fd_, &v, sizeof v);
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      batch.swap(queue_);
    }
    flush(batch);
    if (items[0].revents & ZMQ_POLLIN) receive_all();
  }
}

}  // namespace sloserve
