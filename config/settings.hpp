#pragma once
// The keys of the cluster file: each is defined once, in a table of its section naming the member
// it fills. The table drives the parser (with file:line:column errors), the emitter (to_yaml) and
// config_keys(), against which the tests check the rows of docs/configuration.md. What values a
// key may take is checked beside the table, section by section. The sections of scalar settings
// (`runtime`, `scheduler`, `scaler`, the policies' own) are tables alone; a structured section
// (`nodes[]`, `models[]`, ...) has a table of its plain keys, and beside it the keys that hold
// maps or lists of maps (a node's `devices`), which its parser and emitter read and write by hand.

#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "config/cluster_config.hpp"

namespace sloserve::settings {

template <class S>
struct key {
  const char* name;
  std::variant<int S::*, long S::*, double S::*, bool S::*, std::string S::*, std::vector<std::string> S::*,
               std::vector<double> S::*, std::optional<double> S::*, drop_policy_kind S::*, balancer_kind S::*,
               scheduler_policy S::*, split_policy S::*, scaler_policy S::*, predictor_kind S::*, device_kind S::*,
               actor_scheduling_kind S::*>
      member;
  bool required = false;  // the section is an error without it
};

const std::vector<key<runtime_options>>& runtime_keys();
// Besides these, `policy` (a built-in name or one a program registered), `rate_band` ([low,
// high]) and the policy's own section (config/policy_config.hpp).
const std::vector<key<scheduler_options>>& scheduler_keys();
const std::vector<key<scaler_options>>& scaler_keys();

// The structured sections' plain keys; the keys of maps and lists beside them, as config_keys()
// lists them.
const std::vector<key<cluster_config>>& cluster_keys();     // `cluster:`
const std::vector<key<device_type>>& device_type_keys();    // `device_types[]`
const std::vector<key<node_spec>>& node_keys();             // `nodes[]`; beside: roles, devices
const std::vector<key<device_group>>& device_keys();        // `nodes[].devices[]`
const std::vector<key<model_spec>>& model_keys();           // `models[]`; beside: see model_maps
const std::vector<key<core_latency>>& core_keys();          // `models[].cores`
const std::vector<key<pipeline>>& pipeline_keys();          // `pipelines[]`; beside: stages
const std::vector<key<stage>>& stage_keys();                // `pipelines[].stages[]`; beside: after, cascade, fanout
const std::vector<key<output_items>>& output_items_keys();  // `pipelines[].stages[].fanout` as a map
const std::vector<key<cascade_spec>>& cascade_keys();       // `pipelines[].stages[].cascade`; beside: skew
const std::vector<key<skew_options>>& skew_keys();          // `pipelines[].stages[].cascade.skew`
const std::vector<key<security_options>>& security_keys();  // `security:`; beside: tenants
const std::vector<key<tenant_spec>>& tenant_keys();         // `security.tenants[]`
// A model's keys beside its table: its tensors, profiles, layers and the like.
inline const std::vector<std::string_view> model_maps = {"input", "output",     "profile",   "profiles",
                                                         "cores", "preprocess", "precision", "layers"};

// The names of a table's keys, then `extra`.
template <class S>
std::vector<std::string_view> names_of(const std::vector<key<S>>& keys, std::vector<std::string_view> extra = {}) {
  std::vector<std::string_view> out;
  for (auto& k : keys) out.push_back(k.name);
  out.insert(out.end(), extra.begin(), extra.end());
  return out;
}

}  // namespace sloserve::settings
