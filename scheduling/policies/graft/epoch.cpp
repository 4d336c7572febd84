#include "scheduling/policies/graft/epoch.hpp"

#include <algorithm>
#include <cmath>

#include "scheduling/policies/graft/config.hpp"
#include "scheduling/query_analyzer.hpp"

namespace sloserve::sched {

graft::model graft_model(const model_spec& m, std::vector<double> shares) {
  graft::model g;
  g.layers = static_cast<int>(m.layers.size());
  g.max_batch = std::max(1, m.batch_limit());
  std::sort(shares.begin(), shares.end());
  shares.erase(std::unique(shares.begin(), shares.end(), [](double a, double b) { return std::abs(a - b) < 1e-9; }),
               shares.end());
  g.shares = shares.empty() ? std::vector<double>{1.0} : shares;
  const model_spec* mp = &m;
  g.latency_s = [mp](int a, int b, int batch, double share) {
    double ms = 0;
    for (int k = a; k < b; ++k) ms += mp->layers[static_cast<size_t>(k)].profile.latency_ms_at(batch);
    return ms * mp->share_slowdown(share) / 1e3;
  };
  return g;
}

namespace {

const model_spec* range_model(const epoch_input& in, const model_spec& base, int a, int b) {
  if (a == 0 && b == static_cast<int>(base.layers.size())) return &base;
  if (!in.fragment_models) return nullptr;
  auto name = fragment_name(base, a, b);
  for (auto& m : *in.fragment_models)
    if (m.name == name) return &m;
  return nullptr;
}

// Pipeline `pi`'s fragments at `rate`, each split among its clients (merging then puts back
// together what shares instances well); without any measured, the whole model at the SLO.
std::vector<graft::fragment> fragments_of(const epoch_input& in, size_t pi, const pipeline& p, int layers,
                                          double rate) {
  std::vector<fragment_share> fs;
  if (pi < in.fragments.size())
    for (auto& f : in.fragments[pi])
      if (f.start >= 0 && f.start < layers && f.share > 0 && f.slo_ms > 0) fs.push_back(f);
  double total = 0;
  for (auto& f : fs) total += f.share;
  if (fs.empty() || !(total > 0)) fs = {{0, p.slo_ms, 1, 1}}, total = 1;
  std::vector<graft::fragment> frags;
  for (auto& f : fs) {
    int c = std::clamp(f.clients, 1, 64);
    for (int k = 0; k < c; ++k) frags.push_back({f.start, f.slo_ms / 1e3, rate * f.share / total / c, 1});
  }
  return frags;
}

// Each merged fragment's route: the plan's stages it runs, in layer order.
void add_routes(size_t pi, const graft::plan& plan, const std::vector<graft::fragment>& merged,
                const std::vector<std::string>& names, epoch_result& out) {
  for (size_t i = 0; i < merged.size(); ++i) {
    std::vector<std::pair<int, size_t>> mine;
    for (size_t si = 0; si < plan.stages.size(); ++si)
      if (std::find(plan.stages[si].fragments.begin(), plan.stages[si].fragments.end(), i) !=
          plan.stages[si].fragments.end())
        mine.emplace_back(plan.stages[si].a, si);
    std::sort(mine.begin(), mine.end());
    epoch_result::fragment_route r;
    r.pipeline = pi;
    r.start = merged[i].p;
    r.slo_ms = merged[i].t * 1e3;
    r.rate = merged[i].q;
    for (auto& [a, si] : mine) {
      r.models.push_back(names[si]);
      r.budget_ms.push_back(plan.stages[si].budget_s * 1e3);
    }
    if (!r.models.empty()) out.fragment_routes.push_back(std::move(r));
  }
}

// Stage `st` of a plan for pipeline `pi` as a session of `model` on its instances (dedicated
// devices at the share it tuned).
void add_stage(size_t pi, const graft::model& gm, const graft::stage& st, const model_spec* model,
               const std::vector<graft::fragment>& merged, int& next_id, epoch_result& out) {
  double carried = 0;
  for (auto f : st.fragments) carried += merged[f].q;
  size_t session = out.sessions.size();
  // The device's deadline is the stage's share of the time left: twice its execution budget
  // (Graft gives the other half to queueing).
  out.sessions.push_back({model, std::floor(st.budget_s * 2e4) / 10, carried});
  out.members.push_back({{pi, 0}});
  out.models_of.push_back({{model, carried}});
  auto& a = st.alloc;
  out.resources += a.resources;
  for (int k = 0; k < a.instances; ++k) {
    device_plan d;
    d.id = next_id++;
    d.dedicated = true;
    double l = gm.latency_s(st.a, st.b, a.batch, a.share);
    d.duty_cycle_ms = l * 1e3;
    double each = carried / a.instances;
    d.sessions.push_back({session, a.batch, each});
    d.occupancy = l > 0 ? std::min(1.0, each * l / a.batch) : 0;
    d.memory_mb = model->memory_mb;
    d.share = a.share;
    out.placement.devices.push_back(std::move(d));
  }
}

}  // namespace

expected<epoch_result> plan_graft_epoch(const epoch_input& in, const epoch_result* previous) {
  auto& pipes = *in.pipelines;
  auto& models = *in.models;
  if (in.rates.size() != pipes.size()) return fail("need one rate per pipeline");
  epoch_result out;
  out.splits.resize(pipes.size());
  int next_id = 0;
  auto* given = std::any_cast<graft::options>(&in.options);
  auto o = given ? *given : graft::options{};
  for (size_t pi = 0; pi < pipes.size(); ++pi) {
    auto& p = pipes[pi];
    out.splits[pi] = even_split(p);
    if (p.stages.size() != 1 || !models[p.stages.front().model_index].partitioned())
      return fail("graft serves pipelines of one stage on a partitioned model (models[].layers): pipeline '" + p.name +
                  "' is not one");
    auto& base = models[p.stages.front().model_index];
    double rate = in.rates[pi];
    if (!(rate > 0)) continue;
    // The shares this model may run at: those of the slots that serve it.
    std::vector<double> shares;
    for (auto& slot : in.slots)
      if (slot.serves(base.name)) shares.push_back(slot.share);
    auto gm = graft_model(base, shares);
    auto frags = fragments_of(in, pi, p, static_cast<int>(base.layers.size()), rate);
    std::vector<graft::fragment> merged;
    auto plan = plan_graft(gm, frags, &merged, static_cast<size_t>(std::max(1, o.group_size)), o.theta,
                           {o.weights[0], o.weights[1], o.weights[2]}, o.refine);
    if (!plan.feasible) {
      out.placement.infeasible.push_back(out.sessions.size());
      out.sessions.push_back({&base, p.slo_ms, rate});
      out.members.push_back({{pi, 0}});
      out.models_of.push_back({{&base, rate}});
      continue;
    }
    std::vector<std::string> names(plan.stages.size());
    for (size_t si = 0; si < plan.stages.size(); ++si) {
      auto& st = plan.stages[si];
      auto* model = range_model(in, base, st.a, st.b);
      if (!model)
        return fail("no model for layers [" + std::to_string(st.a) + ", " + std::to_string(st.b) + ") of '" +
                    base.name + "' (cluster_config::fragments)");
      names[si] = model->name;
      add_stage(pi, gm, st, model, merged, next_id, out);
    }
    add_routes(pi, plan, merged, names, out);
  }
  bind_slots(in, previous, out);
  return out;
}

}  // namespace sloserve::sched
