#include "config/settings.hpp"

#include <map>
#include <mutex>

#include "config/policy_config.hpp"
#include "config/reader.hpp"
#include "config/settings_io.hpp"

namespace sloserve {

namespace settings {

const std::vector<key<runtime_options>>& runtime_keys() {
  using o = runtime_options;
  static const std::vector<key<o>> keys = {
      {"heartbeat_ms", &o::heartbeat_ms},
      {"peer_timeout_ms", &o::peer_timeout_ms},
      {"beacon_ms", &o::beacon_ms},
      {"max_payload_bytes", &o::max_payload_bytes},
      {"max_queue_length", &o::max_queue_length},
      {"reply_grace_ms", &o::reply_grace_ms},
      {"threads", &o::threads},
      {"actor_scheduling", &o::actor_scheduling},
      {"drop_policy", &o::drop_policy},
      {"balancer", &o::balancer},
      {"max_queued_mb", &o::max_queued_mb},
      {"zmq_hwm", &o::zmq_hwm},
      {"clock_tolerance_ms", &o::clock_tolerance_ms},
      {"max_client_queued_replies", &o::max_client_queued_replies},
      {"max_client_in_flight", &o::max_client_in_flight},
      {"link_probe_ms", &o::link_probe_ms},
      {"link_probe_bytes", &o::link_probe_bytes},
      {"path_guard", &o::path_guard},
      {"http_request_timeout_ms", &o::http_request_timeout_ms},
      {"http_connections_per_address", &o::http_connections_per_address},
      {"client_shared_memory", &o::client_shared_memory},
      {"shared_memory_regions", &o::shared_memory_regions},
      {"response_cache_mb", &o::response_cache_mb},
  };
  return keys;
}

const std::vector<key<scheduler_options>>& scheduler_keys() {
  using o = scheduler_options;
  static const std::vector<key<o>> keys = {
      {"split", &o::split},
      {"epoch_s", &o::epoch_s},
      {"min_epoch_s", &o::min_epoch_s},
      {"headroom", &o::headroom},
      {"peak_half_life_s", &o::peak_half_life_s},
      {"spares", &o::spares},
      {"profile_drift", &o::profile_drift},
      {"profile_drift_windows", &o::profile_drift_windows},
      {"cost_budget", &o::cost_budget},
      {"budget_horizon_s", &o::budget_horizon_s},
      {"steps", &o::steps},
  };
  return keys;
}

const std::vector<key<scaler_options>>& scaler_keys() {
  using o = scaler_options;
  static const std::vector<key<o>> keys = {
      {"policy", &o::policy},
      {"vertical_s", &o::vertical_s},
      {"horizontal_s", &o::horizontal_s},
      {"predictor", &o::predictor},
      {"max_cores", &o::max_cores},
      {"max_instances", &o::max_instances},
      {"max_total_cores", &o::max_total_cores},
      {"stable_band", &o::stable_band},
      {"per_request_budgets", &o::per_request_budgets},
      {"central_queue", &o::central_queue},
  };
  return keys;
}

const std::vector<key<cluster_config>>& cluster_keys() {
  static const std::vector<key<cluster_config>> keys = {{"name", &cluster_config::name}};
  return keys;
}

const std::vector<key<device_type>>& device_type_keys() {
  using o = device_type;
  static const std::vector<key<o>> keys = {{"name", &o::name, true}, {"price", &o::price, true}};
  return keys;
}

const std::vector<key<node_spec>>& node_keys() {
  using o = node_spec;
  static const std::vector<key<o>> keys = {
      {"name", &o::name, true}, {"address", &o::address, true}, {"bind", &o::bind},   {"http", &o::http},
      {"grpc", &o::grpc},       {"metrics", &o::metrics},       {"cores", &o::cores},
  };
  return keys;
}

const std::vector<key<device_group>>& device_keys() {
  using o = device_group;
  static const std::vector<key<o>> keys = {
      {"kind", &o::kind, true},
      {"count", &o::count},
      {"models", &o::models},
      {"memory_mb", &o::memory_mb},
      {"threads", &o::threads},
      {"type", &o::type},
      {"shares", &o::shares},
      {"pipelines", &o::pipelines},
      {"stages", &o::stages},
      {"register_kb_per_stage", &o::register_kb_per_stage},
      {"table_kb_per_stage", &o::table_kb_per_stage},
      {"ops_per_packet", &o::ops_per_packet},
      {"flow_slots", &o::flow_slots},
      {"tier_switches", &o::tier_switches},
  };
  return keys;
}

const std::vector<key<model_spec>>& model_keys() {
  using o = model_spec;
  static const std::vector<key<o>> keys = {
      {"name", &o::name, true},
      {"max_batch", &o::max_batch},
      {"jitter", &o::jitter},
      {"share_exponent", &o::share_exponent},
      {"p99_spread", &o::p99_spread},
      {"load_ms", &o::load_ms},
      {"memory_mb", &o::memory_mb},
      {"accuracy", &o::accuracy},
      {"base_cores", &o::base_cores},
      {"pass_rate", &o::pass_rate},
      {"path", &o::path},
      {"prefix", &o::prefix},
      {"netnn", &o::netnn},
      {"labels", &o::labels},
      {"version", &o::version},
      {"response_cache", &o::response_cache},
  };
  return keys;
}

const std::vector<key<core_latency>>& core_keys() {
  using o = core_latency;
  static const std::vector<key<o>> keys = {{"gamma_ms", &o::gamma, true},
                                           {"epsilon_ms", &o::epsilon, true},
                                           {"delta_ms", &o::delta, true},
                                           {"eta_ms", &o::eta, true}};
  return keys;
}

const std::vector<key<pipeline>>& pipeline_keys() {
  using o = pipeline;
  static const std::vector<key<o>> keys = {{"name", &o::name, true},
                                           {"slo_ms", &o::slo_ms, true},
                                           {"priority", &o::priority},
                                           {"response_cache", &o::response_cache}};
  return keys;
}

const std::vector<key<stage>>& stage_keys() {
  using o = stage;
  static const std::vector<key<o>> keys = {
      {"name", &o::name, true}, {"model", &o::model}, {"variants", &o::variants}, {"slo_ms", &o::slo_ms}};
  return keys;
}

const std::vector<key<output_items>>& output_items_keys() {
  using o = output_items;
  static const std::vector<key<o>> keys = {{"from_output", &o::from_output, true},
                                           {"score_above", &o::score_above},
                                           {"score_column", &o::score_column},
                                           {"expect", &o::expect}};
  return keys;
}

const std::vector<key<skew_options>>& skew_keys() {
  using o = skew_options;
  static const std::vector<key<o>> keys = {
      {"window", &o::window},     {"min_count", &o::min_count}, {"tau_r", &o::tau_r},     {"tau_a", &o::tau_a},
      {"epsilon", &o::epsilon},   {"tau_fp", &o::tau_fp},       {"classes", &o::classes}, {"a_in", &o::a_in},
      {"e_in_out", &o::e_in_out}, {"a_out", &o::a_out}};
  return keys;
}

const std::vector<key<cascade_spec>>& cascade_keys() {
  using o = cascade_spec;
  static const std::vector<key<o>> keys = {{"models", &o::models, true}, {"confidence", &o::confidence}};
  return keys;
}

const std::vector<key<security_options>>& security_keys() {
  using o = security_options;
  static const std::vector<key<o>> keys = {{"keys", &o::keys},
                                           {"clients", &o::clients},
                                           {"tls_cert", &o::tls_cert},
                                           {"tls_key", &o::tls_key},
                                           {"tokens", &o::tokens}};
  return keys;
}

const std::vector<key<tenant_spec>>& tenant_keys() {
  using o = tenant_spec;
  static const std::vector<key<o>> keys = {{"name", &o::name, true}, {"clients", &o::clients},
                                           {"tokens", &o::tokens},   {"rate", &o::rate},
                                           {"weight", &o::weight},   {"priority", &o::priority}};
  return keys;
}

}  // namespace settings

namespace {

struct accepted {
  accepted() {
    for (auto& [name, make] : built_in_policy_configs()) by_name.emplace(std::string(name), make());
  }
  std::mutex lock;
  std::map<std::string, policy_config, std::less<>> by_name;
};

accepted& accepted_policies() {
  static accepted a;
  return a;
}

}  // namespace

void accept_scheduler_policy(std::string name, policy_config config) {
  auto& a = accepted_policies();
  std::lock_guard g(a.lock);
  a.by_name.insert_or_assign(std::move(name), std::move(config));
}

bool accepted_scheduler_policy(std::string_view name) {
  return policy_config_of(name) != nullptr;
}

const policy_config* policy_config_of(std::string_view name) {
  auto& a = accepted_policies();
  std::lock_guard g(a.lock);
  auto it = a.by_name.find(name);
  return it == a.by_name.end() ? nullptr : &it->second;
}

std::vector<std::pair<std::string_view, std::vector<std::string_view>>> policy_sections() {
  auto& a = accepted_policies();
  std::lock_guard g(a.lock);
  std::vector<std::pair<std::string_view, std::vector<std::string_view>>> out;
  for (auto& [name, c] : a.by_name)
    if (c.has_section()) out.emplace_back(name, c.keys);
  return out;
}

namespace config_detail {
using namespace settings;

void parse_runtime(reader& r, const YAML::Node& n, runtime_options& o) {
  if (!n) return;
  const std::string w = "runtime";
  r.known_keys(n, "runtime", w);
  read_keys(r, n, o, runtime_keys(), w);
  if (o.link_probe_ms < 0) r.error(n["link_probe_ms"], "runtime link_probe_ms cannot be negative (0: no probes)");
  if (!n["link_probe_bytes"]) o.link_probe_bytes = std::min(o.link_probe_bytes, o.max_payload_bytes);
  if (o.link_probe_bytes < 1024 || o.link_probe_bytes > o.max_payload_bytes)
    r.error(n["link_probe_bytes"], "runtime link_probe_bytes must be from 1024 up to max_payload_bytes");
  if (o.max_client_queued_replies < 1)
    r.error(n["max_client_queued_replies"], "runtime max_client_queued_replies must be at least 1");
  if (o.max_client_in_flight < 1) r.error(n["max_client_in_flight"], "runtime max_client_in_flight must be at least 1");
  if (o.response_cache_mb < 0 || o.response_cache_mb > (1L << 20))
    r.error(n["response_cache_mb"], "runtime response_cache_mb must be 0 to 1048576 (MB)");
  if (o.clock_tolerance_ms < 0) r.error(n["clock_tolerance_ms"], "runtime clock_tolerance_ms cannot be negative");
  if (o.http_request_timeout_ms < 100)
    r.error(n["http_request_timeout_ms"], "runtime http_request_timeout_ms must be at least 100");
  if (o.http_connections_per_address < 0)
    r.error(n["http_connections_per_address"], "runtime http_connections_per_address cannot be negative (0: no limit)");
  if (o.shared_memory_regions < 1)
    r.error(n["shared_memory_regions"], "runtime shared_memory_regions must be at least 1");
  if (o.max_queued_mb < 1) r.error(n["max_queued_mb"], "runtime max_queued_mb must be at least 1");
  if (o.zmq_hwm < 1) r.error(n["zmq_hwm"], "runtime zmq_hwm must be at least 1");
  if (o.heartbeat_ms < 1 || o.peer_timeout_ms <= o.heartbeat_ms)
    r.error(n, "runtime needs heartbeat_ms >= 1 and peer_timeout_ms > heartbeat_ms");
  if (o.beacon_ms < 10) r.error(n, "runtime beacon_ms must be at least 10");
  if (o.max_payload_bytes < 1024) r.error(n, "runtime max_payload_bytes must be at least 1024");
  if (o.max_queue_length < 1) r.error(n, "runtime max_queue_length must be at least 1");
  if (o.threads < 1) r.error(n, "runtime threads must be at least 1");
}

void parse_scheduler(reader& r, const YAML::Node& n, scheduler_options& o) {
  if (!n) return;
  const std::string w = "scheduler";
  r.known_keys(n, "scheduler", w);
  // The policy: a built-in one, or one the program registered.
  std::string name;
  if (r.get(n, "policy", name, w, false)) {
    if (auto built_in = parse_knob<scheduler_policy>(name))
      o.policy = *built_in, o.policy_name.clear();
    else if (accepted_scheduler_policy(name))
      o.policy_name = name;
    else
      r.error(n["policy"], "scheduler policy '" + name + "' is not " + knob_alternatives<scheduler_policy>());
  }
  read_keys(r, n, o, scheduler_keys(), w);
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
  if (!(o.profile_drift >= 0)) r.error(n["profile_drift"], "scheduler profile_drift cannot be negative");
  if (o.profile_drift_windows < 1)
    r.error(n["profile_drift_windows"], "scheduler profile_drift_windows must be at least 1");
  if (!(o.cost_budget >= 0)) r.error(n["cost_budget"], "scheduler cost_budget cannot be negative");
  if (!(o.budget_horizon_s > 0)) r.error(n["budget_horizon_s"], "scheduler budget_horizon_s must be positive");
  // The policy's own section, and none of another's.
  auto* policy = policy_config_of(o.name());
  for (auto& [name, keys] : policy_sections())
    if (auto section = n[std::string(name)]; section && name != o.name())
      r.error(section, "scheduler " + std::string(name) + " is only read with policy: " + std::string(name));
  if (policy && policy->has_section()) {
    const std::string ws = "scheduler " + std::string(o.name());
    YAML::Node section;
    if (auto given = n[std::string(o.name())]; given && !given.IsNull()) {
      if (!given.IsMap()) r.error(given, ws + " must be a map");
      r.known_keys(given, "scheduler." + std::string(o.name()), ws);
      section = given;
    }
    o.section = policy->parse(r, section, ws);
  }
}

void check_policy(reader& r, const YAML::Node& root, cluster_config& cfg) {
  if (auto* policy = policy_config_of(cfg.scheduler.name()); policy && policy->check) policy->check(r, root, cfg);
}

void parse_scaler(reader& r, const YAML::Node& root, cluster_config& cfg) {
  auto n = root["scaler"];
  if (!n) return;
  auto& o = cfg.scaler;
  const std::string w = "scaler";
  r.known_keys(n, "scaler", w);
  read_keys(r, n, o, scaler_keys(), w);
  if (!(o.vertical_s > 0) || o.horizontal_s < o.vertical_s) r.error(n, "scaler needs 0 < vertical_s <= horizontal_s");
  if (o.max_cores < 1 || o.max_cores > 256) r.error(n["max_cores"], "scaler max_cores must be in [1, 256]");
  if (o.max_instances < 0) r.error(n["max_instances"], "scaler max_instances cannot be negative");
  if (o.max_total_cores < 0) r.error(n["max_total_cores"], "scaler max_total_cores cannot be negative");
  if (!(o.stable_band > 0 && o.stable_band < 1)) r.error(n["stable_band"], "scaler stable_band must be in (0, 1)");
  // The scaler's ipa policy realises the scheduler's IPA choices: that policy sets it.
  if (o.policy == scaler_policy::ipa && cfg.scheduler.policy != scheduler_policy::ipa)
    r.error(n["policy"], "scaler policy ipa follows the scheduler's: write scheduler: {policy: ipa}");
}

void emit_settings(YAML::Emitter& e, const cluster_config& cfg) {
  e << YAML::Key << "runtime" << YAML::Value << YAML::BeginMap;
  emit_keys(e, cfg.runtime, runtime_keys());
  e << YAML::EndMap;
  auto& so = cfg.scheduler;
  e << YAML::Key << "scheduler" << YAML::Value << YAML::BeginMap;
  e << YAML::Key << "policy" << YAML::Value << std::string(so.name());
  emit_keys(e, so, scheduler_keys());
  e << YAML::Key << "rate_band" << YAML::Value << YAML::Flow
    << std::vector<double>{so.rate_band_low, so.rate_band_high};
  // The policy's own section, with the policy that reads it.
  if (auto* policy = policy_config_of(so.name()); policy && policy->has_section() && so.section.has_value()) {
    e << YAML::Key << std::string(so.name()) << YAML::Value << YAML::Flow << YAML::BeginMap;
    policy->emit(e, so.section);
    e << YAML::EndMap;
  }
  e << YAML::EndMap;
  e << YAML::Key << "scaler" << YAML::Value << YAML::BeginMap;
  emit_keys(e, cfg.scaler, scaler_keys());
  e << YAML::EndMap;
}

}  // namespace config_detail
}  // namespace sloserve
