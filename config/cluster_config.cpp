#include "config/cluster_config.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>

#include "config/reader.hpp"
#include "config/settings.hpp"
#include "config/settings_io.hpp"

namespace sloserve {

using namespace config_detail;

void derive_fragments(cluster_config& cfg) {
  cfg.fragments.clear();
  for (auto& m : cfg.models) {
    auto n = static_cast<int>(m.layers.size());
    for (int a = 0; a < n; ++a)
      for (int b = a + 1; b <= n; ++b)
        if (a > 0 || b < n) cfg.fragments.push_back(make_fragment(m, a, b));
  }
}

std::string config_error::to_string() const {
  std::ostringstream os;
  os << file;
  if (line > 0) os << ':' << line << ':' << column;
  os << ": " << message;
  return os.str();
}

std::string config_result::error_text() const {
  std::string s;
  for (auto& e : errors) s += e.to_string() + "\n";
  return s;
}

status check_host_port(std::string_view a) {
  auto colon = a.rfind(':');
  if (colon == std::string_view::npos || colon == 0) return fail("'" + std::string(a) + "' must be HOST:PORT");
  auto port = a.substr(colon + 1);
  if (port.empty() || port.size() > 5 ||
      !std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; }) ||
      std::stoi(std::string(port)) > 65535)
    return fail("'" + std::string(a) + "' has an invalid port '" + std::string(port) + "'");
  return {};
}

status check_address(std::string_view a) {
  auto address = "address '" + std::string(a) + "'";
  if (a.rfind("ipc://", 0) == 0) return a.size() > 6 ? status{} : fail("ipc address has no path");
  if (a.rfind("tcp://", 0) != 0) return fail(address + " must be tcp://host:port or ipc://path");
  auto rest = a.substr(6);
  auto colon = rest.rfind(':');
  if (colon == std::string_view::npos || colon == 0) return fail(address + " needs host and port (tcp://host:port)");
  auto port = rest.substr(colon + 1);
  if (port.empty() || port.size() > 5 ||
      !std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; }) ||
      std::stol(std::string(port)) > 65535)
    return fail(address + " has an invalid port '" + std::string(port) + "'");
  return {};
}

std::vector<config_section> config_keys() {
  static const std::vector<config_section> fixed = {
      {"", {"cluster", "device_types", "nodes", "models", "pipelines", "runtime", "scheduler", "scaler", "security"}},
      {"cluster", settings::names_of(settings::cluster_keys())},
      {"device_types[]", settings::names_of(settings::device_type_keys())},
      {"nodes[]", settings::names_of(settings::node_keys(), {"roles", "devices", "replicas"})},
      {"nodes[].devices[]", settings::names_of(settings::device_keys())},
      {"models[]", settings::names_of(settings::model_keys(), settings::model_maps)},
      {"models[].layers[]", {"name", "input", "profile"}},
      {"models[].input", {"dtype", "shape", "name"}},
      {"models[].output", {"dtype", "shape", "name"}},
      {"models[].profile", {"batch", "latency_ms", "alpha_ms", "beta_ms", "step"}},
      {"models[].cores", settings::names_of(settings::core_keys())},
      {"models[].preprocess", {"from", "mean", "std"}},
      {"pipelines[]", settings::names_of(settings::pipeline_keys(), {"stages"})},
      {"pipelines[].stages[]", settings::names_of(settings::stage_keys(), {"after", "cascade", "fanout", "versions"})},
      {"pipelines[].stages[].versions[]", {"version", "weight"}},
      {"pipelines[].stages[].fanout", settings::names_of(settings::output_items_keys())},
      {"pipelines[].stages[].cascade", settings::names_of(settings::cascade_keys(), {"skew"})},
      {"pipelines[].stages[].cascade.skew", settings::names_of(settings::skew_keys())},
      {"runtime", settings::names_of(settings::runtime_keys())},
      {"scheduler", settings::names_of(settings::scheduler_keys(), {"policy", "rate_band"})},
      {"scaler", settings::names_of(settings::scaler_keys())},
      {"security", settings::names_of(settings::security_keys(), {"tenants"})},
      {"security.tenants[]", settings::names_of(settings::tenant_keys())},
  };
  // Each policy's own section: a key of `scheduler`, and its keys.
  auto all = fixed;
  auto scheduler = static_cast<size_t>(
      std::find_if(all.begin(), all.end(), [](auto& s) { return s.path == "scheduler"; }) - all.begin());
  static std::mutex lock;
  static std::map<std::string_view, std::string> paths;  // "scheduler.NAME", kept for the views
  for (auto& [name, keys] : policy_sections()) {
    all[scheduler].keys.push_back(name);
    std::lock_guard g(lock);
    auto& path = paths[name];
    if (path.empty()) path = "scheduler." + std::string(name);
    all.push_back({path, keys});
  }
  return all;
}

