// Every frame a node or the load client reads goes through msg::decode. Beyond not crashing
// (ASan/UBSan), whatever it accepts must encode again and decode to the same message.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "messages/codec.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  sloserve::msg::decode_limits limits{1 << 20};
  auto d = sloserve::msg::decode({reinterpret_cast<const char*>(data), size}, limits);
  if (!d.value) return 0;
  auto again = sloserve::msg::encode(*d.value);
  auto back = sloserve::msg::decode(again, limits);
  if (!back.value || sloserve::msg::encode(*back.value) != again) std::abort();
  return 0;
}
