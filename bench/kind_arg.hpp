#pragma once
// The device kind a benchmark runs on, from its command line (default cpu).

#include <cstdio>
#include <optional>
#include <string>

#include "config/knobs.hpp"

namespace sloserve::bench {

// argv[index] as a device kind (cpu when absent); prints the choices and returns nothing when it
// is no kind. `name` gets the name as given.
inline std::optional<device_kind> kind_arg(int argc, char** argv, int index, std::string& name) {
  name = argc > index ? argv[index] : "cpu";
  auto kind = parse_knob<device_kind>(name);
  if (!kind) fprintf(stderr, "unknown device kind '%s' (%s)\n", name.c_str(), knob_alternatives<device_kind>().c_str());
  return kind;
}

}  // namespace sloserve::bench
