#include "scheduling/policies/piccolo/config.hpp"

#include "config/reader.hpp"

namespace sloserve::sched::piccolo {

policy_config config() {
  policy_config c;
  c.check = [](config_detail::reader& r, const YAML::Node& root, cluster_config& cfg) {
    auto at = root["scheduler"]["policy"];
    config_detail::refuse_scaler(r, root, cfg, "scheduler policy piccolo plans every device itself");
    for (auto& p : cfg.pipelines)
      for (auto& s : p.stages)
        if (s.cascade)
          r.error(at, "scheduler policy piccolo plans one model a stage: stage '" + s.name + "' of pipeline '" +
                          p.name + "' is a cascade");
  };
  return c;
}

}  // namespace sloserve::sched::piccolo
