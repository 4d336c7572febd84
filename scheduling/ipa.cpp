#include "scheduling/ipa.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

namespace sloserve::sched {

namespace {

// One (variant, batch) of a stage, with what it costs and takes.
struct option {
  ipa_choice choice;
  double accuracy = 0;  // a fraction
  double cost = 0;      // beta * n * R + delta * b
  double cores = 0;     // n * R
};

int replicas_for(const ipa_model& v, int b, double rate) {
  double per_s = 1000.0 * b / v.at(b);
  return std::max(1, static_cast<int>(std::ceil(rate / per_s - 1e-9)));
}

// A cascade's second model at batch b2 sees the rate lambda·f: its batch fills in
// (b2 - 1)/(lambda·f); with nothing falling through only batch 1 is planned (no wait).
option make_option(const ipa_stage& s, size_t variant, int b, int b2, const ipa_weights& w) {
  auto& v = s.variants[variant];
  option o;
  o.choice.variant = variant;
  o.choice.batch = b;
  o.choice.replicas = replicas_for(v, b, s.rate);
  o.choice.latency_ms = o.choice.first_ms = v.at(b) + 1000.0 * (b - 1) / s.rate;
  o.accuracy = v.served_accuracy() / 100.0;
  o.cores = o.choice.replicas * v.base_cores;
  if (v.then) {
    auto& c = *v.then;
    b2 = std::max(1, b2);
    double rate2 = s.rate * c.fallthrough;
    o.choice.batch2 = b2;
    o.choice.replicas2 = replicas_for(c, b2, rate2);
    o.choice.latency_ms += c.at(b2) + (rate2 > 0 ? 1000.0 * (b2 - 1) / rate2 : 0);
    o.cores += o.choice.replicas2 * c.base_cores;
  }
  o.cost = w.beta * o.cores + w.delta * (b + o.choice.batch2);
  return o;
}

std::vector<int> batches_of(const ipa_model& m) {
  return m.model->profile.plannable_batches(m.model->max_batch);
}

// The options of a stage no other option beats in accuracy, cost and latency at once, most
// accurate first (so that the search meets good choices early).
std::vector<option> options_of(const ipa_stage& s, const ipa_weights& w) {
  std::vector<option> all;
  for (size_t v = 0; v < s.variants.size(); ++v) {
    auto& x = s.variants[v];
    std::vector<int> second{0};
    if (x.then) second = x.then->fallthrough > 0 ? batches_of(*x.then) : std::vector<int>{1};
    for (int b : batches_of(x))
      for (int b2 : second) all.push_back(make_option(s, v, b, b2, w));
  }
  std::vector<option> kept;
  for (size_t i = 0; i < all.size(); ++i) {
    bool beaten = false;
    for (size_t j = 0; j < all.size() && !beaten; ++j) {
      if (i == j) continue;
      auto &a = all[j], &b = all[i];
      bool no_worse = a.accuracy >= b.accuracy && a.cost <= b.cost && a.choice.latency_ms <= b.choice.latency_ms;
      bool better = a.accuracy > b.accuracy || a.cost < b.cost || a.choice.latency_ms < b.choice.latency_ms;
      beaten = no_worse && (better || j < i);  // of equal options, the first stays
    }
    if (!beaten) kept.push_back(all[i]);
  }
  std::sort(kept.begin(), kept.end(), [](const option& a, const option& b) {
    return a.accuracy != b.accuracy ? a.accuracy > b.accuracy : a.cost < b.cost;
  });
  return kept;
}

struct search {
  const std::vector<ipa_stage>& stages;
  double slo_ms;
  double alpha;
  std::vector<std::vector<option>> options;
  std::vector<double> best_accuracy_from;  // per stage: prod of the best accuracies of stages >= it
  std::vector<double> least_cost_from;     // per stage: sum of the least costs of stages >= it
  std::vector<double> fastest;             // per stage: its fastest option's latency
  std::vector<std::vector<size_t>> next;   // successors
  std::vector<size_t> sinks;               // stages no other follows
  std::vector<double> sink_slo;            // per sink: the SLO of the paths that end at it
  // per stage, per sink: the fastest path from the stage's end to the sink's (< 0: none)
  std::vector<std::vector<double>> tail;
  std::vector<double> finish;  // per assigned stage: longest path to its end
  std::vector<size_t> pick;
  std::vector<size_t> best_pick;
  double best = -std::numeric_limits<double>::infinity();

