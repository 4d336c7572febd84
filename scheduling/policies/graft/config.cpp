#include "scheduling/policies/graft/config.hpp"

#include <algorithm>

#include "config/settings_io.hpp"

namespace sloserve::sched::graft {

namespace {

const std::vector<settings::key<options>>& keys() {
  using o = options;
  static const std::vector<settings::key<o>> all = {
      {"theta", &o::theta}, {"group_size", &o::group_size}, {"weights", &o::weights}, {"refine", &o::refine}};
  return all;
}

}  // namespace

policy_config config() {
  auto c = settings::table_section<options>(keys(), [](config_detail::reader& r, const YAML::Node& n, const options& x,
                                                       const std::string& where) {
    if (!(x.theta >= 0 && x.theta <= 10)) r.error(n["theta"], where + " theta must be in [0, 10]");
    if (x.group_size < 1 || x.group_size > 64) r.error(n["group_size"], where + " group_size must be in [1, 64]");
    if (x.refine < 0 || x.refine > 1000000) r.error(n["refine"], where + " refine must be in [0, 1000000]");
    if (x.weights.size() != 3 || std::any_of(x.weights.begin(), x.weights.end(), [](double w) { return !(w >= 0); }) ||
        x.weights[0] + x.weights[1] + x.weights[2] <= 0)
      r.error(n["weights"], where + " weights must be three non-negative numbers [p, t, q], not all 0");
  });
  c.check = [](config_detail::reader& r, const YAML::Node& root, cluster_config& cfg) {
    auto at = root["scheduler"]["policy"];
    config_detail::refuse_scaler(r, root, cfg, "scheduler policy graft plans every device itself");
    config_detail::refuse_versions(
        r, root, cfg,
        "scheduler policy graft does not plan (its clients run the model's first layers themselves, "
        "so the version is theirs to choose)");
    for (auto& p : cfg.pipelines)
      if (p.stages.size() != 1 || p.stages.front().cascade || !p.stages.front().variants.empty() ||
          !cfg.models[p.stages.front().model_index].partitioned())
        r.error(at,
                "scheduler policy graft serves pipelines of one stage on a partitioned model (models[].layers): "
                "pipeline '" +
                    p.name + "' is not one");
  };
  return c;
}

}  // namespace sloserve::sched::graft
