// The built-in policies' parts of the cluster file (config/policy_config.hpp), one line each: a
// policy with a section of its own or demands on the rest of the file. Built into the config
// library, so that every program that reads a cluster file knows them.

#include "config/policy_config.hpp"
#include "scheduling/policies/graft/config.hpp"
#include "scheduling/policies/ipa/config.hpp"
#include "scheduling/policies/jellyfish/config.hpp"
#include "scheduling/policies/piccolo/config.hpp"

namespace sloserve {

const std::vector<std::pair<std::string_view, policy_config (*)()>>& built_in_policy_configs() {
  static const std::vector<std::pair<std::string_view, policy_config (*)()>> all = {
      {"ipa", sched::ipa::config},
      {"jellyfish", sched::jellyfish::config},
      {"piccolo", sched::piccolo::config},
      {"graft", sched::graft::config},
  };
  return all;
}

}  // namespace sloserve
