#pragma once
// The sections of scalar settings (`runtime`, `scheduler`, `scaler`, and the policies' own sections):
// each key is defined once, in a table naming the member it fills. The table drives the parser
// (config/settings.cpp, with file:line:column errors), the emitter (to_yaml), and config_keys(),
// against which the tests check the rows of docs/configuration.md. What values a key may take is
// checked beside the table, section by section.

#include <string_view>
#include <variant>
#include <vector>

#include "config/cluster_config.hpp"

namespace sloserve::settings {

template <class S>
struct key {
  const char* name;
  std::variant<int S::*, long S::*, double S::*, bool S::*, drop_policy_kind S::*, balancer_kind S::*,
               scheduler_policy S::*, split_policy S::*, scaler_policy S::*, predictor_kind S::*>
      member;
};

const std::vector<key<runtime_options>>& runtime_keys();
// Besides these, `policy` (a built-in name or one a program registered), `rate_band` ([low,
// high]) and the policy's own section (config/policy_config.hpp).
const std::vector<key<scheduler_options>>& scheduler_keys();
const std::vector<key<scaler_options>>& scaler_keys();

// The names of a table's keys, then `extra`.
template <class S>
std::vector<std::string_view> names_of(const std::vector<key<S>>& keys, std::vector<std::string_view> extra = {}) {
  std::vector<std::string_view> out;
  for (auto& k : keys) out.push_back(k.name);
  out.insert(out.end(), extra.begin(), extra.end());
  return out;
}

}  // namespace sloserve::settings
