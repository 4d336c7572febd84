#pragma once
// Prometheus's text exposition format (0.0.4), piece by piece: labels, numbers, a family's
// header and its samples. For actors/metrics.cpp and actors/process_metrics.cpp.

#include <fmt/format.h>

#include <cmath>
#include <iterator>
#include <string>
#include <string_view>

#include "actors/metrics.hpp"

namespace sloserve::exposition {

inline std::string label(std::string_view name, std::string_view value) {
  return fmt::format("{}=\"{}\"", name, escape_label(value));
}

inline std::string label2(std::string_view n1, std::string_view v1, std::string_view n2, std::string_view v2) {
  return label(n1, v1) + "," + label(n2, v2);
}

// A sample value as Prometheus reads it: integers without a point, others in shortest form.
inline std::string number(double v) {
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (std::isnan(v)) return "NaN";
  return fmt::format("{}", v);
}

inline void header(std::string& out, std::string_view name, std::string_view type, std::string_view help) {
  fmt::format_to(std::back_inserter(out), "# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
}

inline void sample(std::string& out, std::string_view name, const std::string& labels, double v) {
  if (labels.empty())
    fmt::format_to(std::back_inserter(out), "{} {}\n", name, number(v));
  else
    fmt::format_to(std::back_inserter(out), "{}{{{}}} {}\n", name, labels, number(v));
}

}  // namespace sloserve::exposition
