#pragma once
// Command-line options for knobs: they take the names of the knob's table (config/knobs.hpp) and
// list them in the help text.

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "config/knobs.hpp"

namespace sloserve {

template <class E>
CLI::Option* add_knob_option(CLI::App* cmd, const std::string& flags, E& value, const std::string& what) {
  std::vector<std::string> names;
  for (auto& [v, n] : knob<E>::names) names.emplace_back(n);
  return cmd
      ->add_option_function<std::string>(
          flags, [&value](const std::string& name) { value = *parse_knob<E>(name); }, what)
      ->check(CLI::IsMember(names))
      ->default_str(std::string(knob_name(value)));
}

}  // namespace sloserve
