#include "config/live_apply.hpp"

#include <yaml-cpp/yaml.h>

#include <map>
#include <set>

#include "pipelines/tensor.hpp"

namespace sloserve {

namespace {

std::string dump(const YAML::Node& n) {
  if (!n.IsDefined()) return {};
  YAML::Emitter e;
  e << YAML::Flow << n;
  return e.c_str();
}

// The keys of two maps whose values differ (a key on one side only counts).
std::vector<std::string> changed_keys(const YAML::Node& a, const YAML::Node& b,
                                      const std::set<std::string>& skip = {}) {
  std::set<std::string> keys;
  for (auto* m : {&a, &b})
    if (m->IsDefined() && m->IsMap())
      for (auto kv : *m) keys.insert(kv.first.as<std::string>());
  std::vector<std::string> out;
  for (auto& k : keys)
    if (!skip.count(k) && dump(a[k]) != dump(b[k])) out.push_back(k);
  return out;
}

// Entries by name; a model's versions above 1 as NAME:vN, as the rest of the system names them.
std::map<std::string, YAML::Node> by_name(const YAML::Node& seq) {
  std::map<std::string, YAML::Node> out;
  if (seq.IsDefined() && seq.IsSequence())
    for (auto n : seq) {
      if (!n["name"]) continue;
      auto name = n["name"].as<std::string>();
      if (auto v = n["version"]; v && v.as<std::string>() != "1") name += ":v" + v.as<std::string>();
      out.emplace(name, n);
    }
  return out;
}

// "HOST:0" (or "tcp://HOST:0") in the new file stands for whatever port the running node bound.
std::string host_of(const std::string& address) {
  auto colon = address.rfind(':');
  return colon == std::string::npos ? address : address.substr(0, colon);
}
void align_port(std::string& fresh, const std::string& running) {
  if (fresh.size() > 2 && fresh.ends_with(":0") && host_of(fresh) == host_of(running)) fresh = running;
}
void align_ports(const cluster_config& running, cluster_config& fresh) {
  for (auto& n : fresh.nodes)
    if (auto* r = running.find_node(n.name)) {
      align_port(n.address, r->address);
      align_port(n.http, r->http);
      align_port(n.grpc, r->grpc);
      align_port(n.metrics, r->metrics);
    }
}

// A node's devices as they run, without the models each group serves (which may change live).
YAML::Node devices_without_models(const YAML::Node& node) {
  YAML::Node out(YAML::NodeType::Sequence);
  auto devices = node["devices"];
  if (devices.IsDefined() && devices.IsSequence())
    for (auto g : devices) {
      YAML::Node copy(YAML::NodeType::Map);
      for (auto kv : g)
        if (kv.first.as<std::string>() != "models") copy[kv.first.as<std::string>()] = kv.second;
      out.push_back(copy);
    }
  return out;
}

std::vector<std::string> device_models(const YAML::Node& node) {
  std::vector<std::string> out;
  auto devices = node["devices"];
  if (devices.IsDefined() && devices.IsSequence())
    for (auto g : devices) out.push_back(dump(g["models"]));
  return out;
}

// Sections that are one map each (`cluster`, `runtime`, `scheduler`, ...).
const std::vector<std::string>& map_sections() {
  static const std::vector<std::string> s{"cluster", "runtime", "scheduler", "scaler", "security", "device_types"};
  return s;
}

// What a model may change under its name while it serves: not what a device loaded.
const std::set<std::string>& loaded_keys() {
  static const std::set<std::string> k{"path",   "input",      "output",    "netnn", "layers",
                                       "prefix", "preprocess", "precision", "kind"};
  return k;
}

std::string singular(const std::string& section) {
  if (section == "nodes") return "node";
  if (section == "models") return "model";
  if (section == "pipelines") return "pipeline";
  return section;
}

}  // namespace

std::string live_change::to_string() const {
  std::string out = what == kind::added ? "+ " : what == kind::removed ? "- " : "~ ";
  out += name.empty() ? section : singular(section) + " '" + name + "'";
  for (size_t i = 0; i < keys.size(); ++i) out += (i ? ", " : ": ") + keys[i];
  return out;
}

std::vector<live_change> diff_configs(const cluster_config& running, const cluster_config& fresh_in) {
  auto fresh_cfg = fresh_in;
  align_ports(running, fresh_cfg);
  auto a = YAML::Load(to_yaml(running)), b = YAML::Load(to_yaml(fresh_cfg));
  std::vector<live_change> out;
  for (auto* section : {"nodes", "models", "pipelines"}) {
    auto was = by_name(a[section]), now = by_name(b[section]);
    for (auto& [name, n] : now) {
      auto it = was.find(name);
      if (it == was.end()) {
        out.push_back({section, name, live_change::kind::added, {}});
        continue;
      }
      auto keys = changed_keys(
          it->second, n, std::string(section) == "nodes" ? std::set<std::string>{"devices"} : std::set<std::string>{});
      if (std::string(section) == "nodes") {
        if (dump(devices_without_models(it->second)) != dump(devices_without_models(n)))
          keys.push_back("devices");
        else if (device_models(it->second) != device_models(n))
          keys.push_back("devices[].models");
      }
      if (!keys.empty()) out.push_back({section, name, live_change::kind::changed, keys});
    }
    for (auto& [name, n] : was)
      if (!now.count(name)) out.push_back({section, name, live_change::kind::removed, {}});
  }
  for (auto& s : map_sections()) {
    if (dump(a[s]) == dump(b[s])) continue;
    if (!a[s].IsDefined())
      out.push_back({s, "", live_change::kind::added, {}});
    else if (!b[s].IsDefined())
      out.push_back({s, "", live_change::kind::removed, {}});
    else
      out.push_back(
          {s, "", live_change::kind::changed, a[s].IsMap() ? changed_keys(a[s], b[s]) : std::vector<std::string>{}});
  }
  return out;
}

std::vector<config_error> live_refusals(const cluster_config& running, const cluster_config& fresh,
                                        std::string_view fresh_yaml) {
  std::vector<config_error> out;
  YAML::Node doc;
  try {
    doc = YAML::Load(std::string(fresh_yaml));
  } catch (const YAML::Exception&) {
  }
  // The place of `key` in entry `name` of list `section` (or of the section, or of the file).
  auto place = [&](const std::string& section, const std::string& name, const std::string& key) {
    YAML::Mark m = YAML::Mark::null_mark();
    if (doc.IsMap() && doc[section]) {
      auto sec = doc[section];
      for (auto kv : doc)
        if (kv.first.as<std::string>() == section) m = kv.first.Mark();  // the section's key
      if (sec.IsSequence() && !name.empty())
        for (auto n : sec)
          if (n.IsMap() && n["name"] && n["name"].as<std::string>() == name) {
            m = n.Mark();
            if (!key.empty() && n[key]) m = n[key].Mark();
          }
      if (sec.IsMap() && !key.empty() && sec[key]) m = sec[key].Mark();
    }
    return m;
  };
  auto refuse = [&](const YAML::Mark& m, std::string msg) {
    bool known = m.line >= 0;
    out.push_back({fresh.file, known ? m.line + 1 : 0, known ? m.column + 1 : 0, std::move(msg)});
  };
  auto changes = diff_configs(running, fresh);
  for (auto& c : changes) {
    using k = live_change::kind;
    if (c.section == "nodes") {
      if (c.what == k::added)
        refuse(place("nodes", c.name, ""),
               "node '" + c.name + "' is not in the running cluster: nodes join by starting them, not by apply");
      else if (c.what == k::removed)
        refuse(place("nodes", "", ""), "node '" + c.name +
                                           "' runs in the cluster and the file drops it: stop the node first, then "
                                           "apply a file without it");
      else
        for (auto& key : c.keys)
          if (key != "devices[].models")
            refuse(place("nodes", c.name, key == "devices" ? "devices" : key),
                   "node '" + c.name + "': '" + key + "' cannot change while the node runs (restart it with the file)");
    } else if (c.section == "models" && c.what == k::added) {
      if (auto* m = fresh.find_model(c.name); m && m->needs_profile)
        refuse(place("models", c.name, ""), "model '" + c.name +
                                                "' has no profile, and only a starting worker measures one: give "
                                                "it a `profile:` (`sloserve profile` measures it)");
    } else if (c.section == "models" && c.what == k::changed) {
      auto* was = running.find_model(c.name);
      bool plain = was && !was->is_variant() && !was->partitioned() && !was->is_fragment() && was->netnn.empty();
      for (auto& key : c.keys)
        if (loaded_keys().count(key) && !(key == "path" && plain))
          refuse(place("models", c.name, key),
                 "model '" + c.name + "': '" + key +
                     "' cannot change under the same name while devices hold it: add the new one under another "
                     "name and point the stages at it");
    } else if (c.section == "runtime" || c.section == "security" || c.section == "cluster") {
      refuse(place(c.section, "", c.keys.empty() ? "" : c.keys.front()),
             "'" + c.section + "' cannot change while the cluster runs (restart its nodes with the file)");
    } else if (c.section == "scaler" && running.scaler.policy != fresh.scaler.policy) {
      refuse(place("scaler", "", "policy"), "the scaler policy cannot change while the cluster runs ('" +
                                                std::string(knob_name(running.scaler.policy)) +
                                                "' runs): its knobs can, by apply");
    } else if (c.section == "scheduler" && running.scheduler.name() != fresh.scheduler.name()) {
      refuse(place("scheduler", "", "policy"), "the scheduler policy cannot change while the cluster runs ('" +
                                                   std::string(running.scheduler.name()) + "' runs)");
    }
  }
  if (running.scaler.enabled() && out.empty()) {
    for (auto& c : changes)
      if (c.section == "models" || c.section == "pipelines" || c.section == "nodes")
        return {{fresh.file, 0, 0,
                 "the scaler (scaler.policy: " + std::string(knob_name(running.scaler.policy)) +
                     ") owns placement: models and pipelines change by restart with it"}};
  }
  return out;
}

std::string live_refusal_text(const cluster_config& running, const cluster_config& fresh, std::string_view fresh_yaml) {
  config_result r;
  r.errors = live_refusals(running, fresh, fresh_yaml);
  return r.errors.empty() ? std::string() : r.error_text();
}

cluster_config merge_live(const cluster_config& running, cluster_config fresh) {
  std::map<std::string, std::vector<std::vector<std::string>>> models_of;
  for (auto& n : fresh.nodes) {
    auto& groups = models_of[n.name];
    for (auto& g : n.devices) groups.push_back(g.models);
  }
  fresh.nodes = running.nodes;
  for (auto& n : fresh.nodes) {
    auto it = models_of.find(n.name);
    if (it == models_of.end()) continue;
    for (size_t g = 0; g < n.devices.size() && g < it->second.size(); ++g) n.devices[g].models = it->second[g];
  }
  fresh.runtime = running.runtime;
  fresh.security = running.security;
  for (auto& m : fresh.models)
    if (m.needs_profile)
      if (auto* r = running.find_model(m.name); r && r->measured) {
        m.profile = r->profile;
        m.measured = true;
      }
  return fresh;
}

uint64_t config_revision(std::string_view text) {
  return fingerprint(text) | 1;
}

std::shared_ptr<const cluster_config> config_source::get() const {
  std::lock_guard lock(mutex_);
  return current_;
}

uint64_t config_source::revision() const {
  std::lock_guard lock(mutex_);
  return revision_;
}

bool config_source::set(std::shared_ptr<const cluster_config> cfg, uint64_t revision) {
  std::lock_guard lock(mutex_);
  if (revision == revision_) return false;
  kept_.push_back(std::move(current_));
  current_ = std::move(cfg);
  revision_ = revision;
  return true;
}

}  // namespace sloserve
