#pragma once
// Moving a running cluster to a new cluster file (`sloserve apply`): what changes, what cannot
// change while it serves, and the configuration every node runs afterwards. Pure: the controller
// checks and plans with it, every node merges with it, and the tests call it directly.

#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "config/cluster_config.hpp"

namespace sloserve {

struct live_change {
  // The section ("nodes", "models", "pipelines", "scheduler", ...), the entry's name where the
  // section is a list, and what happened to it.
  std::string section, name;
  enum class kind { added, removed, changed } what = kind::changed;
  std::vector<std::string> keys;  // changed: the keys whose values differ
  std::string to_string() const;  // "+ pipeline 'p2'", "~ pipeline 'p1': slo_ms", ...
};

// Every difference between the configuration a cluster runs and a new one, section by section,
// entries matched by name. Addresses the new file leaves at port 0 match the running ones on the
// same host (`sloserve up` resolved them).
std::vector<live_change> diff_configs(const cluster_config& running, const cluster_config& fresh);

// Why `fresh` cannot be applied while the cluster runs `running`, each with its place in
// `fresh_yaml` (the new file's text, as `fresh.file`): nodes added, removed or changed (but their
// devices' model lists), runtime or security changed, another scheduler or scaler policy, a
// model's tensors (or the file of one that is not plain) changed under the same name, models or
// pipelines changed under a scaler. Empty: it applies live.
std::vector<config_error> live_refusals(const cluster_config& running, const cluster_config& fresh,
                                        std::string_view fresh_yaml);
// live_refusals as one text, a line each with its place; empty where `fresh` applies live.
std::string live_refusal_text(const cluster_config& running, const cluster_config& fresh, std::string_view fresh_yaml);

// What a node runs after the change: `fresh`, with the nodes (addresses, roles, devices; the
// devices' model lists from `fresh`), runtime and security the node runs now, and the profiles it
// measured for models `fresh` keeps without a profile.
cluster_config merge_live(const cluster_config& running, cluster_config fresh);

// The revision of an applied configuration: a nonzero fingerprint of its text (0 stands for the
// file a node started with).
uint64_t config_revision(std::string_view text);

// The configuration a node runs, swapped whole when an apply reaches it. Readers take a snapshot;
// every configuration the process ran is kept, so that what a snapshot (or a pointer into one)
// refers to stays valid while requests admitted under it finish. Thread-safe.
class config_source {
 public:
  explicit config_source(std::shared_ptr<const cluster_config> cfg) : current_(std::move(cfg)) {}
  std::shared_ptr<const cluster_config> get() const;
  uint64_t revision() const;
  // Makes `cfg` current at `revision`; false (and nothing changes) when it runs that revision.
  bool set(std::shared_ptr<const cluster_config> cfg, uint64_t revision);

 private:
  mutable std::mutex mutex_;
  std::shared_ptr<const cluster_config> current_;
  uint64_t revision_ = 0;
  std::vector<std::shared_ptr<const cluster_config>> kept_;
};

}  // namespace sloserve
