// `models:` of the cluster file: tensors, profiles, preprocessing, layers; variants and their
// prefixes.

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>

#include "config/reader.hpp"
#include "config/settings_io.hpp"

namespace sloserve::config_detail {
namespace {

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
    if (!out.zero_size()) r.error(n["shape"], where + " has a negative or oversized dimension");
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

// `profiles:`, per device type (the types must be declared: device_types comes first in the
// file's reading).
void parse_type_profiles(reader& r, const YAML::Node& ps, const cluster_config& cfg, model_spec& m,
                         const std::string& where) {
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

// `cores:`, l(b, c) = gamma_ms*b/c + epsilon_ms/c + delta_ms*b + eta_ms.
void parse_cores(reader& r, const YAML::Node& c, model_spec& m, const std::string& where) {
  core_latency l;
  auto w = where + " cores";
  r.known_keys(c, "models[].cores", w);
  auto before = r.errors_.size();
  settings::read_keys(r, c, l, settings::core_keys(), w);
  if (r.errors_.size() != before) return;
  if (l.gamma < 0 || l.epsilon < 0 || l.delta < 0 || l.eta < 0 || l.at(1, 1) <= 0)
    r.error(c, w + ": l(b, c) = gamma_ms*b/c + epsilon_ms/c + delta_ms*b + eta_ms needs non-negative terms");
  else
    m.cores = l;
}

// What values the model's plain keys (settings::model_keys) may take.
void check_model_scalars(reader& r, const YAML::Node& n, model_spec& m, const std::string& where) {
  if (m.max_batch < 1) r.error(n["max_batch"], where + " max_batch must be at least 1");
  if (!(m.share_exponent >= 0 && m.share_exponent <= 4))
    r.error(n["share_exponent"], where + " share_exponent must be in [0, 4]");
  if (m.jitter < 0 || m.jitter >= 1) r.error(n["jitter"], where + " jitter must be in [0, 1)");
  if (!(m.p99_spread >= 0 && m.p99_spread <= 0.5))
    r.error(n["p99_spread"], where + " p99_spread must be in [0, 0.5]");
  else if (m.p99_spread > 0 && m.jitter > 0)
    r.error(n["p99_spread"],
            where + " sets both jitter and p99_spread: the profile is either l(b)'s middle or its tail");
  if (m.load_ms < 0) r.error(n["load_ms"], where + " load_ms cannot be negative");
  if (m.memory_mb < 0) r.error(n["memory_mb"], where + " memory_mb cannot be negative");
  // An optional number within [lo, hi]; outside it, an error that says what it is, and unset.
  auto bounded = [&](const char* key, std::optional<double>& x, double lo, double hi, const std::string& what) {
    if (!x || (*x >= lo && *x <= hi)) return;
    r.error(n[key], where + " " + key + " is " + what + ": it must be in [" + number(lo) + ", " + number(hi) + "]");
    x.reset();
  };
  bounded("accuracy", m.accuracy, 0, 100, "a top-1 percentage");
  bounded("pass_rate", m.pass_rate, 0, 1, "a fraction");
  if (!(m.base_cores > 0)) r.error(n["base_cores"], where + " base_cores must be positive");
  // Relative to the cluster file, made absolute once so that a resolved copy (`up`) names the same file.
  if (!m.path.empty()) m.path = r.resolve(m.path);
  if (!m.netnn.empty()) m.netnn = r.resolve(m.netnn);
  if (!m.labels.empty()) {
    m.labels = r.resolve(m.labels);
    std::ifstream in(m.labels);
    if (!in) r.error(n["labels"], where + " labels: cannot read " + m.labels + ": " + std::strerror(errno));
    for (std::string line; std::getline(in, line);) {
      if (!line.empty() && line.back() == '\r') line.pop_back();
      m.label_names.push_back(std::move(line));
    }
  }
  if (m.name.find_first_of("[]") != std::string::npos)
    r.error(n["name"], where + ": model names cannot hold '[' or ']' (fragments of partitioned models are named so)");
}

}  // namespace

void parse_model(reader& r, const YAML::Node& n, cluster_config& cfg) {
  if (!n.IsMap()) {
    r.error(n, "each model must be a map");
    return;
  }
  model_spec m;
  auto where = named(n, "model");
  r.known_keys(n, "models[]", where);
  if (!n["input"])
    r.error(n, where + " is missing 'input'");
  else
    parse_tensor_spec(r, n["input"], m.input, where + " input", "models[].input", &m.input_name);
  if (!n["output"])
    r.error(n, where + " is missing 'output'");
  else
    parse_tensor_spec(r, n["output"], m.output, where + " output", "models[].output", &m.output_name);
  // The plain keys last: what is missing below is told at the model's map.
  settings::read_keys(r, n, m, settings::model_keys(), where);
  check_model_scalars(r, n, m, where);
  // A NetNN model takes one packet and answers its logits, class, flow majority and point.
  if (!m.netnn.empty() && n["input"] && n["output"]) {
    if (m.input.type != dtype::uint8 || m.input.shape != std::vector<int64_t>{76})
      r.error(n["input"], where +
                              " input must be {dtype: uint8, shape: [76]} for a netnn model (68 header bytes, "
                              "then the arrival time in us as a little-endian int64)");
    if (m.output.type != dtype::float32 || m.output.shape.size() != 1 || m.output.shape[0] < 5)
      r.error(n["output"], where +
                               " output must be {dtype: float32, shape: [CLASSES + 3]} for a netnn model (the "
                               "logits, the class, the flow's majority and the packet's place in its flow)");
  }
  if (auto ls = n["layers"]) parse_layers(r, ls, n, m, where);
  // A real model may leave its profile to the worker that serves it (measured at start-up).
  if (m.partitioned())
    ;  // the layers' sum
  else if (n["profile"] || !n["path"])
    parse_profile(r, n["profile"], m.profile, where);
  else
    m.needs_profile = true;
  if (auto ps = n["profiles"]) parse_type_profiles(r, ps, cfg, m, where);
  if (auto c = n["cores"]) parse_cores(r, c, m, where);
  if (n["preprocess"] && n["input"]) parse_preprocess(r, n["preprocess"], m, where);
  if (std::string p; r.get(n, "precision", p, where, false)) {
    if (auto v = parse_precision(p))
      m.precision = *v;
    else
      r.error(n["precision"], where + " precision '" + p + "' must be fp32, fp16 or bf16");
  }
  // Versions above 1 are models of their own, NAME:vN; version 1 keeps the file's name.
  m.base = m.name;
  if (m.version < 1) r.error(n["version"], where + " version must be 1 or more");
  if (m.version > 1) m.name = m.base + ":v" + std::to_string(m.version);
  bool twice = std::any_of(cfg.models.begin(), cfg.models.end(),
                           [&](const model_spec& o) { return o.family() == m.base && o.version == m.version; });
  if (twice)
    r.error(n["name"], "duplicate model name '" + m.base + "'" +
                           (n["version"] ? " at version " + std::to_string(m.version) : std::string()));
  else if (cfg.find_model(m.name))
    r.error(n["name"], "duplicate model name '" + m.name + "'");
  cfg.models.push_back(std::move(m));
}

void resolve_prefixes(reader& r, const YAML::Node& root, cluster_config& cfg) {
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
      r.error(at, "model '" + m.name + "' takes " + m.input.to_string() + " but its prefix '" + m.prefix + "' takes " +
                      p->input.to_string());
    if (m.needs_profile || p->needs_profile)
      r.error(at,
              "model '" + m.name + "': prefix-batched models need a 'profile' (measure them with sloserve profile)");
    m.prefix_path = p->path;
    m.prefix_output = p->output;
    m.prefix_profile = p->profile;
  }
}

}  // namespace sloserve::config_detail
