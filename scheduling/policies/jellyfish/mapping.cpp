#include "scheduling/policies/jellyfish/mapping.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

namespace sloserve::sched::jellyfish {

std::pair<double, int> capacity(const dnn& dnn, double budget_ms) {
  double best = 0;
  int batch = 0;
  for (int b = 1; b <= dnn.max_batch; ++b) {
    double l = dnn.latency_ms(b);
    if (!(l > 0) || 2 * l > budget_ms) break;
    batch = b;
    best = std::max(best, dnn.load * 1000.0 * b / l);
  }
  return {best, batch};
}

choice find_optimal_clients(const dnn& dnn, size_t d, const std::vector<client>& clients,
                            const std::vector<size_t>& candidates) {
  choice out;
  // Clients in descending budget for this DNN: each row's capacity is at most the one before.
  auto order = candidates;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return clients[a].budget_ms[d] > clients[b].budget_ms[d]; });
  int h = 0;
  for (auto c : order) h = std::gcd(h, clients[c].rate);
  if (h <= 0) return out;
  std::vector<std::vector<int>> dp{{0}};  // row 0: no client
  std::vector<int> batch_of{0};           // per row: the largest batch its client allows
  int best = 0;
  size_t best_row = 0, best_col = 0;
  for (auto c : order) {
    auto [room, batch] = capacity(dnn, clients[c].budget_ms[d]);
    if (batch == 0) break;  // nor can any client after it
    auto columns = static_cast<size_t>(std::floor(room / h + 1e-9));
    if (dp.size() == 1) dp[0].assign(columns + 1, 0);
    columns = std::min(columns, dp.back().size() - 1);
    auto& prev = dp.back();
    std::vector<int> row(prev.size(), 0);
    int rate = clients[c].rate;
    for (size_t k = 1; k <= columns; ++k) {
      row[k] = prev[k];
      int w = static_cast<int>(k) * h;
      if (rate > w) continue;
      int v = rate + prev[static_cast<size_t>((w - rate) / h)];
      if (v > prev[k]) row[k] = v;
      if (v > best) best = v, best_row = dp.size(), best_col = k;
    }
    dp.push_back(std::move(row));
    batch_of.push_back(batch);
  }
  // Back from the best cell: a row whose value differs from the one above took its client.
  out.rate = best;
  for (size_t i = best_row, k = best_col; i > 0; --i) {
    if (dp[i][k] == dp[i - 1][k]) continue;
    auto c = order[i - 1];
    out.clients.push_back(c);
    out.batch = out.batch == 0 ? batch_of[i] : std::min(out.batch, batch_of[i]);
    k -= static_cast<size_t>(clients[c].rate / h);
  }
  std::sort(out.clients.begin(), out.clients.end());
  return out;
}

std::vector<choice> map_clients(const std::vector<dnn>& dnns, const std::vector<client>& clients,
                                const std::vector<size_t>& column) {
  std::vector<size_t> by_accuracy(dnns.size());
  std::iota(by_accuracy.begin(), by_accuracy.end(), 0);
  std::stable_sort(by_accuracy.begin(), by_accuracy.end(),
                   [&](size_t a, size_t b) { return dnns[a].accuracy > dnns[b].accuracy; });
  std::vector<size_t> left(clients.size());
  std::iota(left.begin(), left.end(), 0);
  std::vector<choice> out(dnns.size());
  for (auto d : by_accuracy) {
    if (left.empty()) break;
    out[d] = find_optimal_clients(dnns[d], column.empty() ? d : column[d], clients, left);
    std::erase_if(left, [&](size_t c) { return std::binary_search(out[d].clients.begin(), out[d].clients.end(), c); });
  }
  return out;
}

quality quality_of(const std::vector<choice>& mapping, const std::vector<dnn>& dnns,
                   const std::vector<client>& clients) {
  quality q;
  double total = 0;
  for (auto& c : clients) total += c.rate;
  size_t mapped = 0;
  for (size_t d = 0; d < mapping.size(); ++d)
    for (auto c : mapping[d].clients) {
      ++mapped;
      q.accuracy += clients[c].rate * dnns[d].accuracy / 100;
    }
  q.mapped = clients.empty() ? 1 : static_cast<double>(mapped) / static_cast<double>(clients.size());
  q.accuracy = total > 0 ? q.accuracy / total : 0;
  return q;
}

selection evaluate_selection(const std::vector<dnn>& zoo, const std::vector<client>& clients,
                             std::vector<size_t> dnns) {
  selection s;
  std::vector<dnn> instances;
  for (auto m : dnns) instances.push_back(zoo[m]);
  s.mapping = map_clients(instances, clients, dnns);
  s.quality = quality_of(s.mapping, instances, clients);
  s.dnns = std::move(dnns);
  return s;
}

selection select_dnns(const std::vector<dnn>& zoo, const std::vector<client>& clients, std::vector<size_t> start,
                      const annealing& a) {
  std::mt19937_64 rng(a.seed);
  std::uniform_real_distribution<double> u(0, 1);
  auto best = evaluate_selection(zoo, clients, std::move(start));
  enum class mode { degrade, upgrade };
  for (auto m : {mode::degrade, mode::upgrade}) {
    double t = a.t0;
    auto current = best;
    double floor = best.quality.mapped;  // UPGRADE maps no fewer clients than DEGRADE reached
    while (t > a.t_min && !(m == mode::degrade && current.quality.mapped >= 1)) {
      auto next = current.dnns;
      for (auto& d : next) {
        // DEGRADE: one step smaller or kept; UPGRADE: smaller, kept or larger.
        int step = m == mode::degrade ? (u(rng) < 0.5 ? -1 : 0) : static_cast<int>(rng() % 3) - 1;
        if (step < 0 && d > 0) --d;
        if (step > 0 && d + 1 < zoo.size()) ++d;
      }
      t *= a.cool;
      auto candidate = evaluate_selection(zoo, clients, std::move(next));
      double diff;
      if (m == mode::degrade) {
        diff = candidate.quality.mapped - current.quality.mapped;
        if (candidate.quality.mapped > best.quality.mapped) best = candidate;
      } else {
        if (candidate.quality.mapped < floor - 1e-12) continue;  // maps fewer: dropped
        diff = candidate.quality.accuracy - current.quality.accuracy;
        if (candidate.quality.accuracy > best.quality.accuracy) best = candidate;
      }
      if (diff > 0 || std::exp(-std::abs(diff) / t) > u(rng)) current = std::move(candidate);
    }
  }
  return best;
}

}  // namespace sloserve::sched::jellyfish
