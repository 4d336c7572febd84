#include "config/cluster_config.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

namespace sloserve {

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
      {"runtime",
       {"heartbeat_ms", "peer_timeout_ms", "beacon_ms", "max_payload_bytes", "max_queue_length", "reply_grace_ms",
        "threads", "drop_policy", "balancer", "max_queued_mb", "zmq_hwm", "clock_tolerance_ms",
        "max_client_queued_replies", "max_client_in_flight", "link_probe_ms", "link_probe_bytes"}},
      {"scheduler",
       {"policy", "split", "epoch_s", "min_epoch_s", "rate_band", "headroom", "peak_half_life_s", "spares", "steps",
        "ipa", "jellyfish", "graft"}},
      {"scheduler.graft", {"theta", "group_size"}},
      {"scheduler.jellyfish",
       {"interval_ms", "overhead_ms", "bytes_per_pixel", "resident", "compute_share", "uplink_quantile", "miss_target",
        "use_spare"}},
      {"scheduler.ipa", {"alpha", "beta", "delta", "interval_s"}},
      {"scaler",
       {"policy", "vertical_s", "horizontal_s", "predictor", "max_cores", "max_instances", "max_total_cores",
        "stable_band"}},
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
    auto& all = config_keys();
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

void parse_runtime(reader& r, const YAML::Node& n, runtime_options& o) {
  if (!n) return;
  const std::string w = "runtime";
  r.known_keys(n, "runtime", w);
  r.get(n, "heartbeat_ms", o.heartbeat_ms, w, false);
  r.get(n, "peer_timeout_ms", o.peer_timeout_ms, w, false);
  r.get(n, "beacon_ms", o.beacon_ms, w, false);
  r.get(n, "max_payload_bytes", o.max_payload_bytes, w, false);
  r.get(n, "max_queue_length", o.max_queue_length, w, false);
  r.get(n, "reply_grace_ms", o.reply_grace_ms, w, false);
  r.get(n, "threads", o.threads, w, false);
  r.get_knob(n, "drop_policy", o.drop_policy, w, false, "runtime drop_policy");
  r.get_knob(n, "balancer", o.balancer, w, false, "runtime balancer");
  r.get(n, "max_queued_mb", o.max_queued_mb, w, false);
  r.get(n, "zmq_hwm", o.zmq_hwm, w, false);
  r.get(n, "clock_tolerance_ms", o.clock_tolerance_ms, w, false);
  r.get(n, "max_client_queued_replies", o.max_client_queued_replies, w, false);
  r.get(n, "max_client_in_flight", o.max_client_in_flight, w, false);
  r.get(n, "link_probe_ms", o.link_probe_ms, w, false);
  r.get(n, "link_probe_bytes", o.link_probe_bytes, w, false);
  if (o.link_probe_ms < 0) r.error(n["link_probe_ms"], "runtime link_probe_ms cannot be negative (0: no probes)");
  if (!n["link_probe_bytes"]) o.link_probe_bytes = std::min(o.link_probe_bytes, o.max_payload_bytes);
  if (o.link_probe_bytes < 1024 || o.link_probe_bytes > o.max_payload_bytes)
    r.error(n["link_probe_bytes"], "runtime link_probe_bytes must be from 1024 up to max_payload_bytes");
  if (o.max_client_queued_replies < 1)
    r.error(n["max_client_queued_replies"], "runtime max_client_queued_replies must be at least 1");
  if (o.max_client_in_flight < 1) r.error(n["max_client_in_flight"], "runtime max_client_in_flight must be at least 1");
  if (o.clock_tolerance_ms < 0) r.error(n["clock_tolerance_ms"], "runtime clock_tolerance_ms cannot be negative");
  if (o.max_queued_mb < 1) r.error(n["max_queued_mb"], "runtime max_queued_mb must be at least 1");
  if (o.zmq_hwm < 1) r.error(n["zmq_hwm"], "runtime zmq_hwm must be at least 1");
  if (o.heartbeat_ms < 1 || o.peer_timeout_ms <= o.heartbeat_ms)
    r.error(n, "runtime needs heartbeat_ms >= 1 and peer_timeout_ms > heartbeat_ms");
  if (o.beacon_ms < 10) r.error(n, "runtime beacon_ms must be at least 10");
  if (o.max_payload_bytes < 1024) r.error(n, "runtime max_payload_bytes must be at least 1024");
  if (o.max_queue_length < 1) r.error(n, "runtime max_queue_length must be at least 1");
  if (o.threads < 1) r.error(n, "runtime threads must be at least 1");
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

void parse_scaler_checks(reader& r, const YAML::Node& at, const cluster_config& cfg);
void parse_jellyfish_checks(reader& r, const YAML::Node& root, const cluster_config& cfg);
void parse_graft_checks(reader& r, const YAML::Node& root, const cluster_config& cfg);

void parse_scaler(reader& r, const YAML::Node& root, cluster_config& cfg) {
  auto n = root["scaler"];
  auto& o = cfg.scaler;
  const std::string w = "scaler";
  // IPA's choices are realised as the scaler's instances: its policy follows the scheduler's.
  bool ipa = cfg.scheduler.policy == scheduler_policy::ipa;
  auto policy_at = n && n["policy"] ? n["policy"] : root["scheduler"]["policy"];
  if (!n) {
    if (ipa) o.policy = scaler_policy::ipa;
    return parse_scaler_checks(r, policy_at, cfg);
  }
  r.known_keys(n, "scaler", w);
  r.get_knob(n, "policy", o.policy, w, false, "scaler policy");
  r.get(n, "vertical_s", o.vertical_s, w, false);
  r.get(n, "horizontal_s", o.horizontal_s, w, false);
  r.get_knob(n, "predictor", o.predictor, w, false, "scaler predictor");
  r.get(n, "max_cores", o.max_cores, w, false);
  r.get(n, "max_instances", o.max_instances, w, false);
  r.get(n, "max_total_cores", o.max_total_cores, w, false);
  r.get(n, "stable_band", o.stable_band, w, false);
  if (!(o.vertical_s > 0) || o.horizontal_s < o.vertical_s) r.error(n, "scaler needs 0 < vertical_s <= horizontal_s");
  if (o.max_cores < 1 || o.max_cores > 256) r.error(n["max_cores"], "scaler max_cores must be in [1, 256]");
  if (o.max_instances < 0) r.error(n["max_instances"], "scaler max_instances cannot be negative");
  if (o.max_total_cores < 0) r.error(n["max_total_cores"], "scaler max_total_cores cannot be negative");
  if (!(o.stable_band > 0 && o.stable_band < 1)) r.error(n["stable_band"], "scaler stable_band must be in (0, 1)");
  if (o.policy == scaler_policy::ipa && !ipa)
    r.error(n["policy"], "scaler policy ipa follows the scheduler's: write scheduler: {policy: ipa}");
  else if (ipa && o.policy != scaler_policy::none && o.policy != scaler_policy::ipa)
    r.error(n["policy"], "scheduler policy ipa sizes the instances itself: scaler policy " +
                             std::string(knob_name(o.policy)) + " cannot run beside it (leave it out)");
  if (ipa) o.policy = scaler_policy::ipa;
  parse_scaler_checks(r, policy_at, cfg);
}

// The scaler sizes each stage's models on its own: a model may serve one stage of one pipeline,
// and must say how it scales with cores (l(b, c)) or at least how long a batch takes.
void parse_scaler_checks(reader& r, const YAML::Node& at, const cluster_config& cfg) {
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

void parse_scheduler(reader& r, const YAML::Node& n, scheduler_options& o) {
  if (!n) return;
  const std::string w = "scheduler";
  r.known_keys(n, "scheduler", w);
  r.get_knob(n, "policy", o.policy, w, false, "scheduler policy");
  r.get_knob(n, "split", o.split, w, false, "scheduler split");
  r.get(n, "epoch_s", o.epoch_s, w, false);
  r.get(n, "min_epoch_s", o.min_epoch_s, w, false);
  r.get(n, "headroom", o.headroom, w, false);
  r.get(n, "peak_half_life_s", o.peak_half_life_s, w, false);
  r.get(n, "spares", o.spares, w, false);
  r.get(n, "steps", o.steps, w, false);
  std::vector<double> band;
  if (r.get(n, "rate_band", band, w, false)) {
    if (band.size() != 2 || !(band[0] > 0 && band[0] <= 1 && band[1] >= 1))
      r.error(n["rate_band"], "scheduler rate_band must be [low, high] with 0 < low <= 1 <= high");
    else
      o.rate_band_low = band[0], o.rate_band_high = band[1];
  }
  if (!(o.min_epoch_s > 0) || o.epoch_s < o.min_epoch_s) r.error(n, "scheduler needs 0 < min_epoch_s <= epoch_s");
  if (o.headroom < 0) r.error(n["headroom"], "scheduler headroom cannot be negative");
  if (!(o.peak_half_life_s >= 0)) r.error(n["peak_half_life_s"], "scheduler peak_half_life_s cannot be negative");
  if (o.steps < 4 || o.steps > 1000) r.error(n["steps"], "scheduler steps must be in [4, 1000]");
  if (auto ipa = n["ipa"]) {
    const std::string wi = "scheduler ipa";
    r.known_keys(ipa, "scheduler.ipa", wi);
    auto& x = o.ipa;
    r.get(ipa, "alpha", x.alpha, wi, false);
    r.get(ipa, "beta", x.beta, wi, false);
    r.get(ipa, "delta", x.delta, wi, false);
    r.get(ipa, "interval_s", x.interval_s, wi, false);
    if (!(x.alpha > 0) || x.beta < 0 || x.delta < 0)
      r.error(ipa, wi + " needs alpha > 0 and non-negative beta and delta");
    if (!(x.interval_s > 0)) r.error(ipa["interval_s"], wi + " interval_s must be positive");
    if (o.policy != scheduler_policy::ipa) r.error(ipa, "scheduler ipa is only read with policy: ipa");
  }
  if (auto gf = n["graft"]) {
    const std::string wg = "scheduler graft";
    r.known_keys(gf, "scheduler.graft", wg);
    r.get(gf, "theta", o.graft.theta, wg, false);
    r.get(gf, "group_size", o.graft.group_size, wg, false);
    if (!(o.graft.theta >= 0 && o.graft.theta <= 10)) r.error(gf["theta"], wg + " theta must be in [0, 10]");
    if (o.graft.group_size < 1 || o.graft.group_size > 64)
      r.error(gf["group_size"], wg + " group_size must be in [1, 64]");
    if (o.policy != scheduler_policy::graft) r.error(gf, "scheduler graft is only read with policy: graft");
  }
  if (auto jf = n["jellyfish"]) {
    const std::string wj = "scheduler jellyfish";
    r.known_keys(jf, "scheduler.jellyfish", wj);
    auto& x = o.jellyfish;
    r.get(jf, "interval_ms", x.interval_ms, wj, false);
    r.get(jf, "overhead_ms", x.overhead_ms, wj, false);
    r.get(jf, "bytes_per_pixel", x.bytes_per_pixel, wj, false);
    r.get(jf, "resident", x.resident, wj, false);
    r.get(jf, "compute_share", x.compute_share, wj, false);
    r.get(jf, "uplink_quantile", x.uplink_quantile, wj, false);
    if (!(x.uplink_quantile >= 0 && x.uplink_quantile <= 1))
      r.error(jf["uplink_quantile"], wj + " uplink_quantile must be in [0, 1]");
    r.get(jf, "miss_target", x.miss_target, wj, false);
    r.get(jf, "use_spare", x.use_spare, wj, false);
    if (!(x.miss_target >= 0 && x.miss_target <= 0.5))
      r.error(jf["miss_target"], wj + " miss_target must be in [0, 0.5]");
    if (!(x.compute_share >= 0 && x.compute_share <= 1))
      r.error(jf["compute_share"], wj + " compute_share must be in [0, 1]");
    if (!(x.interval_ms >= 10)) r.error(jf["interval_ms"], wj + " interval_ms must be at least 10");
    if (!(x.overhead_ms >= 0)) r.error(jf["overhead_ms"], wj + " overhead_ms cannot be negative");
    if (!(x.bytes_per_pixel > 0)) r.error(jf["bytes_per_pixel"], wj + " bytes_per_pixel must be positive");
    if (x.resident < 1) r.error(jf["resident"], wj + " resident must be at least 1");
    if (o.policy != scheduler_policy::jellyfish) r.error(jf, "scheduler jellyfish is only read with policy: jellyfish");
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

std::string to_yaml(const cluster_config& cfg) {
  YAML::Emitter e;
  e << YAML::BeginMap;
  e << YAML::Key << "cluster" << YAML::Value << YAML::Flow << YAML::BeginMap << YAML::Key << "name" << YAML::Value
    << cfg.name << YAML::EndMap;
  if (!cfg.device_types.empty()) {
    e << YAML::Key << "device_types" << YAML::Value << YAML::BeginSeq;
    for (auto& t : cfg.device_types)
      e << YAML::Flow << YAML::BeginMap << YAML::Key << "name" << YAML::Value << t.name << YAML::Key << "price"
        << YAML::Value << t.price << YAML::EndMap;
    e << YAML::EndSeq;
  }
  e << YAML::Key << "nodes" << YAML::Value << YAML::BeginSeq;
  for (auto& n : cfg.nodes) {
    e << YAML::BeginMap << YAML::Key << "name" << YAML::Value << n.name << YAML::Key << "address" << YAML::Value
      << n.address << YAML::Key << "roles" << YAML::Value << YAML::Flow << role_names(n.roles);
    if (!n.bind.empty()) e << YAML::Key << "bind" << YAML::Value << n.bind;
    if (n.cores > 0) e << YAML::Key << "cores" << YAML::Value << n.cores;
    if (!n.http.empty()) e << YAML::Key << "http" << YAML::Value << n.http;
    if (!n.grpc.empty()) e << YAML::Key << "grpc" << YAML::Value << n.grpc;
    if (!n.metrics.empty()) e << YAML::Key << "metrics" << YAML::Value << n.metrics;
    if (!n.devices.empty()) {
      e << YAML::Key << "devices" << YAML::Value << YAML::BeginSeq;
      for (auto& g : n.devices) {
        e << YAML::Flow << YAML::BeginMap << YAML::Key << "kind" << YAML::Value << std::string(knob_name(g.kind))
          << YAML::Key << "count" << YAML::Value << g.count;
        if (!g.models.empty()) e << YAML::Key << "models" << YAML::Value << YAML::Flow << g.models;
        if (g.memory_mb > 0) e << YAML::Key << "memory_mb" << YAML::Value << g.memory_mb;
        if (g.threads != 1) e << YAML::Key << "threads" << YAML::Value << g.threads;
        if (!g.type.empty()) e << YAML::Key << "type" << YAML::Value << g.type;
        if (!g.shares.empty()) e << YAML::Key << "shares" << YAML::Value << YAML::Flow << g.shares;
        e << YAML::EndMap;
      }
      e << YAML::EndSeq;
    }
    e << YAML::EndMap;
  }
  e << YAML::EndSeq;
  e << YAML::Key << "models" << YAML::Value << YAML::BeginSeq;
  for (auto& m : cfg.models) {
    e << YAML::BeginMap << YAML::Key << "name" << YAML::Value << m.name;
    emit_tensor(e, "input", m.input, m.input_name);
    emit_tensor(e, "output", m.output, m.output_name);
    e << YAML::Key << "max_batch" << YAML::Value << m.max_batch;
    // A model left to be profiled at start-up stays so: its nodes measure it.
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
    if (m.cores)
      e << YAML::Key << "cores" << YAML::Value << YAML::Flow << YAML::BeginMap << YAML::Key << "gamma_ms" << YAML::Value
        << m.cores->gamma << YAML::Key << "epsilon_ms" << YAML::Value << m.cores->epsilon << YAML::Key << "delta_ms"
        << YAML::Value << m.cores->delta << YAML::Key << "eta_ms" << YAML::Value << m.cores->eta << YAML::EndMap;
    if (m.jitter > 0) e << YAML::Key << "jitter" << YAML::Value << m.jitter;
    if (m.share_exponent != 1) e << YAML::Key << "share_exponent" << YAML::Value << m.share_exponent;
    if (m.load_ms > 0) e << YAML::Key << "load_ms" << YAML::Value << m.load_ms;
    if (m.memory_mb > 0) e << YAML::Key << "memory_mb" << YAML::Value << m.memory_mb;
    if (m.accuracy) e << YAML::Key << "accuracy" << YAML::Value << *m.accuracy;
    if (m.base_cores != 1) e << YAML::Key << "base_cores" << YAML::Value << m.base_cores;
    if (m.pass_rate) e << YAML::Key << "pass_rate" << YAML::Value << *m.pass_rate;
    if (!m.path.empty()) e << YAML::Key << "path" << YAML::Value << m.path;
    if (m.is_variant()) e << YAML::Key << "prefix" << YAML::Value << m.prefix;
    if (m.precision != precision::fp32)
      e << YAML::Key << "precision" << YAML::Value << std::string(precision_name(m.precision));
    if (m.preprocess) {
      auto list = [](const std::array<float, 3>& a) { return std::vector<float>(a.begin(), a.end()); };
      e << YAML::Key << "preprocess" << YAML::Value << YAML::Flow << YAML::BeginMap << YAML::Key << "from"
        << YAML::Value << "image" << YAML::Key << "mean" << YAML::Value << YAML::Flow << list(m.preprocess->mean)
        << YAML::Key << "std" << YAML::Value << YAML::Flow << list(m.preprocess->stddev) << YAML::EndMap;
    }
    e << YAML::EndMap;
  }
  e << YAML::EndSeq;
  e << YAML::Key << "pipelines" << YAML::Value << YAML::BeginSeq;
  for (auto& p : cfg.pipelines) {
    e << YAML::BeginMap << YAML::Key << "name" << YAML::Value << p.name << YAML::Key << "slo_ms" << YAML::Value
      << p.slo_ms << YAML::Key << "stages" << YAML::Value << YAML::BeginSeq;
    for (auto& s : p.stages) {
      e << YAML::Flow << YAML::BeginMap << YAML::Key << "name" << YAML::Value << s.name;
      if (s.cascade)
        e << YAML::Key << "cascade" << YAML::Value << YAML::Flow << YAML::BeginMap << YAML::Key << "models"
          << YAML::Value << YAML::Flow << s.cascade->models << YAML::Key << "confidence" << YAML::Value
          << s.cascade->confidence << YAML::EndMap;
      else if (s.variants.empty())
        e << YAML::Key << "model" << YAML::Value << s.model;
      else
        e << YAML::Key << "variants" << YAML::Value << YAML::Flow << s.variants;
      if (!s.after.empty()) e << YAML::Key << "after" << YAML::Value << YAML::Flow << s.after;
      if (s.fanout) e << YAML::Key << "fanout" << YAML::Value << *s.fanout;
      e << YAML::EndMap;
    }
    e << YAML::EndSeq << YAML::EndMap;
  }
  e << YAML::EndSeq;
  auto kv = [&e](const char* key, const auto& value) {
    e << YAML::Key << key << YAML::Value;
    if constexpr (std::is_enum_v<std::decay_t<decltype(value)>>)
      e << std::string(knob_name(value));
    else
      e << value;
  };
  auto& o = cfg.runtime;
  e << YAML::Key << "runtime" << YAML::Value << YAML::BeginMap;
  kv("heartbeat_ms", o.heartbeat_ms);
  kv("peer_timeout_ms", o.peer_timeout_ms);
  kv("beacon_ms", o.beacon_ms);
  kv("max_payload_bytes", o.max_payload_bytes);
  kv("max_queue_length", o.max_queue_length);
  kv("reply_grace_ms", o.reply_grace_ms);
  kv("threads", o.threads);
  kv("drop_policy", o.drop_policy);
  kv("balancer", o.balancer);
  kv("max_queued_mb", o.max_queued_mb);
  kv("zmq_hwm", o.zmq_hwm);
  kv("clock_tolerance_ms", o.clock_tolerance_ms);
  kv("max_client_queued_replies", o.max_client_queued_replies);
  kv("max_client_in_flight", o.max_client_in_flight);
  kv("link_probe_ms", o.link_probe_ms);
  kv("link_probe_bytes", o.link_probe_bytes);
  e << YAML::EndMap;
  if (cfg.security.enabled()) {
    e << YAML::Key << "security" << YAML::Value << YAML::BeginMap;
    kv("keys", cfg.security.keys);
    e << YAML::Key << "clients" << YAML::Value << cfg.security.clients;
    if (!cfg.security.tls_cert.empty()) kv("tls_cert", cfg.security.tls_cert), kv("tls_key", cfg.security.tls_key);
    if (!cfg.security.tokens.empty()) e << YAML::Key << "tokens" << YAML::Value << cfg.security.tokens;
    e << YAML::EndMap;
  }
  auto& so = cfg.scheduler;
  e << YAML::Key << "scheduler" << YAML::Value << YAML::BeginMap;
  kv("policy", so.policy);
  kv("split", so.split);
  kv("epoch_s", so.epoch_s);
  kv("min_epoch_s", so.min_epoch_s);
  e << YAML::Key << "rate_band" << YAML::Value << YAML::Flow
    << std::vector<double>{so.rate_band_low, so.rate_band_high};
  kv("headroom", so.headroom);
  kv("peak_half_life_s", so.peak_half_life_s);
  kv("spares", so.spares);
  kv("steps", so.steps);
  if (so.policy == scheduler_policy::ipa) {
    e << YAML::Key << "ipa" << YAML::Value << YAML::Flow << YAML::BeginMap;
    kv("alpha", so.ipa.alpha);
    kv("beta", so.ipa.beta);
    kv("delta", so.ipa.delta);
    kv("interval_s", so.ipa.interval_s);
    e << YAML::EndMap;
  }
  if (so.policy == scheduler_policy::jellyfish) {
    e << YAML::Key << "jellyfish" << YAML::Value << YAML::Flow << YAML::BeginMap;
    kv("interval_ms", so.jellyfish.interval_ms);
    kv("overhead_ms", so.jellyfish.overhead_ms);
    kv("bytes_per_pixel", so.jellyfish.bytes_per_pixel);
    kv("resident", so.jellyfish.resident);
    kv("compute_share", so.jellyfish.compute_share);
    kv("uplink_quantile", so.jellyfish.uplink_quantile);
    kv("miss_target", so.jellyfish.miss_target);
    kv("use_spare", so.jellyfish.use_spare);
    e << YAML::EndMap;
  }
  if (so.policy == scheduler_policy::graft) {
    e << YAML::Key << "graft" << YAML::Value << YAML::Flow << YAML::BeginMap;
    kv("theta", so.graft.theta);
    kv("group_size", so.graft.group_size);
    e << YAML::EndMap;
  }
  e << YAML::EndMap;
  auto& sc = cfg.scaler;
  e << YAML::Key << "scaler" << YAML::Value << YAML::BeginMap;
  kv("policy", sc.policy);
  kv("vertical_s", sc.vertical_s);
  kv("horizontal_s", sc.horizontal_s);
  kv("predictor", sc.predictor);
  kv("max_cores", sc.max_cores);
  kv("max_instances", sc.max_instances);
  kv("max_total_cores", sc.max_total_cores);
  kv("stable_band", sc.stable_band);
  e << YAML::EndMap << YAML::EndMap;
  return std::string(e.c_str()) + "\n";
}

}  // namespace sloserve
