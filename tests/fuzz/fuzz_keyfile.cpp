// CurveZMQ key files (`security:` keys and `load --key`).
#include <cstdint>
#include <cstdlib>
#include <string>

#include "messages/curve.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  auto k = sloserve::parse_curve_text(text, "fuzz.key", size % 2 == 0);
  if (k && !sloserve::is_z85_key(k->public_key)) std::abort();
  if (!k && k.error().empty()) std::abort();  // a refusal always says why
  return 0;
}