namespace {

void parse_devices(reader& r, const YAML::Node& devs, const std::string& where, const cluster_config& cfg,
                   node_spec& s) {
  if (!devs.IsSequence()) r.error(devs, where + " devices must be a list");
  for (auto d : devs) {
    device_group g;
    auto w = where + " device";
    r.known_keys(d, "nodes[].devices[]", w);
    settings::read_keys(r, d, g, settings::device_keys(), w);
    if (g.threads < 1) r.error(d["threads"], w + " threads must be at least 1");
    if (g.count < 1) r.error(d["count"], w + " count must be at least 1");
    // A switch chain's limits: on switch devices only, each at least 1.
    for (auto key : {"pipelines", "stages", "register_kb_per_stage", "table_kb_per_stage", "ops_per_packet",
                     "flow_slots", "tier_switches"}) {
      if (!d[key]) continue;
      if (g.kind != device_kind::network_switch)
        r.error(d[key], w + " " + key + " is a switch's limit: only a device of kind switch takes it");
    }
    if (g.kind == device_kind::network_switch &&
        std::min({g.pipelines, g.stages, g.register_kb_per_stage, g.table_kb_per_stage, g.ops_per_packet, g.flow_slots,
                  g.tier_switches}) < 1)
      r.error(d, w + " a switch's pipelines, stages, register_kb_per_stage, table_kb_per_stage, ops_per_packet, "
                     "flow_slots and tier_switches must each be at least 1");
    if (!g.type.empty() && !cfg.find_device_type(g.type))
      r.error(d["type"], w + " type '" + g.type + "' is not in device_types");
    if (d["shares"]) {
      double sum = 0;
      for (double x : g.shares) sum += x;
      if (g.shares.empty() ||
          std::any_of(g.shares.begin(), g.shares.end(), [](double x) { return !(x > 0 && x <= 1); }))
        r.error(d["shares"], w + " shares must each be in (0, 1]");
      else if (sum > 1 + 1e-9)
        r.error(d["shares"], w + " shares sum to " + std::to_string(sum) + "; a device has 1 to share");
      else if (g.kind != device_kind::emulated)
        r.error(d["shares"], w + " shares need MPS on a " + std::string(knob_name(g.kind)) +
                                 " device, which sloserve does not drive: only emulated devices take shares");
    }
    s.devices.push_back(std::move(g));
  }
}

// `a` with each `{i}` in it replaced by `number`.
std::string numbered(std::string a, const std::string& number) {
  for (auto at = a.find("{i}"); at != std::string::npos; at = a.find("{i}", at + number.size()))
    a.replace(at, 3, number);
  return a;
}

// `replicas: N`: the nodes NAME-0 ... NAME-(N-1), as a StatefulSet names its pods, each with `{i}`
// in its addresses replaced by its number; without it, the node itself.
std::vector<node_spec> replicas_of(reader& r, const YAML::Node& n, node_spec s, const std::string& where) {
  int count = 0;
  if (!n["replicas"] || !r.get(n, "replicas", count, where, false)) return {std::move(s)};
  if (count < 1 || count > 1000) {
    r.error(n["replicas"], where + " replicas must be in [1, 1000]");
    return {std::move(s)};
  }
  if (count > 1 && s.address.find("{i}") == std::string::npos && !s.address.ends_with(":0"))
    r.error(n["address"], where + " has " + std::to_string(count) +
                              " replicas: its address needs {i} where each replica's number goes");
  std::vector<node_spec> out;
  for (int i = 0; i < count; ++i) {
    auto one = s;
    one.name = s.name + "-" + std::to_string(i);
    for (auto* a : {&one.address, &one.bind, &one.http, &one.grpc, &one.metrics}) *a = numbered(*a, std::to_string(i));
    out.push_back(std::move(one));
  }
  return out;
}

void parse_node(reader& r, const YAML::Node& n, cluster_config& cfg) {
  if (!n.IsMap()) {
    r.error(n, "each node must be a map");
    return;
  }
  node_spec s;
  auto where = named(n, "node");
  r.known_keys(n, "nodes[]", where);
  settings::read_keys(r, n, s, settings::node_keys(), where);
  // Checked as the first of its replicas has them, if it has any.
  auto first = [](const std::string& a) { return numbered(a, "0"); };
  if (!s.address.empty())
    if (auto ok = check_address(first(s.address)); !ok) r.error(n["address"], where + ": " + ok.error());
  if (!s.bind.empty())
    if (auto ok = check_address(first(s.bind)); !ok) r.error(n["bind"], where + " bind: " + ok.error());
  for (auto [key, value] : {std::pair{"http", &s.http}, std::pair{"grpc", &s.grpc}, std::pair{"metrics", &s.metrics}})
    if (!value->empty())
      if (auto ok = check_host_port(first(*value)); !ok) r.error(n[key], where + " " + key + ": " + ok.error());
  if (n["cores"] && s.cores < 1) r.error(n["cores"], where + " cores must be at least 1");
  std::vector<std::string> roles;
  r.get(n, "roles", roles, where, true);
  for (auto& name : roles)
    if (auto x = parse_knob<role>(name))
      s.roles.push_back(*x);
    else
      r.error(n["roles"], where + " has unknown role '" + name + "' (" + knob_choices<role>(", ") + ")");
  if (auto devs = n["devices"]) parse_devices(r, devs, where, cfg, s);
  if (s.has_role(role::worker) && s.devices.empty()) r.error(n, where + " has role worker but no devices");
  for (auto& one : replicas_of(r, n, std::move(s), where)) {
    if (cfg.find_node(one.name)) r.error(n["name"], "duplicate node name '" + one.name + "'");
    cfg.nodes.push_back(std::move(one));
  }
}

// `device_types:`, each a name and a price.
void parse_device_types(reader& r, const YAML::Node& types, cluster_config& cfg) {
  if (!types.IsSequence()) r.error(types, "device_types must be a list of {name, price}");
  for (auto t : types) {
    device_type x;
    r.known_keys(t, "device_types[]", "device type");
    settings::read_keys(r, t, x, settings::device_type_keys(), named(t, "device type"));
    if (x.name.empty()) continue;
    if (!(x.price > 0)) r.error(t["price"], "device type '" + x.name + "' price must be positive");
    if (cfg.find_device_type(x.name)) r.error(t["name"], "duplicate device type '" + x.name + "'");
    cfg.device_types.push_back(std::move(x));
  }
}

}  // namespace

