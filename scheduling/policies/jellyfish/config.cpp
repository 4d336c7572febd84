#include "scheduling/policies/jellyfish/config.hpp"

#include "config/settings_io.hpp"

namespace sloserve::sched::jellyfish {

namespace {

const std::vector<settings::key<options>>& keys() {
  using o = options;
  static const std::vector<settings::key<o>> all = {
      {"interval_ms", &o::interval_ms}, {"overhead_ms", &o::overhead_ms},     {"bytes_per_pixel", &o::bytes_per_pixel},
      {"resident", &o::resident},       {"compute_share", &o::compute_share}, {"uplink_quantile", &o::uplink_quantile},
      {"miss_target", &o::miss_target}, {"use_spare", &o::use_spare},
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
}

void check_file(config_detail::reader& r, const YAML::Node& root, cluster_config& cfg) {
  auto at = root["scheduler"]["policy"];
  config_detail::refuse_scaler(r, root, cfg, "scheduler policy jellyfish runs one variant per device itself");
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
  c.check = check_file;
  return c;
}

}  // namespace sloserve::sched::jellyfish
