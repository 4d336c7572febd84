#pragma once
// A cluster file's text parsed for a test; a file the parser refuses throws with its errors.

#include <stdexcept>
#include <string>

#include "config/cluster_config.hpp"

namespace sloserve::testing {

inline cluster_config parse_config(const std::string& yaml) {
  auto r = parse_cluster_config(yaml, "test.yaml");
  if (!r) throw std::runtime_error(r.error_text());
  return std::move(*r.config);
}

}  // namespace sloserve::testing
