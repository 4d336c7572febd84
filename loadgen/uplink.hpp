#pragma once
// A client's emulated uplink (`sloserve load --clients`): frames cross it one after another, each
// second at the rate its trace gives for that second, and reach the far end half a round trip
// after their last byte. A frame still crossing may be given up: the rest of its bytes are not
// sent and the frames behind it move up, as a client that cancels an upload does.

#include <chrono>
#include <cstdint>
#include <deque>
#include <optional>
#include <vector>

namespace sloserve {

class emulated_uplink {
 public:
  using clock = std::chrono::steady_clock;
  struct transfer {
    uint64_t id = 0;
    clock::time_point captured{}, start{}, end{};  // end: its last byte sent (or when it was given up)
    double bytes = 0;                              // of the frame; of what crossed, once given up
  };

  // `trace`: Mbps per second from `start`, the last second holding on (at least 0.05: a dead link
  // still trickles); null or empty: unlimited.
  emulated_uplink(const std::vector<double>* trace, clock::time_point start, double rtt_ms);

  double mbps_at(clock::time_point t) const;
  // How long `bits` take to cross from `begin`, in ms.
  double transfer_ms(clock::time_point begin, double bits) const;
  // The bits the link carries from `a` to `b`.
  double bits_between(clock::time_point a, clock::time_point b) const;

  // Frame `id` of `bytes`, captured at `at`, queued behind the frames before it.
  const transfer& send(uint64_t id, clock::time_point at, double bytes);
  // When the link has sent all it holds (or earlier: idle).
  clock::time_point free_at() const { return free_; }
  // Bytes still to cross at `t`: those queued and the rest of the one crossing.
  double backlog_bytes(clock::time_point t) const;
  // The frame crossing at `t` (its first byte sent, its last not), or null.
  const transfer* crossing(clock::time_point t) const;
  // Gives up the frame crossing at `t`; the frames behind it move up. Its record (the bytes that
  // crossed, ending at `t`) comes among `ended`. False when none was crossing.
  bool cancel(clock::time_point t);
  // Transfers that ended by `t`, each once, in the order they ended: what a client times.
  std::vector<transfer> ended(clock::time_point t);
  // Frames at the far end by `t` (their last byte plus half the round trip), popped, in order.
  std::vector<transfer> arrived(clock::time_point t);
  // When the next frame reaches the far end; none when the link holds no frame.
  std::optional<clock::time_point> next_arrival() const;

 private:
  void schedule(size_t from, clock::time_point free);
  clock::time_point at_seconds(double s) const;
  double seconds_of(clock::time_point t) const;

  const std::vector<double>* trace_;
  clock::time_point start_;
  clock::duration half_rtt_;
  std::deque<transfer> frames_;      // not yet at the far end, in order
  size_t reported_ = 0;              // of frames_' first, how many `ended` has given
  std::deque<transfer> unreported_;  // arrived or given up, not yet given by `ended`
  clock::time_point free_;
};

}  // namespace sloserve
