#pragma once
// Command-line options for knobs: they take the names of the knob's table (config/knobs.hpp) and
// list them in the help text.

#include <CLI/CLI.hpp>
#include <map>
#include <string>

#include "config/knobs.hpp"

namespace sloserve {

template <class E>
CLI::Option* add_knob_option(CLI::App* cmd, const std::string& flags, E& value, const std::string& what) {
  std::map<std::string, E> names;
  for (auto& [v, n] : knob<E>::names) names.emplace(std::string(n), v);
  return cmd->add_option(flags, value, what + ": " + knob_alternatives<E>())
      ->transform(CLI::CheckedTransformer(names))
      ->default_str(std::string(knob_name(value)));
}

}  // namespace sloserve
