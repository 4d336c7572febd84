// The cluster-file loader: any text gets either a config or errors with a place, never a crash.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "config/cluster_config.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto r = sloserve::parse_cluster_config({reinterpret_cast<const char*>(data), size}, "/fuzz/cluster.yaml");
  if (!r) {
    if (r.errors.empty()) std::abort();  // a refusal always says why
    return 0;
  }
  (void)sloserve::to_yaml(*r.config);
  return 0;
}
