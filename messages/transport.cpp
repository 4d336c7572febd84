#include "messages/transport.hpp"

#include <sys/eventfd.h>
#include <unistd.h>
#include <zmq.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "messages/codec.hpp"
#include "messages/endpoint.hpp"

namespace sloserve {
namespace {

void set_int(void* s, int opt, int v) {
  zmq_setsockopt(s, opt, &v, sizeof v);
}

// Hands a frame's bytes to ZeroMQ by reference: the message holds a share of their owner.
bool send_frame(void* sock, bytes&& frame, int flags) {
  zmq_msg_t msg;
  if (frame.owner()) {
    auto* share = new std::shared_ptr<const void>(frame.owner());
    zmq_msg_init_data(
        &msg, const_cast<char*>(frame.data()), frame.size(),
        [](void*, void* hint) { delete static_cast<std::shared_ptr<const void>*>(hint); }, share);
  } else {
    zmq_msg_init_size(&msg, frame.size());
    if (frame.size()) std::memcpy(zmq_msg_data(&msg), frame.data(), frame.size());
  }
  if (zmq_msg_send(&msg, sock, flags) < 0) {
    zmq_msg_close(&msg);
    return false;
  }
  return true;
}

// The parts as one message. A message is queued whole or not at all (ZeroMQ's multipart
// atomicity), so a refused first part leaves nothing behind.
bool send_parts(void* sock, std::vector<bytes>& parts) {
  for (size_t i = 0; i < parts.size(); ++i)
    if (!send_frame(sock, std::move(parts[i]), ZMQ_DONTWAIT | (i + 1 < parts.size() ? ZMQ_SNDMORE : 0))) return false;
  return true;
}

// A received ZeroMQ message as bytes that own it: it is closed when the last share goes.
bytes hold(zmq_msg_t& m) {
  auto* held = new zmq_msg_t;
  zmq_msg_init(held);
  zmq_msg_move(held, &m);
  std::shared_ptr<const void> owner(held, [](const void* p) {
    auto* x = static_cast<zmq_msg_t*>(const_cast<void*>(p));
    zmq_msg_close(x);
    delete x;
  });
  return bytes(static_cast<const char*>(zmq_msg_data(held)), zmq_msg_size(held), std::move(owner));
}

}  // namespace

transport::transport(transport_options opts, handler on_frame)
    : opts_(std::move(opts)), on_frame_(std::move(on_frame)) {}

transport::~transport() {
  stop();
}

bool transport::secure() const {
  return !opts_.curve.secret_key.empty();
}

status transport::start() {
  ctx_ = zmq_ctx_new();
  auto fail = [this](std::string err) {
    for (auto** s : {&zap_, &monitor_, &router_})
      if (*s) zmq_close(*s), *s = nullptr;
    zmq_ctx_term(ctx_);
    ctx_ = nullptr;
    return sloserve::fail(std::move(err));
  };
  if (secure()) {
    // The ZAP handler must be bound before any CURVE socket authenticates (RFC 27).
    zap_ = zmq_socket(ctx_, ZMQ_REP);
    set_int(zap_, ZMQ_LINGER, 0);
    if (zmq_bind(zap_, "inproc://zeromq.zap.01") != 0)
      return fail(std::string("cannot bind the ZAP handler: ") + zmq_strerror(zmq_errno()));
  }
  router_ = zmq_socket(ctx_, ZMQ_ROUTER);
  set_int(router_, ZMQ_LINGER, 0);
  set_int(router_, ZMQ_SNDHWM, opts_.client_send_hwm);
  set_int(router_, ZMQ_RCVHWM, opts_.recv_hwm);
  set_int(router_, ZMQ_ROUTER_MANDATORY, 1);
  if (opts_.max_message_bytes > 0)
    zmq_setsockopt(router_, ZMQ_MAXMSGSIZE, &opts_.max_message_bytes, sizeof opts_.max_message_bytes);
  if (secure()) {
    set_int(router_, ZMQ_CURVE_SERVER, 1);
    zmq_setsockopt(router_, ZMQ_CURVE_SECRETKEY, opts_.curve.secret_key.c_str(), 40);
    zmq_setsockopt(router_, ZMQ_ZAP_DOMAIN, "sloserve", 8);
    // Clients that fail the handshake (wrong mechanism, unknown server key) never reach ZAP;
    // the socket monitor reports them.
    monitor_ = watch_handshake_failures(ctx_, router_, "inproc://sloserve.router.monitor");
  }
  // A name (tcp://ctl:7100) is bound as the address it stands for here (messages/endpoint.hpp).
  auto bind = bind_endpoint(opts_.bind);
  if (zmq_bind(router_, bind.c_str()) != 0)
    return fail("cannot bind " + opts_.bind + (bind == opts_.bind ? "" : " (as " + bind + ")") + ": " +
                zmq_strerror(zmq_errno()));
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
  for (auto& p : peers_) zmq_close(p.data), zmq_close(p.control);
  peers_.clear();
  if (router_ && monitor_) zmq_socket_monitor(router_, nullptr, 0);
  for (auto* s : {zap_, monitor_})
    if (s) zmq_close(s);
  zap_ = monitor_ = nullptr;
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

void transport::connect_peer(const std::string& name, const std::string& address, const std::string& server_key) {
  enqueue({outbound::connect, name, address, server_key, {}});
}

void transport::send_to_peer(const std::string& name, bytes frame, bool control) {
  std::vector<bytes> parts;
  parts.push_back(std::move(frame));
  send_to_peer(name, std::move(parts), control);
}

void transport::send_to_peer(const std::string& name, std::vector<bytes> parts, bool control) {
  enqueue({outbound::peer, name, {}, {}, std::move(parts), control});
}

void transport::send_to_identity(std::string identity, bytes frame) {
  std::vector<bytes> parts;
  parts.push_back(std::move(frame));
  enqueue({outbound::identity, std::move(identity), {}, {}, std::move(parts)});
}

void transport::flush(std::vector<outbound>& batch) {
  for (auto& o : batch) {
    switch (o.kind) {
      case outbound::connect: {
        bool known = false;
        for (auto& p : peers_) known |= p.name == o.target;
        if (known) break;  // already connected; ZeroMQ reconnects on its own
        peer_sockets p{o.target};
        for (auto* s : {&p.data, &p.control}) {
          *s = zmq_socket(ctx_, ZMQ_DEALER);
          set_int(*s, ZMQ_LINGER, 0);
          set_int(*s, ZMQ_SNDHWM, opts_.send_hwm);
          set_int(*s, ZMQ_RECONNECT_IVL, 50);
          set_int(*s, ZMQ_RECONNECT_IVL_MAX, 500);
          // ZMTP heartbeats: a connection that stops carrying anything (a partition, a peer
          // frozen) is dropped and dialled afresh, instead of waiting out TCP's retransmission
          // backoff once the network heals.
          if (opts_.zmtp_heartbeat_ms > 0) {
            set_int(*s, ZMQ_HEARTBEAT_IVL, opts_.zmtp_heartbeat_ms);
            set_int(*s, ZMQ_HEARTBEAT_TIMEOUT, opts_.zmtp_timeout_ms);
          }
          if (auto set = secure() ? set_curve_client(*s, opts_.curve, o.key) : status{}; !set) {
            ++counters_.send_failures;
            if (opts_.on_refused) opts_.on_refused("peer '" + o.target + "': " + set.error());
          }
          zmq_connect(*s, o.address.c_str());
        }
        peers_.push_back(std::move(p));
        break;
      }
      case outbound::peer: {
        void* s = nullptr;
        for (auto& p : peers_)
          if (p.name == o.target) s = o.control ? p.control : p.data;
        if (s && send_parts(s, o.parts))
          ++counters_.sent;
        else
          ++counters_.send_failures;
        break;
      }
      case outbound::identity: {
        zmq_msg_t id;
        zmq_msg_init_size(&id, o.target.size());
        std::memcpy(zmq_msg_data(&id), o.target.data(), o.target.size());
        if (zmq_msg_send(&id, router_, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0) {
          // ROUTER_MANDATORY: EHOSTUNREACH for a client that is gone, EAGAIN for one whose
          // queue is full.
          bool gone = zmq_errno() == EHOSTUNREACH;
          zmq_msg_close(&id);
          ++counters_.send_failures;
          if (opts_.on_reply_dropped) opts_.on_reply_dropped(o.target, gone);
          break;
        }
        if (send_parts(router_, o.parts))
          ++counters_.sent;
        else
          ++counters_.send_failures;
        break;
      }
    }
  }
  batch.clear();
}

void transport::receive_all() {
  zmq_msg_t id, part;
  std::vector<bytes> parts;
  for (int i = 0; i < 4096; ++i) {
    zmq_msg_init(&id);
    if (zmq_msg_recv(&id, router_, ZMQ_DONTWAIT) < 0) {
      zmq_msg_close(&id);
      return;
    }
    parts.clear();
    std::string user;
    // A message's parts arrive together (ZeroMQ delivers a multipart message whole). Beyond
    // max_parts they are read and dropped, and the message is refused as malformed.
    for (bool more = zmq_msg_more(&id); more;) {
      zmq_msg_init(&part);
      if (zmq_msg_recv(&part, router_, 0) < 0) {
        zmq_msg_close(&part);
        break;
      }
      more = zmq_msg_more(&part);
      if (parts.empty() && secure())
        if (const char* u = zmq_msg_gets(&part, "User-Id")) user = u;  // the property belongs to the message
      if (parts.size() <= msg::max_parts)
        parts.push_back(hold(part));
      else
        zmq_msg_close(&part);
    }
    if (!parts.empty()) {
      ++counters_.received;
      on_frame_({static_cast<const char*>(zmq_msg_data(&id)), zmq_msg_size(&id)}, parts, user);
    }
    zmq_msg_close(&id);
  }
}

// RFC 27 (ZAP): a request is version, request id, domain, address, routing id, mechanism and
// the credentials (for CURVE, the client's 32-byte public key). Admits listed keys only.
void transport::answer_zap() {
  std::vector<std::string> req;
  for (bool more = true; more;) {
    zmq_msg_t m;
    zmq_msg_init(&m);
    if (zmq_msg_recv(&m, zap_, ZMQ_DONTWAIT) < 0) {
      zmq_msg_close(&m);
      if (req.empty()) return;
      break;
    }
    req.emplace_back(static_cast<const char*>(zmq_msg_data(&m)), zmq_msg_size(&m));
    more = zmq_msg_more(&m);
    zmq_msg_close(&m);
  }
  std::string status = "400", text = "malformed ZAP request", user;
  if (req.size() >= 7 && req[0] == "1.0" && req[5] == "CURVE" && req[6].size() == 32) {
    user = z85_of(req[6].data());
    bool listed = std::find(opts_.allowed.begin(), opts_.allowed.end(), user) != opts_.allowed.end();
    status = listed ? "200" : "400";
    text = listed ? "OK" : "public key not listed";
    if (!listed) {
      ++counters_.refused;
      if (opts_.on_refused)
        opts_.on_refused("refused a CURVE client from " + req[3] + ": its public key " + user +
                         " is not listed under security.clients");
    }
  } else if (req.size() >= 6) {
    text = "mechanism " + req[5] + " is not allowed";
    ++counters_.refused;
    if (opts_.on_refused) opts_.on_refused("refused a " + req[5] + " client from " + req[3] + ": CURVE required");
  }
  std::string reply[6] = {"1.0", req.size() > 1 ? req[1] : "", status, text, status == "200" ? user : "", ""};
  for (int i = 0; i < 6; ++i) zmq_send(zap_, reply[i].data(), reply[i].size(), i < 5 ? ZMQ_SNDMORE : 0);
}

// Socket monitor events: a 6-byte frame (event, value) and then the endpoint.
void transport::read_monitor() {
  uint16_t event;
  uint32_t value;
  while (next_handshake_failure(monitor_, event, value)) {
    // ZAP refusals were reported by answer_zap already.
    if (event == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH) continue;
    ++counters_.refused;
    if (opts_.on_refused)
      opts_.on_refused(std::string("refused a connection: the handshake failed (") +
                       (event == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL ? "protocol error " + std::to_string(value)
                                                                     : std::string("no CURVE handshake")) +
                       "); the client must use CURVE with this node's public key");
  }
}

void transport::run() {
  std::vector<outbound> batch;
  zmq_pollitem_t items[4] = {{router_, 0, ZMQ_POLLIN, 0},
                             {nullptr, wake_fd_, ZMQ_POLLIN, 0},
                             {zap_, 0, ZMQ_POLLIN, 0},
                             {monitor_, 0, ZMQ_POLLIN, 0}};
  int n_items = secure() ? 4 : 2;
  while (running_) {
    if (zmq_poll(items, n_items, 100) < 0 && zmq_errno() != EINTR) break;
    if (n_items == 4) {
      if (items[2].revents & ZMQ_POLLIN) answer_zap();
      if (items[3].revents & ZMQ_POLLIN) read_monitor();
    }
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