config_result parse_cluster_config(std::string_view yaml, const std::string& file) {
  config_result res;
  reader r(file);
  YAML::Node root;
  try {
    root = YAML::Load(std::string(yaml));
  } catch (const YAML::ParserException& e) {
    r.error_at(e.mark, "bad YAML: " + e.msg);
    res.errors = std::move(r.errors_);
    return res;
  }
  cluster_config cfg;
  cfg.file = file;
  if (!root.IsMap()) {
    r.error_at(YAML::Mark(), "the cluster file must be a YAML map");
    res.errors = std::move(r.errors_);
    return res;
  }
  // The checks below test node kinds before use; this net catches any they miss, so that a
  // malformed file is always an error with a place, never an exception (found by fuzz_config).
  try {
    r.known_keys(root, "", "the cluster file");
    r.known_keys(root["cluster"], "cluster", "cluster");
    if (root["cluster"]) settings::read_keys(r, root["cluster"], cfg, settings::cluster_keys(), "cluster");
    if (auto types = root["device_types"]) parse_device_types(r, types, cfg);
    if (!root["nodes"] || !root["nodes"].IsSequence() || root["nodes"].size() == 0)
      r.error(root, "the cluster file needs a non-empty list 'nodes'");
    else
      for (auto n : root["nodes"]) parse_node(r, n, cfg);
    if (root["models"] && root["models"].IsSequence())
      for (auto n : root["models"]) parse_model(r, n, cfg);
    resolve_prefixes(r, root, cfg);
    if (root["pipelines"] && root["pipelines"].IsSequence())
      for (auto n : root["pipelines"]) parse_pipeline(r, n, cfg);
    parse_runtime(r, root["runtime"], cfg.runtime);
    parse_scheduler(r, root["scheduler"], cfg.scheduler);
    parse_scaler(r, root, cfg);
    check_policy(r, root, cfg);
    parse_scaler_checks(r, root, cfg);
    parse_security(r, root["security"], cfg.security);
    check_nodes(r, root, cfg);
    check_served(r, root, cfg);
  } catch (const YAML::Exception& e) {
    r.error_at(e.mark.is_null() ? r.last_ : e.mark, "unexpected structure: " + e.msg);
  }
  res.errors = std::move(r.errors_);
  if (res.errors.empty()) {
    derive_fragments(cfg);
    res.config = std::move(cfg);
  }
  return res;
}

config_result load_cluster_config(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    config_result res;
    res.errors.push_back({path, 0, 0, "cannot open the cluster file"});
    return res;
  }
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_cluster_config(ss.str(), path);
}

config_result default_config() {
  return parse_cluster_config(default_config_yaml(), "<embedded default.yaml>");
}

}  // namespace sloserve
