// The fuzz build does not embed config/examples/default.yaml; the loader under test never
// asks for it.
#include "config/cluster_config.hpp"

namespace sloserve {
std::string_view default_config_yaml() {
  return {};
}
}  // namespace sloserve
