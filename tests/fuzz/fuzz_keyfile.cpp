// CurveZMQ key files (`security:` keys and `load --key`).
#include <cstdint>
#include <cstdlib>
#include <string>

#include "messages/curve.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  sloserve::curve_pair k;
  std::string err;
  std::string text(reinterpret_cast<const char*>(data), size);
  bool ok = sloserve::parse_curve_text(text, "fuzz.key", size % 2 == 0, k, err);
  if (ok && !sloserve::is_z85_key(k.public_key)) std::abort();
  if (!ok && err.empty()) std::abort();  // a refusal always says why
  return 0;
}
