#pragma once
// How a table of keys (config/settings.hpp) is read from and written to YAML, for the sections of
// config/settings.cpp and for the policies' own sections (config/policy_config.hpp).

#include <yaml-cpp/yaml.h>

#include <any>
#include <functional>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include "config/policy_config.hpp"
#include "config/reader.hpp"
#include "config/settings.hpp"

namespace sloserve::settings {

// Fills `s` from the keys of `keys` that `n` has; a knob by its name, as `where KEY`.
template <class S>
void read_keys(config_detail::reader& r, const YAML::Node& n, S& s, const std::vector<key<S>>& keys,
               const std::string& where) {
  for (auto& k : keys)
    std::visit(
        [&](auto member) {
          auto& field = s.*member;
          if constexpr (std::is_enum_v<std::remove_reference_t<decltype(field)>>)
            r.get_knob(n, k.name, field, where, false, where + " " + k.name);
          else
            r.get(n, k.name, field, where, false);
        },
        k.member);
}

// Writes every key of `keys` with its value in `s` (a knob by its name).
template <class S>
void emit_keys(YAML::Emitter& e, const S& s, const std::vector<key<S>>& keys) {
  for (auto& k : keys)
    std::visit(
        [&](auto member) {
          auto& field = s.*member;
          e << YAML::Key << k.name << YAML::Value;
          if constexpr (std::is_enum_v<std::remove_cvref_t<decltype(field)>>)
            e << std::string(knob_name(field));
          else
            e << field;
        },
        k.member);
}

// What a section of one table of keys reads: S's defaults, then the file's keys, then
// `check_values` on the result (its errors at the section's keys, as `where ...`).
template <class S>
using value_check =
    std::function<void(config_detail::reader& r, const YAML::Node& n, const S& s, const std::string& where)>;

// A policy's section from its table of keys (which lives as long as the program: a static).
template <class S>
policy_config table_section(const std::vector<key<S>>& keys, value_check<S> check_values) {
  policy_config c;
  c.keys = names_of(keys);
  c.parse = [&keys, check_values](config_detail::reader& r, const YAML::Node& n, const std::string& where) {
    S s;
    if (n && n.IsMap()) {
      read_keys(r, n, s, keys, where);
      if (check_values) check_values(r, n, s, where);
    }
    return std::any(s);
  };
  c.emit = [&keys](YAML::Emitter& e, const std::any& options) {
    if (auto* s = std::any_cast<S>(&options)) emit_keys(e, *s, keys);
  };
  return c;
}

}  // namespace sloserve::settings
