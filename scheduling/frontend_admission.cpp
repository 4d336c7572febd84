#include "scheduling/frontend_admission.hpp"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

namespace sloserve::sched {

void frontend_admission::configure(const cluster_config& cfg, size_t frontends) {
  cfg_ = &cfg;
  frontends_ = std::max<size_t>(1, frontends);
  std::vector<tenant_class> tenants;
  for (auto& t : cfg.security.tenants) tenants.push_back({t.name, t.rate.value_or(-1), t.share(), t.priority});
  admission_.configure(std::move(tenants), cfg.pipelines.size(), frontends_);
  std::vector<std::string> names;
  std::vector<int> priorities;
  for (auto& p : cfg.pipelines) names.push_back(p.name), priorities.push_back(p.priority);
  priority_.configure(std::move(names), std::move(priorities));
  shares_.configure(std::vector<bool>(cfg.pipelines.size(), !cfg.security.tenants.empty()));
}

void frontend_admission::apply(const msg::routing_table& t, const std::vector<std::vector<std::string>>& models) {
  if (!cfg_) return;
  if (auto n = std::max<size_t>(1, t.frontends); n != frontends_) configure(*cfg_, n);
  std::vector<const msg::pipeline_quota*> quotas(cfg_->pipelines.size(), nullptr);
  for (auto& q : t.quotas)
    if (auto* p = cfg_->find_pipeline(q.pipeline)) quotas[static_cast<size_t>(p - cfg_->pipelines.data())] = &q;
  for (size_t pi = 0; pi < quotas.size(); ++pi)
    if (quotas[pi])
      admission_.set_quota(pi, quotas[pi]->rate, quotas[pi]->offered, quotas[pi]->priority);
    else
      admission_.set_quota(pi, -1, 0, 0);
  for (size_t pi = 0; pi < shares_.size(); ++pi) admission_.set_local_quota(pi, shares_.quota(pi));
  if (priority_.active()) priority_.set_sharing(pipelines_sharing_devices(t, models));
}

void frontend_admission::roll_shares(double now_s) {
  if (!shares_.roll(now_s)) return;
  for (size_t pi = 0; pi < shares_.size(); ++pi) admission_.set_local_quota(pi, shares_.quota(pi));
}

admission::verdict frontend_admission::admit(size_t pi, int tenant, double now_s) {
  roll_shares(now_s);
  auto v = admission_.admit(pi, cfg_->pipelines[pi].name, tenant, now_s);
  if (v.result != admission::outcome::capped) shares_.on_offered(pi);
  if (v.result != admission::outcome::admitted) return v;
  if (auto why = priority_.admit(pi, now_s); !why.empty()) return {admission::outcome::shed, std::move(why)};
  return v;
}

void frontend_admission::on_outcome(size_t pi, bool within_slo, bool served, double now_s) {
  priority_.on_outcome(pi, within_slo, now_s);
  if (!served) return;
  roll_shares(now_s);
  shares_.on_outcome(pi, within_slo);
}

std::vector<std::vector<size_t>> pipelines_sharing_devices(const msg::routing_table& t,
                                                           const std::vector<std::vector<std::string>>& models) {
  std::unordered_map<std::string, const msg::model_route*> route;
  for (auto& r : t.routes) route[r.model] = &r;
  // Per pipeline, the instances its models run on; two pipelines share where those meet.
  size_t n = models.size();
  std::vector<std::unordered_set<std::string>> on(n);
  for (size_t pi = 0; pi < n; ++pi)
    for (auto& model : models[pi])
      if (auto it = route.find(model); it != route.end())
        for (auto& i : it->second->instances) on[pi].insert(i.node + "|" + std::to_string(i.device));
  std::vector<std::vector<size_t>> sharing(n);
  for (size_t a = 0; a < n; ++a)
    for (size_t b = 0; b < n; ++b)
      if (a != b && std::any_of(on[a].begin(), on[a].end(), [&](auto& d) { return on[b].count(d) > 0; }))
        sharing[a].push_back(b);
  return sharing;
}

}  // namespace sloserve::sched
