#include "scheduling/piccolo_input.hpp"

#include <algorithm>

#include "scheduling/query_analyzer.hpp"

namespace sloserve {

piccolo_types piccolo_device_types(const cluster_config& cfg) {
  piccolo_types out;
  for (auto& n : cfg.nodes) {
    if (!n.has_role(role::worker)) continue;
    for (auto& g : n.devices) {
      auto at = std::find(out.names.begin(), out.names.end(), g.type) - out.names.begin();
      if (static_cast<size_t>(at) == out.names.size()) {
        out.names.push_back(g.type);
        out.price.push_back(cfg.price_of(g));
        out.available.push_back(0);
      }
      out.available[static_cast<size_t>(at)] += static_cast<size_t>(g.count);
    }
  }
  return out;
}

std::vector<int> piccolo_batches(const latency_profile& profile, int max_batch) {
  std::vector<int> out;
  if (profile.tabular()) {
    for (int b : profile.batch)
      if (b <= max_batch) out.push_back(b);
  } else {
    for (int b = 1; b < max_batch; b *= 2) {
      out.push_back(b);
      if (b >= 2 && b + b / 2 < max_batch) out.push_back(b + b / 2);
    }
  }
  if (out.empty() || out.back() < max_batch) out.push_back(max_batch);
  if (profile.tabular() && max_batch > profile.batch.back()) out.pop_back();  // beyond what was measured
  return out;
}

sched::pc_app piccolo_app(const cluster_config& cfg, const piccolo_types& types, const pipeline& p, double rate) {
  sched::pc_app app;
  app.slo_s = p.slo_ms / 1e3;
  auto rates = stage_rates(p, rate, declared_fanout(p));
  for (size_t s = 0; s < p.stages.size(); ++s) {
    auto& st = p.stages[s];
    auto& m = cfg.models[st.model_index];
    sched::pc_module mod;
    mod.rate = rates[s];
    mod.next = st.children;
    for (size_t t = 0; t < types.names.size(); ++t) {
      bool serves = false;
      for (auto& n : cfg.nodes)
        for (auto& g : n.devices)
          serves |= n.has_role(role::worker) && g.type == types.names[t] &&
                    (g.models.empty() || std::find(g.models.begin(), g.models.end(), m.name) != g.models.end());
      if (!serves) continue;
      auto& profile = m.profile_for(types.names[t]);
      auto batches = piccolo_batches(profile, m.max_batch);
      if (!profile.tabular()) {
        // And the largest batches the whole SLO allows at the stage's rate, collected (d + b/w)
        // or waited out by a whole machine (2d): where a one-stage pipeline's best size lies.
        int collected = 0, waited = 0;
        for (int b = 1; b <= m.max_batch; ++b) {
          double d = profile.latency_ms_at(b);
          if (d + (b > 1 ? 1e3 * b / mod.rate : 0) <= p.slo_ms) collected = b;
          if (2 * d <= p.slo_ms) waited = b;
        }
        for (int b : {collected, waited})
          if (b > 0 && std::find(batches.begin(), batches.end(), b) == batches.end()) batches.push_back(b);
      }
      for (int b : batches)
        if (double d = profile.latency_ms_at(b) / 1e3; d > 0) mod.configs.push_back({t, b, d, types.price[t]});
    }
    app.modules.push_back(std::move(mod));
  }
  return app;
}

}  // namespace sloserve
