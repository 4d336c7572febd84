#pragma once
// The ZeroMQ transport of one node: a ROUTER that binds the node's address (clients and peers
// connect to it) and two DEALERs per peer node for outgoing node-to-node traffic: one for data
// (invocations, their results, link probes) and one for control (heartbeats, registrations, load
// reports), each its own connection, so that a control frame never waits behind megabytes of
// tensors queued for a slow link (the receiving ROUTER takes the two connections in turn). One I/O
// thread owns every socket; other threads hand it frames through a queue woken by an eventfd.

#include <atomic>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "messages/curve.hpp"
#include "pipelines/bytes.hpp"
#include "pipelines/expected.hpp"

namespace sloserve {

struct transport_options {
  std::string bind;  // tcp://host:port; port 0 binds an ephemeral port
  int send_hwm = 100000;
  int recv_hwm = 100000;
  int64_t max_message_bytes = -1;  // ZMQ_MAXMSGSIZE of the ROUTER: larger frames drop the peer
  // CurveZMQ: with `curve.secret_key` set, the ROUTER is a CURVE server and a ZAP handler admits
  // only the public keys in `allowed`; peers are dialled as CURVE clients with the same pair.
  curve_pair curve;
  std::vector<std::string> allowed;  // Z85 public keys of clients and peer nodes
  // Called on the I/O thread for each refused connection, with why.
  std::function<void(const std::string&)> on_refused;
  // Messages queued for one client (the ROUTER's send high-water mark); beyond, its replies are
  // dropped at the socket.
  int client_send_hwm = 10000;
  // ZMTP heartbeats on the connections to peers (0: none), and how long one may stay silent.
  int zmtp_heartbeat_ms = 0;
  int zmtp_timeout_ms = 0;
  // Called on the I/O thread for each reply that could not go to a client: `gone` when it has
  // disconnected, else its queue is full (it does not read).
  std::function<void(const std::string& identity, bool gone)> on_reply_dropped;
};

struct transport_counters {
  std::atomic<uint64_t> received{0};
  std::atomic<uint64_t> sent{0};
  std::atomic<uint64_t> send_failures{0};
  std::atomic<uint64_t> refused{0};  // connections that failed authentication
};

class transport {
 public:
  // Runs on the I/O thread for each message on the ROUTER; `identity` is the sender's routing id
  // and `user` the public key (Z85) it authenticated with under CURVE, else empty. `parts` (one
  // or more) hold the ZeroMQ message's parts themselves (no copy), for as long as anything
  // shares them.
  using handler =
      std::function<void(std::string_view identity, const std::vector<bytes>& parts, std::string_view user)>;

  transport(transport_options opts, handler on_frame);
  ~transport();
  transport(const transport&) = delete;
  transport& operator=(const transport&) = delete;

  // Binds and starts the I/O thread. Returns why it failed, or an empty string.
  status start();
  void stop();

  // The endpoint actually bound (with the real port when the configured one was 0).
  const std::string& endpoint() const { return endpoint_; }

  // All thread-safe.
  // `server_key`: the peer's public key (Z85) when CURVE is on.
  void connect_peer(const std::string& name, const std::string& address, const std::string& server_key = {});
  // The frame's bytes go to ZeroMQ by reference (no copy). `control`: on the peer's control
  // connection (frames there keep their order among themselves, not with the data connection's).
  void send_to_peer(const std::string& name, bytes frame, bool control = false);
  // The parts as one multipart message, each by reference.
  void send_to_peer(const std::string& name, std::vector<bytes> parts, bool control = false);
  void send_to_identity(std::string identity, bytes frame);

  const transport_counters& counters() const { return counters_; }

 private:
  struct outbound {
    enum kind_t { connect, peer, identity } kind;
    std::string target;        // peer name or routing identity
    std::string address;       // connect: where the peer listens
    std::string key;           // connect: the peer's public key
    std::vector<bytes> parts;  // peer, identity: what to send
    bool control = false;      // peer: on its control connection
  };
  struct peer_sockets {
    std::string name;
    void* data = nullptr;
    void* control = nullptr;
  };

  bool secure() const;
  void enqueue(outbound o);
  void run();
  void flush(std::vector<outbound>& batch);
  void receive_all();
  void answer_zap();
  void read_monitor();

  transport_options opts_;
  handler on_frame_;
  void* ctx_ = nullptr;
  void* router_ = nullptr;
  void* zap_ = nullptr;      // ZAP handler (REP), when CURVE is on
  void* monitor_ = nullptr;  // handshake failures of the ROUTER (PAIR), when CURVE is on
  int wake_fd_ = -1;
  std::string endpoint_;
  std::thread io_;
  std::atomic<bool> running_{false};
  std::mutex mu_;
  std::vector<outbound> queue_;
  std::vector<peer_sockets> peers_;  // owned by the I/O thread
  transport_counters counters_;
};

}  // namespace sloserve
