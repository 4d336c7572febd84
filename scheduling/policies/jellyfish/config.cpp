#include "scheduling/policies/jellyfish/config.hpp"

#include "config/settings_io.hpp"

namespace sloserve::sched::jellyfish {

namespace {

const std::vector<settings::key<options>>& keys() {
  using o = options;
  static const std::vector<settings::key<o>> all = {
      {"interval_ms", &o::interval_ms},
      {"overhead_ms", &o::overhead_ms},
      {"bytes_per_pixel", &o::bytes_per_pixel},
      {"resident", &o::resident},
      {"compute_share", &o::compute_share},
      {"uplink_quantile", &o::uplink_quantile},
      {"miss_target", &o::miss_target},
      {"use_spare", &o::use_spare},
      {"mode", &o::mode},
      {"client_side", &o::client_side},
      {"lift_margin", &o::lift_margin},
      {"headroom", &o::headroom},
      {"min_wait_share", &o::min_wait_share},
  };
  return all;
}

void check_values(config_detail::reader& r, const YAML::Node& n, const options& x, const std::string& where) {
  if (!(x.uplink_quantile >= 0 && x.uplink_quantile <= 1))
    r.error(n["uplink_quantile"], where + " uplink_quantile must be in [0, 1]");
  if (!(x.miss_target >= 0 && x.miss_target <= 0.5))
    r.error(n["miss_target"], where + " miss_target must be in [0, 0.5]");
  if (!(x.compute_share >= 0 && x.compute_share <= 1))
    r.error(n["compute_share"], where + " compute_share must be in [0, 1]");
  if (!(x.interval_ms >= 10)) r.error(n["interval_ms"], where + " interval_ms must be at least 10");
  if (!(x.overhead_ms >= 0)) r.error(n["overhead_ms"], where + " overhead_ms cannot be negative");
  if (!(x.bytes_per_pixel > 0)) r.error(n["bytes_per_pixel"], where + " bytes_per_pixel must be positive");
  if (x.resident < 1) r.error(n["resident"], where + " resident must be at least 1");
  if (x.client_side < 0) r.error(n["client_side"], where + " client_side cannot be negative");
  if (!(x.lift_margin >= 0 && x.lift_margin <= 0.9))
    r.error(n["lift_margin"], where + " lift_margin must be in [0, 0.9]");
  if (!(x.headroom >= 0 && x.headroom <= 0.9)) r.error(n["headroom"], where + " headroom must be in [0, 0.9]");
  if (!(x.min_wait_share >= 0 && x.min_wait_share <= 1))
    r.error(n["min_wait_share"], where + " min_wait_share must be in [0, 1]");
  if (x.mode != "paper" && x.mode != "extended") r.error(n["mode"], where + " mode must be paper or extended");
  // Paper mode turns the extensions off: naming one on beside it is a contradiction.
  auto extension = [&](const char* key, bool on) {
    if (x.paper() && n[key] && on)
      r.error(n[key], where + " mode paper runs the algorithms as printed: " + key + " is an extension it turns off");
  };
  extension("use_spare", x.use_spare);
  extension("uplink_quantile", x.uplink_quantile > 0 && x.uplink_quantile < 1);
  extension("miss_target", x.miss_target > 0);
  extension("lift_margin", x.lift_margin > 0);
  extension("headroom", x.headroom > 0);
  extension("min_wait_share", x.min_wait_share < 1);
}

void check_file(config_detail::reader& r, const YAML::Node& root, cluster_config& cfg) {
  auto at = root["scheduler"]["policy"];
  config_detail::refuse_scaler(r, root, cfg, "scheduler policy jellyfish runs one variant per device itself");
  config_detail::refuse_versions(
      r, root, cfg, "scheduler policy jellyfish does not plan (it picks each client's model variant itself)");
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

policy_config config() {
  auto c = settings::table_section<options>(keys(), check_values);
  // Paper mode sets the extensions off, so that the options (and the file written back) say so.
  c.parse = [parse = c.parse](config_detail::reader& r, const YAML::Node& n, const std::string& where) {
    auto a = parse(r, n, where);
    if (auto* o = std::any_cast<options>(&a); o && o->paper())
      o->use_spare = false, o->uplink_quantile = 0, o->miss_target = 0, o->lift_margin = 0, o->headroom = 0;
    return a;
  };
  c.check = check_file;
  return c;
}

}  // namespace sloserve::sched::jellyfish
