#include "gpu/netnn/features.hpp"

#include <cstring>
#include <string_view>

#include "pipelines/tensor.hpp"

namespace sloserve::netnn {

uint64_t flow_key(const packet& p) {
  // Protocol (byte 9), then addresses and ports (bytes 12-23).
  std::array<char, 13> tuple{};
  tuple[0] = static_cast<char>(p.head[9]);
  std::memcpy(tuple.data() + 1, p.head.data() + 12, 12);
  auto h = fingerprint(std::string_view(tuple.data(), tuple.size()));
  return h ? h : 1;
}

packet packet_of(const uint8_t* record) {
  packet p;
  std::memcpy(p.head.data(), record, head_bytes);
  for (int k = 7; k >= 0; --k) p.arrival_us = p.arrival_us << 8 | record[head_bytes + k];
  return p;
}

uint8_t log_time(uint32_t us) {
  if (us == 0xFFFFFFFFu) return 255;
  if (us < 8) return static_cast<uint8_t>(us);
  int msb = 31;
  while (!(us >> msb)) --msb;  // a switch finds it by a longest-prefix-match table
  uint32_t v = static_cast<uint32_t>(msb - 2) * 8 + ((us >> (msb - 3)) & 7);
  return static_cast<uint8_t>(v > 255 ? 255 : v);
}

bool observe(flow_state& f, const packet& p) {
  if (f.count > 0) {
    auto gap = p.arrival_us - f.last_us;
    auto iat = static_cast<uint32_t>(gap < 0 ? 0 : gap > 0xFFFFFFFEll ? 0xFFFFFFFEll : gap);
    if (iat < f.min_iat_us) f.min_iat_us = iat;
    if (iat > f.max_iat_us) f.max_iat_us = iat;
  }
  f.last_us = p.arrival_us;
  ++f.count;
  return f.count <= last_inference_point && (f.count & (f.count - 1)) == 0;
}

std::vector<uint8_t> features(const packet& p, const flow_state& f) {
  std::vector<uint8_t> x;
  x.reserve(input_bits);
  auto bits = [&](uint8_t b) {
    for (int k = 7; k >= 0; --k) x.push_back(static_cast<uint8_t>((b >> k) & 1));
  };
  for (auto b : p.head) bits(b);
  bits(log_time(f.min_iat_us));
  bits(log_time(f.count > 1 ? f.max_iat_us : 0xFFFFFFFFu));
  return x;
}

}  // namespace sloserve::netnn
