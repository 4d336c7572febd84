#pragma once
// What the cluster file's parser shares across its files (config/cluster_config.cpp: nodes,
// models, pipelines; config/settings.cpp: the sections of scalar settings): the reader that
// collects errors with their file, line and column, and the parsers of each section.

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "config/cluster_config.hpp"

namespace sloserve::config_detail {

// Collects errors with positions while walking the YAML tree.
class reader {
 public:
  explicit reader(std::string file) : file_(std::move(file)) {}

  void error(const YAML::Node& at, std::string msg) {
    auto m = at.IsDefined() ? at.Mark() : YAML::Mark::null_mark();
    if (m.is_null()) m = last_;
    errors_.push_back({file_, m.line + 1, m.column + 1, std::move(msg)});
  }
  void error_at(const YAML::Mark& m, std::string msg) {
    errors_.push_back({file_, m.line + 1, m.column + 1, std::move(msg)});
  }

  // Reports keys of `map` that section `section` of config_keys() does not list.
  void known_keys(const YAML::Node& map, std::string_view section, const std::string& where) {
    if (!map.IsMap()) return;
    auto all = config_keys();
    auto it = std::find_if(all.begin(), all.end(), [&](auto& x) { return x.path == section; });
    for (auto kv : map) {
      auto k = kv.first.as<std::string>("");
      if (it == all.end() || std::find(it->keys.begin(), it->keys.end(), k) == it->keys.end())
        error(kv.first, "unknown key '" + k + "' in " + where);
    }
  }

  template <class T>
  bool get(const YAML::Node& map, const char* key, T& out, const std::string& where, bool required) {
    if (map.IsDefined() && !map.IsNull()) last_ = map.Mark();
    auto n = map.IsMap() ? map[key] : YAML::Node();
    if (!n.IsDefined() || n.IsNull()) {
      if (required) error(map, where + " is missing '" + key + "'");
      return false;
    }
    try {
      out = n.as<T>();
      return true;
    } catch (const YAML::Exception&) {
      error(n, std::string("'") + key + "' in " + where + " has the wrong type");
      return false;
    }
  }

  // A knob by its name (config/knobs.hpp); an unknown name is an error naming the choices.
  template <class E>
  bool get_knob(const YAML::Node& map, const char* key, E& out, const std::string& where, bool required,
                const std::string& what) {
    std::string name;
    if (!get(map, key, name, where, required)) return false;
    if (auto v = parse_knob<E>(name)) {
      out = *v;
      return true;
    }
    error(map[key], what + " '" + name + "' is not " + knob_alternatives<E>());
    return false;
  }

  // `path` relative to the cluster file's folder, absolute and normalized.
  std::string resolve(const std::string& path) const {
    auto dir = std::filesystem::path(file_).parent_path();
    return std::filesystem::absolute(dir / path).lexically_normal().string();
  }

  std::string file_;
  std::vector<config_error> errors_;
  YAML::Mark last_ = YAML::Mark::null_mark();
};

// How messages name an entry of a list: `what 'NAME'` when it has a name, else `what`.
inline std::string named(const YAML::Node& n, const std::string& what) {
  auto name = n.IsMap() ? n["name"] : YAML::Node();
  return name && name.IsScalar() ? what + " '" + name.Scalar() + "'" : what;
}

// A number as the messages write it (%g).
inline std::string number(double x) {
  char buf[32];
  snprintf(buf, sizeof buf, "%g", x);
  return buf;
}

// `pipelines:` entries (config/pipelines.cpp), once the models are read; `security:`
// (config/security.cpp).
void parse_pipeline(reader& r, const YAML::Node& n, cluster_config& cfg);
void parse_security(reader& r, const YAML::Node& n, security_options& o);

// `models:` entries (config/models.cpp); then the variants' prefixes, once every model is read.
void parse_model(reader& r, const YAML::Node& n, cluster_config& cfg);
void resolve_prefixes(reader& r, const YAML::Node& root, cluster_config& cfg);

// The checks across sections (config/checks.cpp): nodes and their
// addresses and ingresses, and that every model a pipeline runs has a device that serves it.
// A policy that plans every device itself (`what`) refuses a scaler beside it.
void refuse_scaler(reader& r, const YAML::Node& root, const cluster_config& cfg, const std::string& what);
void check_nodes(reader& r, const YAML::Node& root, const cluster_config& cfg);
void check_served(reader& r, const YAML::Node& root, const cluster_config& cfg);
// Refuses every stage over model versions: "stage 'S' splits its traffic over model versions,
// which " + `why` (a policy that does not plan them says so in its own checks).
void refuse_versions(reader& r, const YAML::Node& root, const cluster_config& cfg, const std::string& why);

// The sections of scalar settings (config/settings.cpp).
void parse_runtime(reader& r, const YAML::Node& n, runtime_options& o);
void parse_scheduler(reader& r, const YAML::Node& n, scheduler_options& o);
// `scaler:`; `root` is the file's.
void parse_scaler(reader& r, const YAML::Node& root, cluster_config& cfg);
// The scheduling policy's demands on the file (policy_config::check), once every section is read.
void check_policy(reader& r, const YAML::Node& root, cluster_config& cfg);
// The scaler's checks of the models it sizes (config/checks.cpp), once the policy's are made.
void parse_scaler_checks(reader& r, const YAML::Node& root, const cluster_config& cfg);
// Writes the sections of scalar settings of `cfg` (runtime, scheduler, scaler).
void emit_settings(YAML::Emitter& e, const cluster_config& cfg);

}  // namespace sloserve::config_detail
