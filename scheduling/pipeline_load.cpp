#include "scheduling/pipeline_load.hpp"

#include <algorithm>
#include <cmath>

#include "pipelines/query_walk.hpp"
#include "scheduling/epoch.hpp"
#include "scheduling/query_analyzer.hpp"

namespace sloserve::sched {

pipeline_load::pipeline_load(const std::vector<size_t>& stages, int settle_windows, double peak_half_life_s)
    : settle_windows_(settle_windows),
      peak_half_life_s_(peak_half_life_s),
      queries_(stages.size(), 0),
      sources_(stages.size()),
      fragments_(stages.size()) {
  for (auto n : stages) {
    rates_.pipelines.push_back({0, std::vector<double>(n, 0), std::vector<double>(n, 0)});
    stages_.emplace_back(n, 0);
    fallthroughs_.emplace_back(n, 0);
  }
}

void pipeline_load::remap(const std::vector<size_t>& stages, const std::vector<std::optional<size_t>>& from) {
  pipeline_load next(stages, settle_windows_, peak_half_life_s_);
  next.rates_.windows_with_load = rates_.windows_with_load;
  for (size_t i = 0; i < stages.size() && i < from.size(); ++i) {
    if (!from[i] || *from[i] >= queries_.size() || stages_[*from[i]].size() != stages[i]) continue;
    auto j = *from[i];
    next.rates_.pipelines[i] = rates_.pipelines[j];
    next.queries_[i] = queries_[j];
    next.stages_[i] = stages_[j];
    next.fallthroughs_[i] = fallthroughs_[j];
    next.sources_[i] = sources_[j];
    next.fragments_[i] = fragments_[j];
  }
  *this = std::move(next);
}

void pipeline_load::count(size_t p, uint64_t queries, const std::vector<uint64_t>& stage_invocations,
                          const std::vector<uint64_t>& fallthroughs, const std::vector<fragment_count>& fragments,
                          const std::string& source, double report_s) {
  if (p >= queries_.size()) return;
  for (auto& f : fragments) {
    // Frontends report what clients sent; a pipeline keeps at most 256 fragments.
    if (f.queries == 0 || (fragments_[p].size() >= 256 && !fragments_[p].count({f.start, f.slo_ms}))) continue;
    auto& w = fragments_[p][{f.start, f.slo_ms}];
    w.queries += static_cast<double>(f.queries);
    w.clients += std::max(1, f.clients);
  }
  if (!source.empty() && report_s > 0) {
    auto& w = sources_[p][source];
    size_t n = stages_[p].size();
    w.stages.resize(n, 0), w.fallthroughs.resize(n, 0);
    w.queries += static_cast<double>(queries);
    w.seconds += report_s;
    for (size_t s = 0; s < stage_invocations.size() && s < n; ++s)
      w.stages[s] += static_cast<double>(stage_invocations[s]);
    for (size_t s = 0; s < fallthroughs.size() && s < n; ++s) w.fallthroughs[s] += static_cast<double>(fallthroughs[s]);
    return;
  }
  queries_[p] += queries;
  for (size_t s = 0; s < stage_invocations.size() && s < stages_[p].size(); ++s) stages_[p][s] += stage_invocations[s];
  for (size_t s = 0; s < fallthroughs.size() && s < fallthroughs_[p].size(); ++s)
    fallthroughs_[p][s] += fallthroughs[s];
}

namespace {

// What the sources of one pipeline reported for a window: their rates summed (a source's latest
// while it missed at most two windows), each source's window restarted.
template <class Sources>
void sum_sources(Sources& sources, double& rate, std::vector<double>& stage, std::vector<double>& fallthrough) {
  for (auto it = sources.begin(); it != sources.end();) {
    auto& w = it->second;
    if (w.seconds > 0) {
      w.rate = w.queries / w.seconds;
      w.stage_rates.assign(w.stages.size(), 0), w.fallthrough_rates.assign(w.stages.size(), 0);
      for (size_t s = 0; s < w.stages.size(); ++s)
        w.stage_rates[s] = w.stages[s] / w.seconds, w.fallthrough_rates[s] = w.fallthroughs[s] / w.seconds;
      w.missed = 0;
    } else if (++w.missed > 2) {
      it = sources.erase(it);
      continue;
    }
    rate += w.rate;
    for (size_t s = 0; s < w.stage_rates.size() && s < stage.size(); ++s)
      stage[s] += w.stage_rates[s], fallthrough[s] += w.fallthrough_rates[s];
    w.queries = w.seconds = 0;
    std::fill(w.stages.begin(), w.stages.end(), 0);
    std::fill(w.fallthroughs.begin(), w.fallthroughs.end(), 0);
    ++it;
  }
}

}  // namespace

void pipeline_load::close_window(double window_s) {
  if (!(window_s > 0)) return;
  int n = rates_.windows_with_load;
  double w = n < 1 ? 1.0 : n < settle_windows_ ? 1.0 / n : 0.5;
  bool any = false;
  double decay = peak_half_life_s_ > 0 ? std::exp2(-window_s / peak_half_life_s_) : 0;
  for (size_t p = 0; p < queries_.size(); ++p) {
    auto& r = rates_.pipelines[p];
    double rate = static_cast<double>(queries_[p]) / window_s;
    std::vector<double> stage(r.stage.size()), fallthrough(r.stage.size());
    for (size_t s = 0; s < r.stage.size(); ++s) {
      stage[s] = static_cast<double>(stages_[p][s]) / window_s;
      fallthrough[s] = static_cast<double>(fallthroughs_[p][s]) / window_s;
      stages_[p][s] = 0;
      fallthroughs_[p][s] = 0;
    }
    sum_sources(sources_[p], rate, stage, fallthrough);
    r.window = rate;
    r.rate = w * r.window + (1 - w) * r.rate;
    r.peak = std::max(r.rate, r.peak * decay);
    for (size_t s = 0; s < r.stage.size(); ++s) {
      r.stage[s] = w * stage[s] + (1 - w) * r.stage[s];
      r.fallthrough[s] = w * fallthrough[s] + (1 - w) * r.fallthrough[s];
    }
    any |= rate > 0;
    queries_[p] = 0;
    // Fragments: each one's queries smoothed as the rates are; its share of the pipeline's.
    double total = 0;
    for (auto& [key, f] : fragments_[p]) {
      f.smoothed = w * f.queries + (1 - w) * f.smoothed;
      f.smoothed_clients = w * f.clients + (1 - w) * f.smoothed_clients;
      f.queries = f.clients = 0;
      total += f.smoothed;
    }
    r.fragments.clear();
    for (auto it = fragments_[p].begin(); it != fragments_[p].end();) {
      auto& f = it->second;
      if (total <= 0 || f.smoothed < 0.01 * total) {
        it = fragments_[p].erase(it);
        continue;
      }
      r.fragments.push_back({it->first.first, it->first.second, f.smoothed / total,
                             std::max(1, static_cast<int>(std::lround(f.smoothed_clients)))});
      ++it;
    }
  }
  if (any) ++rates_.windows_with_load;
}

double planning_rate(const pipeline_rate& r, bool surge) {
  return std::max({r.rate, r.peak, surge ? r.window : 0.0});
}

bool nothing_to_plan_for(const pipeline_rates& rates) {
  return std::none_of(rates.pipelines.begin(), rates.pipelines.end(),
                      [](const pipeline_rate& r) { return planning_rate(r, true) > 1e-3; });
}

void set_measured_load(epoch_input& in, const pipeline_rates& rates, double headroom, bool surge,
                       const planned_load* in_force) {
  in.rates.clear();
  in.fanouts.clear();
  in.fallthroughs.clear();
  in.fragments.clear();
  for (size_t pi = 0; pi < in.pipelines->size() && pi < rates.pipelines.size(); ++pi) {
    in.rates.push_back(planning_rate(rates.pipelines[pi], surge) * (1 + headroom));
    in.fanouts.push_back(measured_fanout((*in.pipelines)[pi], rates.pipelines[pi]));
    // A surge reaches the stages after the first late (they wait on it): what they measured is
    // not yet their fanout, which a surge does not lower below the file's or the plan in force's.
    if (surge) {
      auto& p = (*in.pipelines)[pi];
      // The plan in force's fanouts are its stage rates over its rates, as measured ones are
      // (declared where it carried nothing); a plan short of devices carried no finite rate.
      auto declared = declared_fanout(p);
      auto planned = declared;
      if (in_force && pi < in_force->stage_carried.size() && pi < in_force->carried.size() &&
          std::isfinite(in_force->carried[pi]))
        planned = measured_fanout(p, {in_force->carried[pi], in_force->stage_carried[pi]});
      auto& fan = in.fanouts.back();
      for (size_t s = 0; s < fan.size(); ++s) fan[s] = std::max({fan[s], declared[s], planned[s]});
    }
    in.fallthroughs.push_back(measured_fallthrough((*in.pipelines)[pi], *in.models, rates.pipelines[pi]));
    in.fragments.push_back(rates.pipelines[pi].fragments);
  }
}

void add_shed(uint64_t& queries, std::vector<uint64_t>& stage_invocations, std::vector<uint64_t>& fallthroughs,
              uint64_t shed) {
  if (shed == 0) return;
  if (queries > 0) {
    double f = static_cast<double>(queries + shed) / static_cast<double>(queries);
    for (auto* v : {&stage_invocations, &fallthroughs})
      for (auto& x : *v) x = static_cast<uint64_t>(std::llround(static_cast<double>(x) * f));
  }
  queries += shed;  // with none let in, the stages' rates stay unmeasured: their declared fanouts
}

int settle_windows(int beacon_ms) {
  return 1 + std::max(1, static_cast<int>(std::lround(1000.0 / std::max(1, beacon_ms))));
}

std::vector<double> measured_fallthrough(const pipeline& p, const std::vector<model_spec>& models,
                                         const pipeline_rate& r) {
  std::vector<double> out(p.stages.size(), 0);
  for (size_t s = 0; s < p.stages.size(); ++s) {
    if (!p.stages[s].cascade) continue;
    auto& first = models[p.stages[s].model_index];
    out[s] = declared_fallthrough(first);
    // Measured once the stage saw about a request a second.
    if (s < r.stage.size() && s < r.fallthrough.size() && r.stage[s] >= 1)
      out[s] = std::clamp(r.fallthrough[s] / r.stage[s], 0.0, 1.0);
  }
  return out;
}

std::vector<double> measured_fanout(const pipeline& p, const pipeline_rate& r) {
  auto fan = declared_fanout(p);
  for (size_t s = 0; s < p.stages.size() && s < r.stage.size(); ++s) {
    auto& parents = p.stages[s].parents;
    double base = parents.size() == 1 ? r.stage[parents[0]] : r.rate;
    if (base > 1e-6 && r.stage[s] > 0) fan[s] = r.stage[s] / base;
  }
  return fan;
}

std::vector<double> planning_rates(const pipeline_rates& rates, bool surge) {
  std::vector<double> out;
  for (auto& r : rates.pipelines) out.push_back(planning_rate(r, surge));
  return out;
}

epoch_reason epoch_due(const epoch_rule& rule, const pipeline_rates& rates, const planned_load* planned,
                       double since_s) {
  if (rates.windows_with_load < rule.settle_windows) return epoch_reason::none;
  // Nothing to plan for: the plan in force stays (a lull keeps its devices ready).
  if (nothing_to_plan_for(rates)) return epoch_reason::none;
  if (!planned) return epoch_reason::first;
  // Beyond three standard deviations of a Poisson count above what the plan carries.
  auto beyond = [&](double measured, double carried) {
    return measured > carried + 3 * std::sqrt(std::max(carried, 1.0) / std::max(rule.window_s, 1e-3));
  };
  for (size_t pi = 0; pi < rates.pipelines.size() && pi < planned->carried.size(); ++pi) {
    double carried = planned->carried[pi];
    auto& r = rates.pipelines[pi];
    if (beyond(r.window, carried) || r.rate > carried) return epoch_reason::surge;
    if (pi >= planned->stage_carried.size()) continue;
    auto& stages = planned->stage_carried[pi];
    for (size_t s = 0; s < stages.size() && s < r.stage.size(); ++s)
      if (beyond(r.stage[s], stages[s])) return epoch_reason::surge;
  }
  if (since_s >= rule.epoch_s) return epoch_reason::period;
  if (since_s < rule.min_epoch_s) return epoch_reason::none;
  for (size_t pi = 0; pi < rates.pipelines.size() && pi < planned->rate.size(); ++pi) {
    double rate = planning_rate(rates.pipelines[pi]), was = planned->rate[pi];
    if (was <= 0 ? rate > 0.5 : rate < rule.band_low * was || rate > rule.band_high * was) return epoch_reason::band;
  }
  return epoch_reason::none;
}

}  // namespace sloserve::sched