  void run(size_t s, double accuracy, double cost) {
    if (s == stages.size()) {
      double objective = alpha * accuracy - cost;
      if (objective > best) best = objective, best_pick = pick;
      return;
    }
    if (alpha * accuracy * best_accuracy_from[s] - cost - least_cost_from[s] <= best) return;
    double start = 0;
    for (auto p : stages[s].after) start = std::max(start, finish[p]);
    for (size_t k = 0; k < options[s].size(); ++k) {
      auto& o = options[s][k];
      double end = start + o.choice.latency_ms;
      bool late = false;
      for (size_t k = 0; k < sinks.size() && !late; ++k)
        late = tail[s][k] >= 0 && end + tail[s][k] > sink_slo[k] + 1e-9;
      if (late) continue;
      finish[s] = end;
      pick[s] = k;
      run(s + 1, accuracy * o.accuracy, cost + o.cost);
    }
  }
};

}  // namespace

ipa_solution evaluate_ipa(const std::vector<ipa_stage>& stages, const std::vector<ipa_choice>& choices,
                          const ipa_weights& w) {
  ipa_solution out;
  out.accuracy = 1;
  std::vector<double> finish(stages.size(), 0);
  double cost = 0;
  for (size_t s = 0; s < stages.size(); ++s) {
    auto o = make_option(stages[s], choices[s].variant, choices[s].batch, choices[s].batch2, w);
    double start = 0;
    for (auto p : stages[s].after) start = std::max(start, finish[p]);
    finish[s] = start + o.choice.latency_ms;
    out.latency_ms = std::max(out.latency_ms, finish[s]);
    out.accuracy *= o.accuracy;
    out.cost += o.cores;
    cost += o.cost;
    out.stages.push_back(o.choice);
  }
  out.objective = w.alpha * out.accuracy - cost;
  return out;
}

expected<ipa_solution> solve_ipa(const std::vector<ipa_stage>& stages, double slo_ms, const ipa_weights& w) {
  if (stages.empty()) return fail("ipa: a pipeline with no stages");
  if (!(w.alpha >= 0)) return fail("ipa: alpha, the weight of accuracy, cannot be negative");
  for (size_t s = 0; s < stages.size(); ++s) {
    auto& st = stages[s];
    auto where = "ipa: stage " + std::to_string(s);
    if (st.variants.empty()) return fail(where + " has no variants");
    if (!(st.rate > 0)) return fail(where + " needs a rate above 0");
    if (st.slo_ms < 0) return fail(where + ": its own SLO cannot be negative");
    for (auto p : st.after)
      if (p >= s) return fail(where + " follows a stage that is not before it");
    auto bad = [](const ipa_model& v) { return !v.model || v.accuracy < 0 || v.accuracy > 100 || !(v.base_cores > 0); };
    for (auto& v : st.variants) {
      if (bad(v) || (v.then && bad(*v.then)))
        return fail(where + ": a variant needs a model, an accuracy in 0-100 and base cores above 0");
      if (v.then && !(v.then->fallthrough >= 0 && v.then->fallthrough <= 1))
        return fail(where + ": a cascade's fall-through must be a fraction in 0-1");
    }
  }
  search x{stages, slo_ms, w.alpha, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}};
  size_t n = stages.size();
  x.next.resize(n);
  for (size_t s = 0; s < n; ++s) {
    x.options.push_back(options_of(stages[s], w));
    for (auto p : stages[s].after) x.next[p].push_back(s);
  }
  x.best_accuracy_from.assign(n + 1, 1);
  x.least_cost_from.assign(n + 1, 0);
  x.fastest.assign(n, 0);
  for (size_t s = n; s-- > 0;) {
    double acc = 0, cost = std::numeric_limits<double>::infinity(), fast = cost;
    for (auto& o : x.options[s]) {
      acc = std::max(acc, o.accuracy);
      cost = std::min(cost, o.cost);
      fast = std::min(fast, o.choice.latency_ms);
    }
    x.best_accuracy_from[s] = acc * x.best_accuracy_from[s + 1];
    x.least_cost_from[s] = cost + x.least_cost_from[s + 1];
    x.fastest[s] = fast;
  }
  for (size_t s = 0; s < n; ++s)
    if (x.next[s].empty())
      x.sinks.push_back(s), x.sink_slo.push_back(stages[s].slo_ms > 0 ? std::min(stages[s].slo_ms, slo_ms) : slo_ms);
  // The fastest path from each stage's end to each sink's: the longest over the paths between
  // them, each stage at its fastest (a sink is reached when all of its paths are done).
  x.tail.assign(n, std::vector<double>(x.sinks.size(), -1));
  for (size_t s = n; s-- > 0;)
    for (size_t k = 0; k < x.sinks.size(); ++k) {
      if (x.sinks[k] == s) x.tail[s][k] = 0;
      for (auto c : x.next[s])
        if (x.tail[c][k] >= 0) x.tail[s][k] = std::max(x.tail[s][k], x.fastest[c] + x.tail[c][k]);
    }
  x.finish.assign(n, 0);
  x.pick.assign(n, 0);
  x.run(0, 1, 0);
  if (x.best_pick.empty()) return fail("ipa: no choice of variants and batches meets the SLO");
  std::vector<ipa_choice> choices;
  for (size_t s = 0; s < n; ++s) choices.push_back(x.options[s][x.best_pick[s]].choice);
  return evaluate_ipa(stages, choices, w);
}

int ipa_base_allocation(const core_latency& l, double threshold_rps, double sla_ms, int batch, int max_cores) {
  for (int r = 1; r <= max_cores; ++r)
    if (l.throughput(batch, r) >= threshold_rps && l.at(batch, r) <= sla_ms) return r;
  return 0;
}

}  // namespace sloserve::sched
