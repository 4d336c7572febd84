#include "scheduling/policies/ipa/config.hpp"

#include "config/settings_io.hpp"

namespace sloserve::sched::ipa {

namespace {

const std::vector<settings::key<options>>& keys() {
  using o = options;
  static const std::vector<settings::key<o>> all = {{"alpha", &o::alpha},
                                                    {"beta", &o::beta},
                                                    {"delta", &o::delta},
                                                    {"interval_s", &o::interval_s},
                                                    {"base_rps", &o::base_rps}};
  return all;
}

}  // namespace

policy_config config() {
  auto c = settings::table_section<options>(
      keys(), [](config_detail::reader& r, const YAML::Node& n, const options& x, const std::string& where) {
        if (!(x.alpha > 0) || x.beta < 0 || x.delta < 0)
          r.error(n, where + " needs alpha > 0 and non-negative beta and delta");
        if (!(x.interval_s > 0)) r.error(n["interval_s"], where + " interval_s must be positive");
        if (!(x.base_rps >= 0)) r.error(n["base_rps"], where + " base_rps cannot be negative");
      });
  c.check = [](config_detail::reader& r, const YAML::Node& root, cluster_config& cfg) {
    auto& o = cfg.scaler;
    if (o.policy != scaler_policy::none && o.policy != scaler_policy::ipa)
      r.error(root["scaler"]["policy"], "scheduler policy ipa sizes the instances itself: scaler policy " +
                                            std::string(knob_name(o.policy)) + " cannot run beside it (leave it out)");
    o.policy = scaler_policy::ipa;
    config_detail::refuse_versions(r, root, cfg,
                                   "scheduler policy ipa does not plan (it picks each stage's variant itself)");
  };
  return c;
}

}  // namespace sloserve::sched::ipa
