#include "config/cluster_config.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "config/reader.hpp"
#include "config/settings.hpp"

namespace sloserve {

using namespace config_detail;

bool node_spec::has_role(role r) const {
  return std::find(roles.begin(), roles.end(), r) != roles.end();
}

int node_spec::device_count() const {
  int n = 0;
  for (auto& g : devices) n += g.instances();
  return n;
}

const std::vector<std::string>& node_spec::device_models(int d) const {
  static const std::vector<std::string> none;
  for (auto& g : devices) {
    if (d < g.instances()) return g.models;
    d -= g.instances();
  }
  return none;
}

const device_group* node_spec::group_of(int d) const {
  for (auto& g : devices) {
    if (d < g.instances()) return &g;
    d -= g.instances();
  }
  return nullptr;
}

double node_spec::share_of(int d) const {
  for (auto& g : devices) {
    if (d < g.instances()) return g.share_of(d);
    d -= g.instances();
  }
  return 1;
}

bool node_spec::serves(int d, const std::string& model) const {
  auto& ms = device_models(d);
  // A fragment "BASE[a,b)" of a partitioned model runs where BASE does.
  auto base = model.substr(0, model.find('['));
  return ms.empty() || std::find(ms.begin(), ms.end(), base) != ms.end();
}

const node_spec* cluster_config::find_node(std::string_view n) const {
  for (auto& x : nodes)
    if (x.name == n) return &x;
  return nullptr;
}
const model_spec* cluster_config::find_model(std::string_view n) const {
  for (auto& x : models)
    if (x.name == n) return &x;
  if (n.find('[') != std::string_view::npos)
    for (auto& x : fragments)
      if (x.name == n) return &x;
  return nullptr;
}

void derive_fragments(cluster_config& cfg) {
  cfg.fragments.clear();
  for (auto& m : cfg.models) {
    auto n = static_cast<int>(m.layers.size());
    for (int a = 0; a < n; ++a)
      for (int b = a + 1; b <= n; ++b)
        if (a > 0 || b < n) cfg.fragments.push_back(make_fragment(m, a, b));
  }
}
const device_type* cluster_config::find_device_type(std::string_view n) const {
  for (auto& x : device_types)
    if (x.name == n) return &x;
  return nullptr;
}
double cluster_config::price_of(const device_group& g) const {
  auto* t = g.type.empty() ? nullptr : find_device_type(g.type);
  return t ? t->price : 1;
}
const pipeline* cluster_config::find_pipeline(std::string_view n) const {
  for (auto& x : pipelines)
    if (x.name == n) return &x;
  return nullptr;
}
const node_spec* cluster_config::controller() const {
  for (auto& x : nodes)
    if (x.has_role(role::controller)) return &x;
  return nullptr;
}
std::vector<const node_spec*> cluster_config::with_role(role r) const {
  std::vector<const node_spec*> out;
  for (auto& x : nodes)
    if (x.has_role(r)) out.push_back(&x);
  return out;
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

const std::vector<config_section>& config_keys() {
  static const std::vector<config_section> all = {
      {"", {"cluster", "device_types", "nodes", "models", "pipelines", "runtime", "scheduler", "scaler", "security"}},
      {"cluster", {"name"}},
      {"device_types[]", {"name", "price"}},
      {"nodes[]", {"name", "address", "bind", "roles", "devices", "cores", "http", "grpc", "metrics"}},
      {"nodes[].devices[]", {"kind", "count", "models", "memory_mb", "threads", "type", "shares"}},
      {"models[]",
       {"name", "input", "output", "max_batch", "profile", "profiles", "jitter", "load_ms", "memory_mb", "path",
        "prefix", "cores", "preprocess", "precision", "accuracy", "base_cores", "pass_rate", "share_exponent",
        "layers"}},
      {"models[].layers[]", {"name", "input", "profile"}},
      {"models[].input", {"dtype", "shape", "name"}},
      {"models[].output", {"dtype", "shape", "name"}},
      {"models[].profile", {"batch", "latency_ms", "alpha_ms", "beta_ms", "step"}},
      {"models[].cores", {"gamma_ms", "epsilon_ms", "delta_ms", "eta_ms"}},
      {"models[].preprocess", {"from", "mean", "std"}},
      {"pipelines[]", {"name", "slo_ms", "stages"}},
      {"pipelines[].stages[]", {"name", "model", "variants", "cascade", "after", "fanout"}},
      {"pipelines[].stages[].cascade", {"models", "confidence"}},
      {"runtime", settings::names_of(settings::runtime_keys())},
      {"scheduler", settings::names_of(settings::scheduler_keys(), {"rate_band", "ipa", "jellyfish", "graft"})},
      {"scheduler.graft", settings::names_of(settings::graft_keys())},
      {"scheduler.jellyfish", settings::names_of(settings::jellyfish_keys())},
      {"scheduler.ipa", settings::names_of(settings::ipa_keys())},
      {"scaler", settings::names_of(settings::scaler_keys())},
      {"security", {"keys", "clients", "tls_cert", "tls_key", "tokens"}},
  };
  return all;
}

namespace {

std::string number(double x) {
  char buf[32];
  snprintf(buf, sizeof buf, "%g", x);
  return buf;
}

void parse_tensor_spec(reader& r, const YAML::Node& n, tensor_spec& out, const std::string& where,
                       std::string_view section, std::string* name) {
  if (!n.IsMap()) {
    r.error(n, where + " must be a map {dtype, shape}");
    return;
  }
  r.known_keys(n, section, where);
  if (name && r.get(n, "name", *name, where, false)) {
    bool ok = !name->empty() && std::all_of(name->begin(), name->end(), [](char c) {
      return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.';
    });
    if (!ok) r.error(n["name"], where + " name '" + *name + "' must be letters, digits, '_', '-' or '.'");
  }
  std::string dt = "float32";
  r.get(n, "dtype", dt, where, false);
  if (auto t = parse_dtype(dt))
    out.type = *t;
  else
    r.error(n["dtype"], where + " has unknown dtype '" + dt + "'");
  if (r.get(n, "shape", out.shape, where, true)) {
    if (!out.byte_size()) r.error(n["shape"], where + " has a negative or oversized dimension");
  }
}

void parse_profile(reader& r, const YAML::Node& n, latency_profile& p, const std::string& where) {
  if (!n || !n.IsMap()) {
    r.error(n, where + " is missing 'profile' ({batch, latency_ms} or {alpha_ms, beta_ms})");
    return;
  }
  r.known_keys(n, "models[].profile", where + " profile");
  if (n["batch"] || n["latency_ms"]) {
    r.get(n, "batch", p.batch, where + " profile", true);
    r.get(n, "latency_ms", p.latency_ms, where + " profile", true);
    if (p.batch.size() != p.latency_ms.size() || p.batch.empty()) {
      r.error(n, where + " profile needs equally long, non-empty 'batch' and 'latency_ms'");
      p.batch.clear();
      return;
    }
    for (size_t i = 0; i < p.batch.size(); ++i) {
      if (p.batch[i] < 1 || (i && p.batch[i] <= p.batch[i - 1]))
        r.error(n["batch"], where + " profile batch sizes must be positive and ascending");
      if (!(p.latency_ms[i] >= 0) || (i && p.latency_ms[i] < p.latency_ms[i - 1]))
        r.error(n["latency_ms"], where + " profile latencies must be non-negative and non-decreasing");
    }
    r.get(n, "step", p.step, where + " profile", false);
  } else {
    bool a = r.get(n, "alpha_ms", p.alpha_ms, where + " profile", true);
    bool b = r.get(n, "beta_ms", p.beta_ms, where + " profile", true);
    if (a && b && (p.alpha_ms < 0 || p.beta_ms < 0))
      r.error(n, where + " profile alpha_ms and beta_ms must be non-negative");
  }
}

// preprocess: {from: image, mean: [r, g, b], std: [r, g, b]} on a model that takes float32[3, H, W].
void parse_preprocess(reader& r, const YAML::Node& n, model_spec& m, const std::string& where) {
  auto w = where + " preprocess";
  if (!n.IsMap()) {
    r.error(n, w + " must be a map {from: image, mean, std}");
    return;
  }
  r.known_keys(n, "models[].preprocess", w);
  std::string from;
  if (r.get(n, "from", from, w, true) && from != "image") r.error(n["from"], w + ": 'from' must be image");
  image_preprocess p;
  for (auto [key, out] : {std::pair{"mean", &p.mean}, std::pair{"std", &p.stddev}}) {
    std::vector<float> v;
    if (!r.get(n, key, v, w, false)) continue;
    if (v.size() != 3) {
      r.error(n[key], w + " " + key + " needs 3 values (R, G, B)");
      continue;
    }
    std::copy(v.begin(), v.end(), out->begin());
  }
  for (int c = 0; c < 3; ++c)
    if (!(p.stddev[static_cast<size_t>(c)] > 0)) r.error(n["std"], w + " std values must be positive");
  auto& in = m.input;
  if (in.type != dtype::float32 || in.shape.size() != 3 || in.shape[0] != 3 || in.shape[1] < 1 || in.shape[2] < 1)
    r.error(n, w + ": the model's input must be float32[3, H, W] to take images, not " + in.to_string());
  m.preprocess = p;
}

// `layers: [{name, input, profile}]`: a model clients may split (model.hpp). The first layer takes
// the model's input; its profile is the layers' sum.
void parse_layers(reader& r, const YAML::Node& ls, const YAML::Node& n, model_spec& m, const std::string& where) {
  if (!ls.IsSequence() || ls.size() < 2 || ls.size() > 32) {
    r.error(ls, where + " layers must be a list of 2 to 32 {name, input, profile}");
    return;
  }
  if (n["profile"]) r.error(n["profile"], where + " has 'layers': its profile is their sum, not given apart");
  for (auto* key : {"prefix", "preprocess", "cores"})
    if (n[key]) r.error(n[key], where + " has 'layers': a partitioned model cannot have '" + key + "'");
  for (size_t k = 0; k < ls.size(); ++k) {
    auto ln = ls[k];
    layer_spec l;
    auto lw = where + " layer " + std::to_string(k);
    if (!ln.IsMap()) {
      r.error(ln, lw + " must be a map {name, input, profile}");
      continue;
    }
    r.known_keys(ln, "models[].layers[]", lw);
    if (r.get(ln, "name", l.name, lw, false)) lw = where + " layer '" + l.name + "'";
    if (k == 0) {
      if (ln["input"]) r.error(ln["input"], lw + ": the first layer takes the model's input");
      l.input = m.input;
    } else if (!ln["input"]) {
      r.error(ln, lw + " is missing 'input' (what the layers before it make of a request)");
    } else {
      parse_tensor_spec(r, ln["input"], l.input, lw + " input", "models[].input", nullptr);
    }
    parse_profile(r, ln["profile"], l.profile, lw);
    m.layers.push_back(std::move(l));
  }
  std::vector<const latency_profile*> parts;
  for (auto& l : m.layers) parts.push_back(&l.profile);
  m.profile = sum_profiles(parts);
}

void parse_model(reader& r, const YAML::Node& n, cluster_config& cfg) {
  if (!n.IsMap()) {
    r.error(n, "each model must be a map");
    return;
  }
  model_spec m;
  std::string where = "model";
  r.known_keys(n, "models[]", where);
  r.get(n, "prefix", m.prefix, where, false);
  if (r.get(n, "name", m.name, where, true)) where = "model '" + m.name + "'";
  if (!n["input"])
    r.error(n, where + " is missing 'input'");
  else
    parse_tensor_spec(r, n["input"], m.input, where + " input", "models[].input", &m.input_name);
  if (!n["output"])
    r.error(n, where + " is missing 'output'");
  else
    parse_tensor_spec(r, n["output"], m.output, where + " output", "models[].output", &m.output_name);
  r.get(n, "max_batch", m.max_batch, where, false);
  if (m.max_batch < 1) r.error(n["max_batch"], where + " max_batch must be at least 1");
  if (auto ls = n["layers"]) parse_layers(r, ls, n, m, where);
  // A real model may leave its profile to the worker that serves it (measured at start-up).
  if (m.partitioned())
    ;  // the layers' sum
  else if (n["profile"] || !n["path"])
    parse_profile(r, n["profile"], m.profile, where);
  else
    m.needs_profile = true;
  // Per device type: the types must be declared (device_types comes first in the file's reading).
  if (auto ps = n["profiles"]) {
    if (!ps.IsMap()) r.error(ps, where + " profiles must be a map {TYPE: profile}");
    for (auto it = ps.begin(); ps.IsMap() && it != ps.end(); ++it) {
      auto type = it->first.as<std::string>("");
      if (!cfg.find_device_type(type)) {
        r.error(it->first, where + " profiles name '" + type + "', which device_types does not declare");
        continue;
      }
      latency_profile p;
      parse_profile(r, it->second, p, where + " (" + type + ")");
      m.profiles.emplace_back(type, std::move(p));
    }
  }
  if (auto c = n["cores"]) {
    core_latency l;
    auto w = where + " cores";
    r.known_keys(c, "models[].cores", w);
    bool all = r.get(c, "gamma_ms", l.gamma, w, true) & r.get(c, "epsilon_ms", l.epsilon, w, true) &
               r.get(c, "delta_ms", l.delta, w, true) & r.get(c, "eta_ms", l.eta, w, true);
    if (all && (l.gamma < 0 || l.epsilon < 0 || l.delta < 0 || l.eta < 0 || l.at(1, 1) <= 0))
      r.error(c, w + ": l(b, c) = gamma_ms*b/c + epsilon_ms/c + delta_ms*b + eta_ms needs non-negative terms");
    else if (all)
      m.cores = l;
  }
  if (n["preprocess"] && n["input"]) parse_preprocess(r, n["preprocess"], m, where);
  if (std::string p; r.get(n, "precision", p, where, false)) {
    if (auto v = parse_precision(p))
      m.precision = *v;
    else
      r.error(n["precision"], where + " precision '" + p + "' must be fp32, fp16 or bf16");
  }
  r.get(n, "jitter", m.jitter, where, false);
  r.get(n, "share_exponent", m.share_exponent, where, false);
  if (!(m.share_exponent >= 0 && m.share_exponent <= 4))
    r.error(n["share_exponent"], where + " share_exponent must be in [0, 4]");
  if (m.jitter < 0 || m.jitter >= 1) r.error(n["jitter"], where + " jitter must be in [0, 1)");
  r.get(n, "load_ms", m.load_ms, where, false);
  if (m.load_ms < 0) r.error(n["load_ms"], where + " load_ms cannot be negative");
  r.get(n, "memory_mb", m.memory_mb, where, false);
  // An optional number within [lo, hi]; outside it, an error that says what it is.
  auto bounded = [&](const char* key, double lo, double hi, const std::string& what) -> std::optional<double> {
    double x = 0;
    if (!r.get(n, key, x, where, false)) return std::nullopt;
    if (x >= lo && x <= hi) return x;
    r.error(n[key], where + " " + key + " is " + what + ": it must be in [" + number(lo) + ", " + number(hi) + "]");
    return std::nullopt;
  };
  m.accuracy = bounded("accuracy", 0, 100, "a top-1 percentage");
  r.get(n, "base_cores", m.base_cores, where, false);
  m.pass_rate = bounded("pass_rate", 0, 1, "a fraction");
  if (!(m.base_cores > 0)) r.error(n["base_cores"], where + " base_cores must be positive");
  // Relative to the cluster file, made absolute once so that a resolved copy (`up`) names the same file.
  if (r.get(n, "path", m.path, where, false) && !m.path.empty()) m.path = r.resolve(m.path);
  if (m.memory_mb < 0) r.error(n["memory_mb"], where + " memory_mb cannot be negative");
  if (cfg.find_model(m.name)) r.error(n["name"], "duplicate model name '" + m.name + "'");
  if (m.name.find_first_of("[]") != std::string::npos)
    r.error(n["name"], where + ": model names cannot hold '[' or ']' (fragments of partitioned models are named so)");
  cfg.models.push_back(std::move(m));
}

void parse_node(reader& r, const YAML::Node& n, cluster_config& cfg) {
  if (!n.IsMap()) {
    r.error(n, "each node must be a map");
    return;
  }
  node_spec s;
  std::string where = "node";
  r.known_keys(n, "nodes[]", where);
  if (r.get(n, "name", s.name, where, true)) where = "node '" + s.name + "'";
  if (r.get(n, "address", s.address, where, true))
    if (auto ok = check_address(s.address); !ok) r.error(n["address"], where + ": " + ok.error());
  if (r.get(n, "bind", s.bind, where, false))
    if (auto ok = check_address(s.bind); !ok) r.error(n["bind"], where + " bind: " + ok.error());
  if (r.get(n, "http", s.http, where, false))
    if (auto ok = check_host_port(s.http); !ok) r.error(n["http"], where + " http: " + ok.error());
  if (r.get(n, "grpc", s.grpc, where, false))
    if (auto ok = check_host_port(s.grpc); !ok) r.error(n["grpc"], where + " grpc: " + ok.error());
  if (r.get(n, "metrics", s.metrics, where, false))
    if (auto ok = check_host_port(s.metrics); !ok) r.error(n["metrics"], where + " metrics: " + ok.error());
  std::vector<std::string> roles;
  r.get(n, "roles", roles, where, true);
  if (r.get(n, "cores", s.cores, where, false) && s.cores < 1) r.error(n["cores"], where + " cores must be at least 1");
  for (auto& name : roles)
    if (auto x = parse_knob<role>(name))
      s.roles.push_back(*x);
    else
      r.error(n["roles"], where + " has unknown role '" + name + "' (" + knob_choices<role>(", ") + ")");
  if (auto devs = n["devices"]; devs) {
    if (!devs.IsSequence()) r.error(devs, where + " devices must be a list");
    for (auto d : devs) {
      device_group g;
      r.known_keys(d, "nodes[].devices[]", where + " device");
      r.get(d, "memory_mb", g.memory_mb, where + " device", false);
      r.get(d, "threads", g.threads, where + " device", false);
      if (g.threads < 1) r.error(d["threads"], where + " device threads must be at least 1");
      r.get_knob(d, "kind", g.kind, where + " device", true, where + " device kind");
      r.get(d, "count", g.count, where + " device", false);
      if (g.count < 1) r.error(d["count"], where + " device count must be at least 1");
      r.get(d, "models", g.models, where + " device", false);
      if (r.get(d, "type", g.type, where + " device", false) && !cfg.find_device_type(g.type))
        r.error(d["type"], where + " device type '" + g.type + "' is not in device_types");
      if (r.get(d, "shares", g.shares, where + " device", false)) {
        double sum = 0;
        for (double x : g.shares) sum += x;
        if (g.shares.empty() ||
            std::any_of(g.shares.begin(), g.shares.end(), [](double x) { return !(x > 0 && x <= 1); }))
          r.error(d["shares"], where + " device shares must each be in (0, 1]");
        else if (sum > 1 + 1e-9)
          r.error(d["shares"], where + " device shares sum to " + std::to_string(sum) + "; a device has 1 to share");
        else if (g.kind != device_kind::emulated)
          r.error(d["shares"], where + " device shares need MPS on a " + std::string(knob_name(g.kind)) +
                                   " device, which sloserve does not drive: only emulated devices take shares");
      }
      s.devices.push_back(std::move(g));
    }
  }
  if (s.has_role(role::worker) && s.devices.empty()) r.error(n, where + " has role worker but no devices");
  if (cfg.find_node(s.name)) r.error(n["name"], "duplicate node name '" + s.name + "'");
  cfg.nodes.push_back(std::move(s));
}

void parse_pipeline(reader& r, const YAML::Node& n, cluster_config& cfg) {
  if (!n.IsMap()) {
    r.error(n, "each pipeline must be a map");
    return;
  }
  pipeline p;
  std::string where = "pipeline";
  r.known_keys(n, "pipelines[]", where);
  if (r.get(n, "name", p.name, where, true)) where = "pipeline '" + p.name + "'";
  if (r.get(n, "slo_ms", p.slo_ms, where, true) && !(p.slo_ms > 0))
    r.error(n["slo_ms"], where + " slo_ms must be positive");
  std::vector<YAML::Node> stage_nodes;
  if (!n["stages"] || !n["stages"].IsSequence()) {
    r.error(n, where + " needs a list of 'stages'");
  } else {
    for (auto sn : n["stages"]) {
      stage s;
      r.known_keys(sn, "pipelines[].stages[]", where + " stage");
      r.get(sn, "name", s.name, where + " stage", true);
      auto sw = where + " stage '" + s.name + "'";
      if (sn["cascade"]) {
        if (sn["model"] || sn["variants"])
          r.error(sn["cascade"], sw + " names 'cascade' beside 'model' or 'variants'; give one of them");
        auto cn = sn["cascade"];
        r.known_keys(cn, "pipelines[].stages[].cascade", sw + " cascade");
        cascade_spec c;
        r.get(cn, "models", c.models, sw + " cascade", true);
        r.get(cn, "confidence", c.confidence, sw + " cascade", false);
        s.cascade = std::move(c);
      } else if (sn["variants"]) {
        if (r.get(sn, "variants", s.variants, sw, true) && s.variants.empty())
          r.error(sn["variants"], sw + " variants must name at least one model");
        if (sn["model"]) r.error(sn["model"], sw + " names both 'model' and 'variants'; give one of them");
      } else {
        r.get(sn, "model", s.model, sw, true);
      }
      if (sn["after"] && sn["after"].IsScalar())
        s.after.push_back(sn["after"].as<std::string>());
      else
        r.get(sn, "after", s.after, where + " stage '" + s.name + "'", false);
      double f = 0;
      if (r.get(sn, "fanout", f, where + " stage '" + s.name + "'", false)) s.fanout = f;
      p.stages.push_back(std::move(s));
      stage_nodes.push_back(sn);
    }
  }
  auto before = r.errors_.size();
  for (auto& issue : resolve(p, cfg.models)) {
    auto at = issue.stage < stage_nodes.size() ? stage_nodes[issue.stage] : n;
    r.error(at, where + ": " + issue.message);
  }
  if (r.errors_.size() == before && p.slo_ms > 0) {
    auto fastest = fastest_path_ms(p, cfg.models);
    if (fastest > p.slo_ms)
      r.error(n["slo_ms"], where + " slo_ms " + number(p.slo_ms) + " is below its fastest possible path (" +
                               number(fastest) + " ms at batch 1)");
  }
  if (cfg.find_pipeline(p.name)) r.error(n["name"], "duplicate pipeline name '" + p.name + "'");
  cfg.pipelines.push_back(std::move(p));
}

bool looks_like_z85_key(const std::string& s) {
  static const std::string alphabet =
      "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#";
  return s.size() == 40 && s.find_first_not_of(alphabet) == std::string::npos && !s.ends_with(".pub");
}

void parse_security(reader& r, const YAML::Node& n, security_options& o) {
  if (!n) return;
  const std::string w = "security";
  r.known_keys(n, "security", w);
  r.get(n, "keys", o.keys, w, true);
  r.get(n, "clients", o.clients, w, false);
  r.get(n, "tls_cert", o.tls_cert, w, false);
  r.get(n, "tls_key", o.tls_key, w, false);
  r.get(n, "tokens", o.tokens, w, false);
  if (o.tls_cert.empty() != o.tls_key.empty()) r.error(n, "security needs both tls_cert and tls_key, or neither");
  // Paths are relative to the cluster file, and kept absolute so that `up` can hand them on.
  auto resolve = [&](std::string& path) { path = r.resolve(path); };
  if (!o.keys.empty()) resolve(o.keys);
  for (auto* path : {&o.tls_cert, &o.tls_key})
    if (!path->empty()) resolve(*path);
  for (auto& t : o.tokens) resolve(t);
  for (size_t i = 0; i < o.clients.size(); ++i) {
    auto& c = o.clients[i];
    if (c.empty())
      r.error(n["clients"][i], "security clients entry is empty");
    else if (!looks_like_z85_key(c))
      resolve(c);
  }
}

}  // namespace

// The scaler sizes each stage's models on its own: a model may serve one stage of one pipeline,
// and must say how it scales with cores (l(b, c)) or at least how long a batch takes.
void config_detail::parse_scaler_checks(reader& r, const YAML::Node& at, const cluster_config& cfg) {
  auto& o = cfg.scaler;
  if (!o.enabled()) return;
  std::map<size_t, std::string> used;
  for (size_t pi = 0; pi < cfg.pipelines.size(); ++pi)
    for (auto& s : cfg.pipelines[pi].stages) {
      if (s.cascade)
        r.error(at, "scaler policy " + std::string(knob_name(o.policy)) + " does not size cascades: stage '" +
                        cfg.pipelines[pi].name + "." + s.name + "' runs one (the scheduler's epochs plan them)");
      for (auto m : s.variant_indices) {
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

namespace {

// A scheduler policy that owns the devices: no scaler beside it.
void refuse_scaler(reader& r, const YAML::Node& root, const cluster_config& cfg, const std::string& what) {
  if (cfg.scaler.enabled())
    r.error(root["scaler"]["policy"],
            what + ": scaler policy " + std::string(knob_name(cfg.scaler.policy)) + " cannot run beside it");
}

// Piccolo gives every machine one stage's model at one configuration, and owns the devices.
void parse_piccolo_checks(reader& r, const YAML::Node& root, const cluster_config& cfg) {
  if (cfg.scheduler.policy != scheduler_policy::piccolo) return;
  auto at = root["scheduler"]["policy"];
  refuse_scaler(r, root, cfg, "scheduler policy piccolo plans every device itself");
  for (auto& p : cfg.pipelines)
    for (auto& s : p.stages)
      if (s.cascade)
        r.error(at, "scheduler policy piccolo plans one model a stage: stage '" + s.name + "' of pipeline '" + p.name +
                        "' is a cascade");
}

// Graft re-aligns the fragments of partitioned models: every pipeline is one stage on one.
void parse_graft_checks(reader& r, const YAML::Node& root, const cluster_config& cfg) {
  if (cfg.scheduler.policy != scheduler_policy::graft) return;
  auto at = root["scheduler"]["policy"];
  refuse_scaler(r, root, cfg, "scheduler policy graft plans every device itself");
  for (auto& p : cfg.pipelines)
    if (p.stages.size() != 1 || p.stages.front().cascade || !p.stages.front().variants.empty() ||
        !cfg.models[p.stages.front().model_index].partitioned())
      r.error(at,
              "scheduler policy graft serves pipelines of one stage on a partitioned model (models[].layers): "
              "pipeline '" +
                  p.name + "' is not one");
}

// Jellyfish maps clients to variants of one stage that take images, and owns the devices.
void parse_jellyfish_checks(reader& r, const YAML::Node& root, const cluster_config& cfg) {
  if (cfg.scheduler.policy != scheduler_policy::jellyfish) return;
  auto at = root["scheduler"]["policy"];
  refuse_scaler(r, root, cfg, "scheduler policy jellyfish runs one variant per device itself");
  for (auto& p : cfg.pipelines) {
    if (p.stages.size() != 1 || p.stages.front().cascade) {
      r.error(at, "scheduler policy jellyfish serves pipelines of one stage (one DNN a request): pipeline '" + p.name +
                      "' has " + (p.stages.size() == 1 ? "a cascade" : std::to_string(p.stages.size()) + " stages"));
      continue;
    }
    for (auto m : p.stages.front().variant_indices)
      if (!cfg.models[m].preprocess)
        r.error(at, "scheduler policy jellyfish tells clients which image size to send: model '" + cfg.models[m].name +
                        "' of pipeline '" + p.name + "' needs 'preprocess: {from: image}'");
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
    if (root["cluster"]) r.get(root["cluster"], "name", cfg.name, "cluster", false);
    if (auto types = root["device_types"]) {
      if (!types.IsSequence()) r.error(types, "device_types must be a list of {name, price}");
      for (auto t : types) {
        device_type x;
        r.known_keys(t, "device_types[]", "device type");
        if (!r.get(t, "name", x.name, "device type", true)) continue;
        r.get(t, "price", x.price, "device type '" + x.name + "'", true);
        if (!(x.price > 0)) r.error(t["price"], "device type '" + x.name + "' price must be positive");
        if (cfg.find_device_type(x.name)) r.error(t["name"], "duplicate device type '" + x.name + "'");
        cfg.device_types.push_back(std::move(x));
      }
    }
    if (!root["nodes"] || !root["nodes"].IsSequence() || root["nodes"].size() == 0)
      r.error(root, "the cluster file needs a non-empty list 'nodes'");
    else
      for (auto n : root["nodes"]) parse_node(r, n, cfg);
    if (root["models"] && root["models"].IsSequence())
      for (auto n : root["models"]) parse_model(r, n, cfg);
    // Variants take their prefix's path, output and profile.
    for (size_t i = 0; i < cfg.models.size(); ++i) {
      auto& m = cfg.models[i];
      if (!m.is_variant()) continue;
      auto at = root["models"][i]["prefix"];
      auto* p = cfg.find_model(m.prefix);
      if (!p) {
        r.error(at, "model '" + m.name + "' has unknown prefix model '" + m.prefix + "'");
        continue;
      }
      if (p->is_variant()) {
        r.error(at, "model '" + m.name + "': its prefix '" + m.prefix + "' is itself a variant");
        continue;
      }
      if (p->input.type != m.input.type || p->input.shape != m.input.shape)
        r.error(at, "model '" + m.name + "' takes " + m.input.to_string() + " but its prefix '" + m.prefix +
                        "' takes " + p->input.to_string());
      if (m.needs_profile || p->needs_profile)
        r.error(at,
                "model '" + m.name + "': prefix-batched models need a 'profile' (measure them with sloserve profile)");
      m.prefix_path = p->path;
      m.prefix_output = p->output;
      m.prefix_profile = p->profile;
    }
    if (root["pipelines"] && root["pipelines"].IsSequence())
      for (auto n : root["pipelines"]) parse_pipeline(r, n, cfg);
    parse_runtime(r, root["runtime"], cfg.runtime);
    parse_scheduler(r, root["scheduler"], cfg.scheduler);
    parse_scaler(r, root, cfg);
    parse_jellyfish_checks(r, root, cfg);
    parse_piccolo_checks(r, root, cfg);
    parse_graft_checks(r, root, cfg);
    parse_security(r, root["security"], cfg.security);
    if (root["nodes"] && root["nodes"].IsSequence()) {
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
          r.error(root["nodes"][i]["address"], "address '" + a + "' is used by two nodes");
        for (auto* key : {"http", "grpc"})
          if (!(key[0] == 'h' ? cfg.nodes[i].http : cfg.nodes[i].grpc).empty() &&
              !cfg.nodes[i].has_role(role::frontend))
            r.error(root["nodes"][i][key],
                    "node '" + cfg.nodes[i].name + "' has " + key + " but not the frontend role");
        for (auto* key : {"http", "grpc", "metrics"}) {
          auto& h = key[0] == 'h' ? cfg.nodes[i].http : key[0] == 'g' ? cfg.nodes[i].grpc : cfg.nodes[i].metrics;
          if (h.empty()) continue;
          auto host = h.substr(0, h.rfind(':'));
          bool loopback = host == "localhost" || host.rfind("127.", 0) == 0;
          if (cfg.security.enabled() && !cfg.security.http_secured() && !loopback)
            r.error(root["nodes"][i][key], "node '" + cfg.nodes[i].name + "': with security on, " +
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
              r.error(root["nodes"][i][key], std::string(key) + " '" + h + "' is used twice");
        }
      }
      // Every device's model list must name real models; every model in a pipeline needs a device.
      for (size_t i = 0; i < cfg.nodes.size(); ++i)
        for (size_t g = 0; g < cfg.nodes[i].devices.size(); ++g)
          for (auto& m : cfg.nodes[i].devices[g].models)
            if (!cfg.find_model(m))
              r.error(root["nodes"][i]["devices"][g],
                      "node '" + cfg.nodes[i].name + "' device lists unknown model '" + m + "'");
      // Every model a device may serve: emulated devices wait l(b), so they need a profile;
      // real devices run TorchScript, so they need a file.
      for (size_t i = 0; i < cfg.nodes.size(); ++i)
        for (size_t g = 0; g < cfg.nodes[i].devices.size(); ++g) {
          auto& grp = cfg.nodes[i].devices[g];
          bool emulated = grp.kind == device_kind::emulated;
          for (auto& m : cfg.models) {
            bool serves =
                grp.models.empty() || std::find(grp.models.begin(), grp.models.end(), m.name) != grp.models.end();
            if (!serves || (emulated ? !m.needs_profile : !m.path.empty())) continue;
            r.error(root["nodes"][i]["devices"][g],
                    "node '" + cfg.nodes[i].name + "' has " + std::string(knob_name(grp.kind)) +
                        " devices for model '" + m.name +
                        (emulated ? "', which has no 'profile' to emulate" : "', which has no 'path'"));
          }
        }
      for (size_t pi = 0; pi < cfg.pipelines.size(); ++pi)
        for (auto& s : cfg.pipelines[pi].stages)
          for (auto m : stage_models(s)) {
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

cluster_config single_node(const cluster_config& cfg) {
  cluster_config out = cfg;
  node_spec n;
  n.name = "local";
  n.roles = {role::controller, role::frontend, role::worker};
  for (auto& x : cfg.nodes) {
    if (n.address.empty() && x.has_role(role::frontend)) n.address = x.address;
    if (x.has_role(role::worker)) n.devices.insert(n.devices.end(), x.devices.begin(), x.devices.end());
  }
  out.nodes = {n};
  return out;
}

}  // namespace sloserve
