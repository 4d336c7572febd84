#pragma once
// Knobs print by their names in fmt and spdlog lines.

#include <fmt/format.h>

#include "config/knobs.hpp"

template <class E>
struct fmt::formatter<E, char, std::enable_if_t<sloserve::is_knob_v<E>>> : fmt::formatter<std::string_view> {
  template <class Context>
  auto format(E value, Context& ctx) const {
    return fmt::formatter<std::string_view>::format(sloserve::knob_name(value), ctx);
  }
};
