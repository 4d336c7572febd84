#include "scheduling/catalogue.hpp"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <numeric>
#include <optional>

namespace sloserve::sched {

namespace {

// A stage with variants: its options (model indices), most accurate first, and its rate.
struct knob {
  size_t pipeline = 0, stage = 0;
  std::vector<size_t> options;
  double rate = 0;
};

double accuracy_of(const model_spec& m) {
  return m.accuracy.value_or(100) / 100;
}

}  // namespace

bool has_variants(const std::vector<pipeline>& pipelines) {
  for (auto& p : pipelines)
    for (auto& s : p.stages)
      if (s.variant_indices.size() > 1) return true;
  return false;
}

namespace {

using pick_t = std::vector<size_t>;

// The stages with variants, each with its options most accurate first (then smallest).
std::vector<knob> knobs_of(const std::vector<pipeline>& pipelines, const std::vector<model_spec>& models,
                           const std::vector<std::vector<double>>& rates) {
  std::vector<knob> knobs;
  for (size_t pi = 0; pi < pipelines.size(); ++pi)
    for (size_t s = 0; s < pipelines[pi].stages.size(); ++s) {
      auto& st = pipelines[pi].stages[s];
      if (st.variant_indices.size() < 2) continue;
      knob k{pi, s, st.variant_indices, pi < rates.size() && s < rates[pi].size() ? rates[pi][s] : 0};
      std::stable_sort(k.options.begin(), k.options.end(), [&](size_t a, size_t b) {
        if (accuracy_of(models[a]) != accuracy_of(models[b])) return accuracy_of(models[a]) > accuracy_of(models[b]);
        return models[a].memory_mb < models[b].memory_mb;
      });
      knobs.push_back(std::move(k));
    }
  return knobs;
}

// Every combination but `first`, best first: the first whose plan fits is the best that fits.
pick_t exact_search(const std::vector<knob>& knobs, const pick_t& first,
                    const std::function<double(const pick_t&)>& value,
                    const std::function<bool(const pick_t&)>& tried) {
  std::vector<pick_t> all;
  pick_t idx(knobs.size(), 0);
  while (true) {
    all.push_back(idx);
    size_t k = 0;
    while (k < knobs.size() && ++idx[k] == knobs[k].options.size()) idx[k++] = 0;
    if (k == knobs.size()) break;
  }
  std::vector<double> values;
  for (auto& a : all) values.push_back(value(a));
  std::vector<size_t> order(all.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return values[a] > values[b]; });
  for (auto i : order)
    if (all[i] != first && tried(all[i])) return all[i];
  return {};
}

// MCDNN's greedy from `first`: step down the stage that loses the least accuracy per MB saved
// until a plan fits.
pick_t greedy_search(const std::vector<knob>& knobs, const std::vector<model_spec>& models, pick_t now,
                     const std::function<bool(const pick_t&)>& tried) {
  while (true) {
    double best_loss = 0;
    std::optional<std::pair<size_t, size_t>> step;  // knob, option
    for (size_t k = 0; k < knobs.size(); ++k) {
      auto& cur = models[knobs[k].options[now[k]]];
      for (size_t j = now[k] + 1; j < knobs[k].options.size(); ++j) {
        auto& next = models[knobs[k].options[j]];
        double saved = cur.memory_mb - next.memory_mb;
        if (saved <= 0) continue;
        double loss = knobs[k].rate * (accuracy_of(cur) - accuracy_of(next)) / saved;
        if (!step || loss < best_loss) step = std::make_pair(k, j), best_loss = loss;
        break;  // the next smaller one only
      }
    }
    if (!step) return {};
    now[step->first] = step->second;
    if (tried(now)) return now;
  }
}

// The smallest variant of every stage.
pick_t smallest(const std::vector<knob>& knobs, const std::vector<model_spec>& models) {
  pick_t pick(knobs.size(), 0);
  for (size_t k = 0; k < knobs.size(); ++k) {
    auto& o = knobs[k].options;
    pick[k] = static_cast<size_t>(
        std::min_element(o.begin(), o.end(),
                         [&](size_t a, size_t b) { return models[a].memory_mb < models[b].memory_mb; }) -
        o.begin());
  }
  return pick;
}

// "pipeline 'p' stage 's': FROM (a%, m MB) -> TO (a%, m MB)" for each stage not at its best.
std::vector<std::string> degraded_lines(const std::vector<knob>& knobs, const std::vector<pipeline>& pipelines,
                                        const std::vector<model_spec>& models, const pick_t& chosen) {
  std::vector<std::string> out;
  for (size_t k = 0; k < knobs.size(); ++k) {
    if (chosen[k] == 0) continue;
    auto& from = models[knobs[k].options[0]];
    auto& to = models[knobs[k].options[chosen[k]]];
    auto& p = pipelines[knobs[k].pipeline];
    char buf[160];
    std::snprintf(buf, sizeof buf, " (%.2f%%, %.0f MB) -> ", 100 * accuracy_of(from), from.memory_mb);
    std::string line = "pipeline '" + p.name + "' stage '" + p.stages[knobs[k].stage].name + "': " + from.name + buf;
    std::snprintf(buf, sizeof buf, " (%.2f%%, %.0f MB)", 100 * accuracy_of(to), to.memory_mb);
    out.push_back(line + to.name + buf);
  }
  return out;
}

}  // namespace

catalogue_choice choose_variants(const std::vector<pipeline>& pipelines, const std::vector<model_spec>& models,
                                 const std::vector<std::vector<double>>& rates,
                                 const std::function<bool(const std::vector<pipeline>&)>& fits, size_t exact_limit) {
  catalogue_choice out;
  out.pipelines = pipelines;
  auto knobs = knobs_of(pipelines, models, rates);
  auto value = [&](const pick_t& pick) {
    double v = 0;
    for (size_t k = 0; k < knobs.size(); ++k) v += knobs[k].rate * accuracy_of(models[knobs[k].options[pick[k]]]);
    return v;
  };
  auto apply = [&](const pick_t& pick) {
    for (size_t k = 0; k < knobs.size(); ++k) {
      auto& st = out.pipelines[knobs[k].pipeline].stages[knobs[k].stage];
      st.model_index = knobs[k].options[pick[k]];
      st.model = models[st.model_index].name;
    }
  };
  std::function<bool(const pick_t&)> tried = [&](const pick_t& pick) {
    apply(pick);
    ++out.plans;
    return fits(out.pipelines);
  };
  pick_t pick(knobs.size(), 0);
  out.best_accuracy = out.accuracy = value(pick);
  if (knobs.empty() || tried(pick)) return out;
  size_t combos = 1;
  for (auto& k : knobs) combos = combos > exact_limit ? combos : combos * k.options.size();
  out.exact = combos <= exact_limit;
  auto chosen = out.exact ? exact_search(knobs, pick, value, tried) : greedy_search(knobs, models, pick, tried);
  if (chosen.empty()) {
    // Nothing fits: the smallest variant of every stage, and the planner does what it can.
    out.fits = false;
    chosen = smallest(knobs, models);
  }
  apply(chosen);
  out.accuracy = value(chosen);
  out.degraded = degraded_lines(knobs, pipelines, models, chosen);
  return out;
}

}  // namespace sloserve::sched
