#pragma once
// Hostile clients against one frontend node, for the abuse test and the mixed soak. Over
// ZeroMQ: random frames and valid requests cut short (2,000 a second each); requests that
// declare [100000, 100000] float32 with 16 bytes behind them, and frames just over the payload
// limit and just over the frame limit, on fresh connections (50 a second); a flood of fresh
// connections with a random frame each (300 a second); a client that asks for the status 5,000
// times a second and never reads. Over HTTP, on fresh connections (100 a second): random bytes,
// bodies that declare almost the payload limit and send 100 bytes, bodies declared over the
// limit, bodies that are not JSON. Each on a thread of its own from construction to stop().

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

namespace sloserve {

class hostile_clients {
 public:
  struct target {
    std::string endpoint;  // the node's ZeroMQ address
    std::string http;      // its HTTP HOST:PORT; empty: no HTTP attack
    std::string pipeline = "traffic";
    size_t max_payload_bytes = 1 << 20;  // the node's runtime.max_payload_bytes
  };
  explicit hostile_clients(target t);
  ~hostile_clients() { stop(); }
  hostile_clients(const hostile_clients&) = delete;
  hostile_clients& operator=(const hostile_clients&) = delete;
  // Stops every attacker and closes their sockets.
  void stop();
  // Hostile frames and connections so far.
  uint64_t sent() const { return sent_; }

 private:
  target t_;
  void* ctx_ = nullptr;
  std::atomic<bool> on_{true};
  std::atomic<uint64_t> sent_{0};
  std::vector<std::thread> threads_;
  std::vector<void*> sockets_;  // the attackers' long-lived sockets, closed once they stop
};

}  // namespace sloserve
