#pragma once
// How a table of keys (config/settings.hpp) is read from and written to YAML, for the sections of
// config/settings.cpp and for the policies' own sections (config/policy_config.hpp).

#include <yaml-cpp/yaml.h>

#include <any>
#include <functional>
#include <optional>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include "config/policy_config.hpp"
#include "config/reader.hpp"
#include "config/settings.hpp"

namespace sloserve::settings {

template <class T>
struct is_optional : std::false_type {};
template <class T>
struct is_optional<std::optional<T>> : std::true_type {};
template <class T>
struct is_vector : std::false_type {};
template <class T>
struct is_vector<std::vector<T>> : std::true_type {};

// Fills `s` from the keys of `keys` that `n` has; a knob by its name, as `where KEY`. A required
// key that is missing is an error.
template <class S>
void read_keys(config_detail::reader& r, const YAML::Node& n, S& s, const std::vector<key<S>>& keys,
               const std::string& where) {
  for (auto& k : keys)
    std::visit(
        [&](auto member) {
          auto& field = s.*member;
          using T = std::remove_reference_t<decltype(field)>;
          if constexpr (std::is_enum_v<T>) {
            r.get_knob(n, k.name, field, where, k.required, where + " " + k.name);
          } else if constexpr (is_optional<T>::value) {
            typename T::value_type x{};
            if (r.get(n, k.name, x, where, k.required)) field = x;
          } else {
            r.get(n, k.name, field, where, k.required);
          }
        },
        k.member);
}

// Writes `key: value` (a knob by its name, a list in flow style; nothing for an empty optional).
template <class T>
void emit_value(YAML::Emitter& e, const char* name, const T& field) {
  if constexpr (is_optional<T>::value) {
    if (field) e << YAML::Key << name << YAML::Value << *field;
  } else if constexpr (std::is_enum_v<T>) {
    e << YAML::Key << name << YAML::Value << std::string(knob_name(field));
  } else if constexpr (is_vector<T>::value) {
    e << YAML::Key << name << YAML::Value << YAML::Flow << field;
  } else {
    e << YAML::Key << name << YAML::Value << field;
  }
}

// Writes every key of `keys` with its value in `s`.
template <class S>
void emit_keys(YAML::Emitter& e, const S& s, const std::vector<key<S>>& keys) {
  for (auto& k : keys) std::visit([&](auto member) { emit_value(e, k.name, s.*member); }, k.member);
}

// Writes the keys of `keys` that are required or whose value in `s` differs from S's default: a
// structured section's entry as its author would write it.
template <class S>
void emit_set_keys(YAML::Emitter& e, const S& s, const std::vector<key<S>>& keys) {
  static const S defaults{};
  for (auto& k : keys)
    std::visit(
        [&](auto member) {
          if (k.required || !(s.*member == defaults.*member)) emit_value(e, k.name, s.*member);
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
