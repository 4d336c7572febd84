#include "scheduling/mcdnn_budget.hpp"

#include <algorithm>
#include <cmath>

#include "scheduling/epoch.hpp"
#include "scheduling/pipeline_load.hpp"

namespace sloserve::sched {

namespace {

constexpr double ms_per_hour = 3.6e6;

double accuracy_of(const model_spec& m) {
  return m.accuracy.value_or(100);
}

}  // namespace

std::vector<double> per_request_budgets(double remaining, double remaining_s, const std::vector<budget_use>& uses) {
  std::vector<double> out(uses.size(), 0);
  double squares = 0;
  for (auto& u : uses) squares += u.frequency * u.frequency;
  if (!(remaining_s > 0) || !(squares > 0)) return out;
  for (size_t n = 0; n < uses.size(); ++n) {
    auto& u = uses[n];
    double reloads =
        std::isfinite(u.since_load_s) && u.since_load_s > 0 ? u.load_cost * remaining_s / u.since_load_s : 0;
    out[n] = std::max(0.0, (remaining - reloads) * u.frequency / (remaining_s * squares));
  }
  return out;
}

double cost_per_request(const model_spec& m, double slo_ms, double price) {
  int b = 1;
  for (int x : m.profile.plannable_batches(m.max_batch))
    if (m.profile.latency_ms_at(x) <= slo_ms / 2) b = std::max(b, x);
  return m.profile.latency_ms_at(b) / b / ms_per_hour * price;
}

double load_cost(const model_spec& m, double price) {
  return m.load_ms / ms_per_hour * price;
}

size_t variant_within(const std::vector<size_t>& options, const std::vector<double>& costs,
                      const std::vector<model_spec>& models, double budget) {
  size_t best = options.size(), cheapest = 0;
  for (size_t k = 0; k < options.size(); ++k) {
    if (costs[k] < costs[cheapest]) cheapest = k;
    if (costs[k] > budget) continue;
    if (best == options.size() || accuracy_of(models[options[k]]) > accuracy_of(models[options[best]]) ||
        (accuracy_of(models[options[k]]) == accuracy_of(models[options[best]]) && costs[k] < costs[best]))
      best = k;
  }
  return options[best == options.size() ? cheapest : best];
}

double mean_price(const std::vector<device_slot>& slots) {
  if (slots.empty()) return 1;
  double sum = 0;
  for (auto& s : slots) sum += s.price;
  return sum / static_cast<double>(slots.size());
}

void budget_account::charge(double now_s, const std::vector<pipeline>& running, const std::vector<model_spec>& models,
                            const pipeline_rates& rates, double price) {
  if (!started_s_) started_s_ = now_s;
  double dt = charged_s_ ? now_s - *charged_s_ : 0;
  charged_s_ = now_s;
  if (!(dt > 0)) return;
  for (size_t pi = 0; pi < running.size() && pi < rates.pipelines.size(); ++pi) {
    auto& p = running[pi];
    for (size_t s = 0; s < p.stages.size() && s < rates.pipelines[pi].stage.size(); ++s)
      spent_ += rates.pipelines[pi].stage[s] * dt * cost_per_request(models[p.stages[s].model_index], p.slo_ms, price);
  }
}

void budget_account::adopt(double now_s, const std::vector<pipeline>& chosen) {
  if (!started_s_) started_s_ = now_s;
  for (size_t pi = 0; pi < chosen.size(); ++pi)
    for (size_t s = 0; s < chosen[pi].stages.size(); ++s) {
      auto& st = chosen[pi].stages[s];
      if (st.variant_indices.size() < 2) continue;
      auto [it, fresh] = loaded_.try_emplace({pi, s}, st.model_index, now_s);
      if (!fresh && it->second.first != st.model_index) it->second = {st.model_index, now_s};
    }
}

cost_budget budget_account::view(double now_s) const {
  cost_budget b;
  b.remaining = std::max(0.0, total_ - spent_);
  b.remaining_s = std::max(0.0, horizon_s_ - (started_s_ ? now_s - *started_s_ : 0));
  for (auto& [stage, at] : loaded_) b.since_load_s[stage] = now_s - at.second;
  return b;
}

}  // namespace sloserve::sched
