// The checks across sections of the cluster file: the scaler's demands on the models and
// pipelines, and nodes, addresses and devices against what they serve. A scheduling policy's own
// demands live with it (policy_config::check).

#include <algorithm>
#include <map>
#include <set>

#include "config/reader.hpp"

namespace sloserve::config_detail {

// The scaler sizes each stage's models on its own: a model may serve one stage of one pipeline,
// and must say how it scales with cores (l(b, c)) or at least how long a batch takes. Only IPA
// sizes a cascade (its two models, or its second alone).
void parse_scaler_checks(reader& r, const YAML::Node& root, const cluster_config& cfg) {
  auto& o = cfg.scaler;
  if (!o.enabled()) return;
  auto at = root["scaler"] && root["scaler"]["policy"] ? root["scaler"]["policy"] : root["scheduler"]["policy"];
  std::map<size_t, std::string> used;
  for (size_t pi = 0; pi < cfg.pipelines.size(); ++pi)
    for (auto& s : cfg.pipelines[pi].stages) {
      if (s.cascade && o.policy != scaler_policy::ipa)
        r.error(at, "scaler policy " + std::string(knob_name(o.policy)) + " does not size cascades: stage '" +
                        cfg.pipelines[pi].name + "." + s.name +
                        "' runs one (the scheduler's epochs plan them, and the ipa policy chooses them)");
      for (auto m : stage_models(s)) {
        auto [it, fresh] = used.emplace(m, cfg.pipelines[pi].name + "." + s.name);
        if (!fresh)
          r.error(at, "scaler policy " + std::string(knob_name(o.policy)) +
                          " sizes every stage on its own, but model '" + cfg.models[m].name + "' serves both " +
                          it->second + " and " + cfg.pipelines[pi].name + "." + s.name);
      }
    }
  bool in_place = o.policy == scaler_policy::sponge || o.policy == scaler_policy::biscale;
  for (auto& [m, where] : used)
    if (cfg.models[m].needs_profile && !cfg.models[m].cores)
      r.error(at, "scaler policy " + std::string(knob_name(o.policy)) +
                      " sizes instances by the file's profiles: model '" + cfg.models[m].name +
                      "' needs a 'profile' (measure it with sloserve profile)");
  for (auto& [m, where] : used)
    if (in_place && !cfg.models[m].cores)
      r.error(at, "scaler policy " + std::string(knob_name(o.policy)) + " scales cores in place: model '" +
                      cfg.models[m].name + "' needs 'cores: {gamma_ms, epsilon_ms, delta_ms, eta_ms}'");
}

void refuse_scaler(reader& r, const YAML::Node& root, const cluster_config& cfg, const std::string& what) {
  if (cfg.scaler.enabled())
    r.error(root["scaler"]["policy"],
            what + ": scaler policy " + std::string(knob_name(cfg.scaler.policy)) + " cannot run beside it");
}

namespace {

// The file's entry of each node of `cfg`, in order: an entry with `replicas: N` stands for N.
std::vector<YAML::Node> node_entries(const YAML::Node& root, const cluster_config& cfg) {
  std::vector<YAML::Node> out;
  for (auto e : root["nodes"]) {
    int n = 1;
    if (e.IsMap() && e["replicas"] && e["replicas"].IsScalar()) {
      try {
        n = std::clamp(e["replicas"].as<int>(), 1, 1000);
      } catch (const YAML::Exception&) {
      }
    }
    for (int k = 0; k < n; ++k) out.push_back(e);
  }
  out.resize(std::max(out.size(), cfg.nodes.size()));  // entries that made no node (errors) read as null
  return out;
}

}  // namespace

void check_nodes(reader& r, const YAML::Node& root, const cluster_config& cfg) {
  if (!root["nodes"] || !root["nodes"].IsSequence()) return;
  auto entry = node_entries(root, cfg);
  if (cfg.with_role(role::frontend).empty())
    r.error(root["nodes"], "no node has the frontend role; clients would have nowhere to connect");
  auto ctls = cfg.with_role(role::controller);
  if (ctls.size() != 1)
    r.error(root["nodes"],
            "exactly one node must have the controller role (found " + std::to_string(ctls.size()) + ")");
  std::set<std::string> addresses;
  for (size_t i = 0; i < cfg.nodes.size(); ++i) {
    auto& a = cfg.nodes[i].address;
    bool ephemeral = a.size() > 2 && a.compare(a.size() - 2, 2, ":0") == 0;
    if (!a.empty() && !ephemeral && !addresses.insert(a).second)
      r.error(entry[i]["address"], "address '" + a + "' is used by two nodes");
    for (auto* key : {"http", "grpc"})
      if (!(key[0] == 'h' ? cfg.nodes[i].http : cfg.nodes[i].grpc).empty() && !cfg.nodes[i].has_role(role::frontend))
        r.error(entry[i][key], "node '" + cfg.nodes[i].name + "' has " + key + " but not the frontend role");
    for (auto* key : {"http", "grpc", "metrics"}) {
      auto& h = key[0] == 'h' ? cfg.nodes[i].http : key[0] == 'g' ? cfg.nodes[i].grpc : cfg.nodes[i].metrics;
      if (h.empty()) continue;
      auto host = h.substr(0, h.rfind(':'));
      bool loopback = host == "localhost" || host.rfind("127.", 0) == 0;
      if (cfg.security.enabled() && !cfg.security.http_secured() && !loopback)
        r.error(entry[i][key], "node '" + cfg.nodes[i].name + "': with security on, " +
                                   (key[0] == 'h'   ? "an http ingress"
                                    : key[0] == 'g' ? "a grpc ingress"
                                                    : "metrics") +
                                   " on '" + host +
                                   "' needs security tls_cert, tls_key and tokens (or a loopback address)");
      // The same port twice on one named host cannot both bind; a wildcard host may be
      // another machine's, so only its bind can tell.
      bool wildcard = host == "0.0.0.0" || host == "*";
      if (!wildcard && (h.size() < 2 || h.compare(h.size() - 2, 2, ":0") != 0))
        if (!addresses.insert("http://" + h).second)
          r.error(entry[i][key], std::string(key) + " '" + h + "' is used twice");
    }
  }
}

void check_served(reader& r, const YAML::Node& root, const cluster_config& cfg) {
  if (!root["nodes"] || !root["nodes"].IsSequence()) return;
  auto entry = node_entries(root, cfg);
  // Every device's model list must name real models; every model in a pipeline needs a device.
  for (size_t i = 0; i < cfg.nodes.size(); ++i)
    for (size_t g = 0; g < cfg.nodes[i].devices.size(); ++g)
      for (auto& m : cfg.nodes[i].devices[g].models)
        if (!cfg.find_model(m))
          r.error(entry[i]["devices"][g], "node '" + cfg.nodes[i].name + "' device lists unknown model '" + m + "'");
  // Every model a device may serve: emulated devices wait l(b), so they need a profile;
  // real devices run TorchScript, so they need a file.
  for (size_t i = 0; i < cfg.nodes.size(); ++i)
    for (size_t g = 0; g < cfg.nodes[i].devices.size(); ++g) {
      auto& grp = cfg.nodes[i].devices[g];
      bool emulated = grp.kind == device_kind::emulated;
      bool chain = grp.kind == device_kind::network_switch;
      for (auto& m : cfg.models) {
        bool serves = grp.models.empty() || std::find(grp.models.begin(), grp.models.end(), m.name) != grp.models.end();
        if (serves && chain && m.netnn.empty()) {
          r.error(entry[i]["devices"][g], "node '" + cfg.nodes[i].name + "' has switch devices for model '" + m.name +
                                              "', which has no 'netnn' file: a switch runs NetNN models only "
                                              "(list the models it serves)");
          continue;
        }
        if (!serves || chain || (emulated ? !m.needs_profile : !m.path.empty())) continue;
        r.error(entry[i]["devices"][g],
                "node '" + cfg.nodes[i].name + "' has " + std::string(knob_name(grp.kind)) + " devices for model '" +
                    m.name + (emulated ? "', which has no 'profile' to emulate" : "', which has no 'path'"));
      }
    }
  for (size_t pi = 0; pi < cfg.pipelines.size(); ++pi)
    for (auto& s : cfg.pipelines[pi].stages)
      for (auto m : stage_models(s)) {
        if (m >= cfg.models.size()) continue;  // a stage that did not resolve: reported already
        auto& name = cfg.models[m].name;
        bool served = false;
        for (auto& n : cfg.nodes)
          if (n.has_role(role::worker))
            for (int d = 0; d < n.device_count(); ++d) served |= n.serves(d, name);
        if (!served)
          r.error(root["pipelines"][pi], "pipeline '" + cfg.pipelines[pi].name + "' stage '" + s.name +
                                             "': no worker device serves model '" + name + "'");
      }
}

void refuse_versions(reader& r, const YAML::Node& root, const cluster_config& cfg, const std::string& why) {
  for (size_t pi = 0; pi < cfg.pipelines.size(); ++pi)
    for (size_t si = 0; si < cfg.pipelines[pi].stages.size(); ++si) {
      auto& s = cfg.pipelines[pi].stages[si];
      if (!s.versions.empty())
        r.error(root["pipelines"][pi]["stages"][si]["versions"],
                "stage '" + s.name + "' splits its traffic over model versions, which " + why);
    }
}

}  // namespace sloserve::config_detail
