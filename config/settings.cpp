#include "config/settings.hpp"

#include <mutex>
#include <set>
#include <type_traits>

#include "config/reader.hpp"

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
      {"drop_policy", &o::drop_policy},
      {"balancer", &o::balancer},
      {"max_queued_mb", &o::max_queued_mb},
      {"zmq_hwm", &o::zmq_hwm},
      {"clock_tolerance_ms", &o::clock_tolerance_ms},
      {"max_client_queued_replies", &o::max_client_queued_replies},
      {"max_client_in_flight", &o::max_client_in_flight},
      {"link_probe_ms", &o::link_probe_ms},
      {"link_probe_bytes", &o::link_probe_bytes},
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
      {"steps", &o::steps},
  };
  return keys;
}

const std::vector<key<ipa_options>>& ipa_keys() {
  using o = ipa_options;
  static const std::vector<key<o>> keys = {
      {"alpha", &o::alpha}, {"beta", &o::beta}, {"delta", &o::delta}, {"interval_s", &o::interval_s}};
  return keys;
}

const std::vector<key<jellyfish_options>>& jellyfish_keys() {
  using o = jellyfish_options;
  static const std::vector<key<o>> keys = {
      {"interval_ms", &o::interval_ms}, {"overhead_ms", &o::overhead_ms},     {"bytes_per_pixel", &o::bytes_per_pixel},
      {"resident", &o::resident},       {"compute_share", &o::compute_share}, {"uplink_quantile", &o::uplink_quantile},
      {"miss_target", &o::miss_target}, {"use_spare", &o::use_spare},
  };
  return keys;
}

const std::vector<key<graft_options>>& graft_keys() {
  using o = graft_options;
  static const std::vector<key<o>> keys = {{"theta", &o::theta}, {"group_size", &o::group_size}};
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
  };
  return keys;
}

namespace {
struct accepted {
  std::mutex lock;
  std::set<std::string, std::less<>> names;
};
accepted& accepted_policies() {
  static accepted a;
  return a;
}
}  // namespace

}  // namespace settings

void accept_scheduler_policy(std::string name) {
  auto& a = settings::accepted_policies();
  std::lock_guard g(a.lock);
  a.names.insert(std::move(name));
}

bool accepted_scheduler_policy(std::string_view name) {
  auto& a = settings::accepted_policies();
  std::lock_guard g(a.lock);
  return a.names.find(name) != a.names.end();
}

namespace config_detail {
namespace {

using namespace settings;

// Fills `s` from the keys of `keys` that `n` has; a knob by its name, as `where KEY`.
template <class S>
void read_keys(reader& r, const YAML::Node& n, S& s, const std::vector<key<S>>& keys, const std::string& where) {
  for (auto& k : keys)
    std::visit(
        [&](auto member) {
          auto& field = s.*member;
          if constexpr (std::is_enum_v<std::remove_reference_t<decltype(field)>>)
            r.get_knob(n, k.name, field, where, false, where + " " + k.name);
          else
            r.get(n, k.name, field, where, false);
        },
        k.member);
}

// Writes every key of `keys` with its value in `s` (a knob by its name).
template <class S>
void emit_keys(YAML::Emitter& e, const S& s, const std::vector<key<S>>& keys) {
  for (auto& k : keys)
    std::visit(
        [&](auto member) {
          auto& field = s.*member;
          e << YAML::Key << k.name << YAML::Value;
          if constexpr (std::is_enum_v<std::remove_cvref_t<decltype(field)>>)
            e << std::string(knob_name(field));
          else
            e << field;
        },
        k.member);
}

}  // namespace

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
  if (auto ipa = n["ipa"]) {
    const std::string wi = "scheduler ipa";
    r.known_keys(ipa, "scheduler.ipa", wi);
    auto& x = o.ipa;
    read_keys(r, ipa, x, ipa_keys(), wi);
    if (!(x.alpha > 0) || x.beta < 0 || x.delta < 0)
      r.error(ipa, wi + " needs alpha > 0 and non-negative beta and delta");
    if (!(x.interval_s > 0)) r.error(ipa["interval_s"], wi + " interval_s must be positive");
    if (o.policy != scheduler_policy::ipa) r.error(ipa, "scheduler ipa is only read with policy: ipa");
  }
  if (auto gf = n["graft"]) {
    const std::string wg = "scheduler graft";
    r.known_keys(gf, "scheduler.graft", wg);
    read_keys(r, gf, o.graft, graft_keys(), wg);
    if (!(o.graft.theta >= 0 && o.graft.theta <= 10)) r.error(gf["theta"], wg + " theta must be in [0, 10]");
    if (o.graft.group_size < 1 || o.graft.group_size > 64)
      r.error(gf["group_size"], wg + " group_size must be in [1, 64]");
    if (o.policy != scheduler_policy::graft) r.error(gf, "scheduler graft is only read with policy: graft");
  }
  if (auto jf = n["jellyfish"]) {
    const std::string wj = "scheduler jellyfish";
    r.known_keys(jf, "scheduler.jellyfish", wj);
    auto& x = o.jellyfish;
    read_keys(r, jf, x, jellyfish_keys(), wj);
    if (!(x.uplink_quantile >= 0 && x.uplink_quantile <= 1))
      r.error(jf["uplink_quantile"], wj + " uplink_quantile must be in [0, 1]");
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
  read_keys(r, n, o, scaler_keys(), w);
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
  // A policy's own section goes with the policy that reads it.
  auto section = [&](const char* name, const auto& s, const auto& keys) {
    e << YAML::Key << name << YAML::Value << YAML::Flow << YAML::BeginMap;
    emit_keys(e, s, keys);
    e << YAML::EndMap;
  };
  if (so.policy == scheduler_policy::ipa) section("ipa", so.ipa, ipa_keys());
  if (so.policy == scheduler_policy::jellyfish) section("jellyfish", so.jellyfish, jellyfish_keys());
  if (so.policy == scheduler_policy::graft) section("graft", so.graft, graft_keys());
  e << YAML::EndMap;
  e << YAML::Key << "scaler" << YAML::Value << YAML::BeginMap;
  emit_keys(e, cfg.scaler, scaler_keys());
  e << YAML::EndMap;
}

}  // namespace config_detail
}  // namespace sloserve
