// The cluster file written back (to_yaml): what `sloserve up` hands each node, and what the
// round-trip tests parse again.

#include <yaml-cpp/yaml.h>

#include "config/cluster_config.hpp"
#include "config/reader.hpp"
#include "config/settings_io.hpp"

namespace sloserve {

using config_detail::emit_settings;

namespace {
void emit_tensor(YAML::Emitter& e, const char* key, const tensor_spec& t, const std::string& name) {
  e << YAML::Key << key << YAML::Value << YAML::Flow << YAML::BeginMap << YAML::Key << "dtype" << YAML::Value
    << std::string(dtype_name(t.type)) << YAML::Key << "shape" << YAML::Value << YAML::Flow << t.shape;
  if (name != key) e << YAML::Key << "name" << YAML::Value << name;
  e << YAML::EndMap;
}
void emit_profile(YAML::Emitter& e, const latency_profile& p, bool keyed = true) {
  if (keyed) e << YAML::Key << "profile" << YAML::Value;
  e << YAML::Flow << YAML::BeginMap;
  if (p.tabular()) {
    e << YAML::Key << "batch" << YAML::Value << YAML::Flow << p.batch << YAML::Key << "latency_ms" << YAML::Value
      << YAML::Flow << p.latency_ms;
    if (p.step) e << YAML::Key << "step" << YAML::Value << true;
  } else {
    e << YAML::Key << "alpha_ms" << YAML::Value << p.alpha_ms << YAML::Key << "beta_ms" << YAML::Value << p.beta_ms;
  }
  e << YAML::EndMap;
}
}  // namespace

namespace {
std::vector<std::string> role_names(const std::vector<role>& roles) {
  std::vector<std::string> out;
  for (auto r : roles) out.emplace_back(knob_name(r));
  return out;
}
}  // namespace

namespace {

void emit_nodes(YAML::Emitter& e, const cluster_config& cfg) {
  e << YAML::Key << "nodes" << YAML::Value << YAML::BeginSeq;
  for (auto& n : cfg.nodes) {
    e << YAML::BeginMap;
    settings::emit_set_keys(e, n, settings::node_keys());
    e << YAML::Key << "roles" << YAML::Value << YAML::Flow << role_names(n.roles);
    if (!n.devices.empty()) {
      e << YAML::Key << "devices" << YAML::Value << YAML::BeginSeq;
      for (auto& g : n.devices) {
        e << YAML::Flow << YAML::BeginMap;
        settings::emit_set_keys(e, g, settings::device_keys());
        e << YAML::EndMap;
      }
      e << YAML::EndSeq;
    }
    e << YAML::EndMap;
  }
  e << YAML::EndSeq;
}

// One model: its tensors, batch, profiles (a model left to be profiled at start-up stays so: its
// nodes measure it), and whatever it sets beside its defaults.
void emit_model(YAML::Emitter& e, const model_spec& spec) {
  auto named = spec;
  named.name = spec.family();  // a version's file name; `version` says which
  auto& m = named;
  e << YAML::BeginMap;
  settings::emit_set_keys(e, m, settings::model_keys());
  emit_tensor(e, "input", m.input, m.input_name);
  emit_tensor(e, "output", m.output, m.output_name);
  if (m.partitioned()) {
    e << YAML::Key << "layers" << YAML::Value << YAML::BeginSeq;
    for (size_t k = 0; k < m.layers.size(); ++k) {
      auto& l = m.layers[k];
      e << YAML::BeginMap;
      if (!l.name.empty()) e << YAML::Key << "name" << YAML::Value << l.name;
      if (k > 0) emit_tensor(e, "input", l.input, "input");
      emit_profile(e, l.profile);
      e << YAML::EndMap;
    }
    e << YAML::EndSeq;
  } else if (!m.needs_profile) {
    emit_profile(e, m.profile);
  }
  if (!m.profiles.empty()) {
    e << YAML::Key << "profiles" << YAML::Value << YAML::BeginMap;
    for (auto& [type, p] : m.profiles) {
      e << YAML::Key << type << YAML::Value;
      emit_profile(e, p, false);
    }
    e << YAML::EndMap;
  }
  if (m.cores) {
    e << YAML::Key << "cores" << YAML::Value << YAML::Flow << YAML::BeginMap;
    settings::emit_keys(e, *m.cores, settings::core_keys());
    e << YAML::EndMap;
  }
  if (m.precision != precision::fp32)
    e << YAML::Key << "precision" << YAML::Value << std::string(precision_name(m.precision));
  if (m.preprocess) {
    auto list = [](const std::array<float, 3>& a) { return std::vector<float>(a.begin(), a.end()); };
    e << YAML::Key << "preprocess" << YAML::Value << YAML::Flow << YAML::BeginMap << YAML::Key << "from" << YAML::Value
      << "image" << YAML::Key << "mean" << YAML::Value << YAML::Flow << list(m.preprocess->mean) << YAML::Key << "std"
      << YAML::Value << YAML::Flow << list(m.preprocess->stddev) << YAML::EndMap;
  }
  e << YAML::EndMap;
}

void emit_pipelines(YAML::Emitter& e, const cluster_config& cfg) {
  e << YAML::Key << "pipelines" << YAML::Value << YAML::BeginSeq;
  for (auto& p : cfg.pipelines) {
    e << YAML::BeginMap;
    settings::emit_set_keys(e, p, settings::pipeline_keys());
    e << YAML::Key << "stages" << YAML::Value << YAML::BeginSeq;
    for (auto& s : p.stages) {
      // One of model, variants and cascade: resolve() also names the model a stage starts with.
      auto written = s;
      if (s.cascade || !s.variants.empty()) written.model.clear();
      e << YAML::Flow << YAML::BeginMap;
      settings::emit_set_keys(e, written, settings::stage_keys());
      if (s.cascade) {
        e << YAML::Key << "cascade" << YAML::Value << YAML::Flow << YAML::BeginMap;
        settings::emit_keys(e, *s.cascade, settings::cascade_keys());
        if (s.cascade->skew) {
          e << YAML::Key << "skew" << YAML::Value << YAML::Flow << YAML::BeginMap;
          settings::emit_keys(e, *s.cascade->skew, settings::skew_keys());
          e << YAML::EndMap;
        }
        e << YAML::EndMap;
      }
      if (s.items) {
        e << YAML::Key << "fanout" << YAML::Value << YAML::Flow << YAML::BeginMap;
        settings::emit_keys(e, *s.items, settings::output_items_keys());
        e << YAML::EndMap;
      } else if (s.fanout) {
        e << YAML::Key << "fanout" << YAML::Value << *s.fanout;
      }
      if (!s.after.empty()) e << YAML::Key << "after" << YAML::Value << YAML::Flow << s.after;
      if (!s.versions.empty()) {
        e << YAML::Key << "versions" << YAML::Value << YAML::Flow << YAML::BeginSeq;
        for (auto& v : s.versions)
          e << YAML::Flow << YAML::BeginMap << YAML::Key << "version" << YAML::Value << v.version << YAML::Key
            << "weight" << YAML::Value << v.weight << YAML::EndMap;
        e << YAML::EndSeq;
      }
      e << YAML::EndMap;
    }
    e << YAML::EndSeq << YAML::EndMap;
  }
  e << YAML::EndSeq;
}

void emit_security(YAML::Emitter& e, const security_options& o) {
  if (o.enabled() || !o.tenants.empty()) {
    e << YAML::Key << "security" << YAML::Value << YAML::BeginMap;
    settings::emit_set_keys(e, o, settings::security_keys());
    if (!o.tenants.empty()) {
      e << YAML::Key << "tenants" << YAML::Value << YAML::BeginSeq;
      for (auto& t : o.tenants) {
        e << YAML::Flow << YAML::BeginMap;
        settings::emit_set_keys(e, t, settings::tenant_keys());
        e << YAML::EndMap;
      }
      e << YAML::EndSeq;
    }
    e << YAML::EndMap;
  }
}

}  // namespace

std::string to_yaml(const cluster_config& cfg) {
  YAML::Emitter e;
  e << YAML::BeginMap;
  e << YAML::Key << "cluster" << YAML::Value << YAML::Flow << YAML::BeginMap;
  settings::emit_keys(e, cfg, settings::cluster_keys());
  e << YAML::EndMap;
  if (!cfg.device_types.empty()) {
    e << YAML::Key << "device_types" << YAML::Value << YAML::BeginSeq;
    for (auto& t : cfg.device_types) {
      e << YAML::Flow << YAML::BeginMap;
      settings::emit_set_keys(e, t, settings::device_type_keys());
      e << YAML::EndMap;
    }
    e << YAML::EndSeq;
  }
  emit_nodes(e, cfg);
  e << YAML::Key << "models" << YAML::Value << YAML::BeginSeq;
  for (auto& m : cfg.models) emit_model(e, m);
  e << YAML::EndSeq;
  emit_pipelines(e, cfg);
  emit_security(e, cfg.security);
  emit_settings(e, cfg);
  e << YAML::EndMap;
  return std::string(e.c_str()) + "\n";
}

}  // namespace sloserve
