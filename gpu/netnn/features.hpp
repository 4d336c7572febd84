#pragma once
// NetNN's feature extractor switch (seed 004, P6.3.1, P6.3.3): no feature engineering. Per flow (its
// 5-tuple, hashed into a register table) it keeps the packet count, the last arrival and the
// minimum and maximum inter-arrival times; a packet whose count is a power of two (1, 2, 4, ...,
// 1024: count & (count - 1) == 0) is an inference point, and its input is the bits of its first
// 68 bytes followed by the bits of the two inter-arrival times on a log scale, all computed with
// shifts, compares and adds.

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace sloserve::netnn {

inline constexpr int head_bytes = 68;                   // the most of a UDP/IP header and what follows
inline constexpr int input_bits = head_bytes * 8 + 16;  // + min and max inter-arrival time, 8 bits each
inline constexpr uint32_t last_inference_point = 1024;

struct packet {
  std::array<uint8_t, head_bytes> head{};  // bytes 12-19 addresses, 9 protocol, 20-23 ports (IPv4, UDP/TCP)
  int64_t arrival_us = 0;                  // the switch's hardware timestamp
};

struct flow_state {
  uint64_t key = 0;  // the 5-tuple's hash; 0: an empty slot
  uint32_t count = 0;
  int64_t last_us = 0;
  uint32_t min_iat_us = 0xFFFFFFFFu, max_iat_us = 0;
};

// The 5-tuple of `p` hashed (protocol, addresses and ports; never 0).
uint64_t flow_key(const packet& p);

// A packet from its record (packet_bytes): the first 68 bytes, then the arrival time in us as a
// little-endian int64.
inline constexpr int packet_bytes = head_bytes + 8;
packet packet_of(const uint8_t* record);

// Inter-arrival time on a log scale in 8 bits: 8 steps per power of two (the leading bit's
// position and the three bits after it; at most 239); 0xFFFFFFFF (none yet) is 255.
uint8_t log_time(uint32_t us);

// Counts `p` in its flow's state and says whether it is an inference point.
bool observe(flow_state& f, const packet& p);

// The model's input for `p` in flow state `f`: input_bits values of 0 or 1, most significant bit
// of each byte first.
std::vector<uint8_t> features(const packet& p, const flow_state& f);

}  // namespace sloserve::netnn
