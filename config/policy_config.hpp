#pragma once
// What a scheduling policy adds to the cluster file: its own section under `scheduler:`, named as
// the policy (`scheduler: {policy: P, P: {...}}`), and its demands on the rest of the file. Each
// policy defines them in its folder (scheduling/policies/<name>/config.*); the built-in ones are
// listed in scheduling/policies/configs.cpp, and sched::register_policy brings a program's own.

#include <any>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace YAML {
class Node;
class Emitter;
}  // namespace YAML

namespace sloserve {

struct cluster_config;
namespace config_detail {
class reader;
}

struct policy_config {
  // The keys of its section, for the file's key check and docs/configuration.md; empty: the
  // policy has no section.
  std::vector<std::string_view> keys;
  // The section's settings from `n` (its map, or a null node: the defaults), with errors on `r`
  // as `where KEY ...`.
  std::function<std::any(config_detail::reader& r, const YAML::Node& n, const std::string& where)> parse;
  // Writes what parse made as the section map's entries.
  std::function<void(YAML::Emitter& e, const std::any& options)> emit;
  // Its demands on the rest of the file (`root`), once every section is read; it may set what
  // follows from the policy (IPA: the scaler's policy). Null: none.
  std::function<void(config_detail::reader& r, const YAML::Node& root, cluster_config& cfg)> check;
  bool has_section() const { return !keys.empty(); }
};

// The config of the policy named `name` (a built-in's or one accepted); null when none is known.
const policy_config* policy_config_of(std::string_view name);
// Names `scheduler.policy` may take beside the built-in ones, each with its config: the registry
// of scheduling policies accepts each policy a program registers (sched::register_policy).
void accept_scheduler_policy(std::string name, policy_config config = {});
bool accepted_scheduler_policy(std::string_view name);
// The name of every policy with a section, and the section's keys.
std::vector<std::pair<std::string_view, std::vector<std::string_view>>> policy_sections();

// The built-in policies' configs, by policy name (scheduling/policies/configs.cpp).
const std::vector<std::pair<std::string_view, policy_config (*)()>>& built_in_policy_configs();

}  // namespace sloserve
