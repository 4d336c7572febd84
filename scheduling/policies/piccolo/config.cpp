#include "scheduling/policies/piccolo/config.hpp"

#include "config/reader.hpp"
#include "config/settings_io.hpp"

namespace sloserve::sched::piccolo {

namespace {

const std::vector<settings::key<options>>& keys() {
  static const std::vector<settings::key<options>> all = {{"whole_batches", &options::whole_batches},
                                                          {"central_dispatch", &options::central_dispatch},
                                                          {"runtime_balancer", &options::runtime_balancer}};
  return all;
}

}  // namespace

policy_config config() {
  auto c = settings::table_section<options>(keys(), [](config_detail::reader& r, const YAML::Node& n, const options& o,
                                                       const std::string& where) {
    if (o.whole_batches && o.runtime_balancer)
      r.error(n["runtime_balancer"], where + " runtime_balancer: whole batches go in turn, not by runtime.balancer");
  });
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
