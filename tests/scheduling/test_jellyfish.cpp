// Jellyfish's client-to-DNN mapping (Algorithm 1): the worked example of its Fig. 8, and the DP
// against every subset on random instances.

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <random>

#include "scheduling/jellyfish.hpp"

namespace sloserve::sched {
namespace {

// Fig. 8: five clients; at batch 3 the DNN carries 80 requests/s and serves c1-c3 (40 in all); at
// batch 2 it carries 60 and serves all five, best {c1, c2, c4, c5} with 60. The figure's rates
// are not printed; these (20, 15, 5, 15, 10) give exactly its sums, with {c1, c2, c4, c5} the one
// subset of 60.
TEST(jellyfish, the_worked_example_of_fig_8_maps_60_at_batch_2) {
  jf_dnn dnn{76.13, 3, [](int b) { return b == 1 ? 25.0 : b == 2 ? 2000.0 / 60 : 37.5; }};
  std::vector<jf_client> clients;
  for (auto [rate, budget] : std::vector<std::pair<int, double>>{{20, 80}, {15, 80}, {5, 80}, {15, 70}, {10, 70}})
    clients.push_back({rate, {budget}});
  EXPECT_NEAR(jf_capacity(dnn, 80).first, 80, 1e-9);
  EXPECT_EQ(jf_capacity(dnn, 80).second, 3);
  EXPECT_NEAR(jf_capacity(dnn, 70).first, 60, 1e-9);
  auto got = find_optimal_clients(dnn, 0, clients, {0, 1, 2, 3, 4});
  EXPECT_EQ(got.rate, 60);
  EXPECT_EQ(got.batch, 2);
  EXPECT_EQ(got.clients, (std::vector<size_t>{0, 1, 3, 4}));
  // Only c1-c3 to choose from: all three at batch 3.
  auto three = find_optimal_clients(dnn, 0, clients, {0, 1, 2});
  EXPECT_EQ(three.rate, 40);
  EXPECT_EQ(three.batch, 3);
}

// Random DNNs and clients: the DP's aggregate rate is the best over every subset that some batch
// serves (sum of rates within t(b) at a batch b whose 2·l(b) fits every chosen budget), and what
// it returns is such a subset.
TEST(jellyfish, the_dp_equals_the_best_subset_on_random_instances) {
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<double> u(0, 1);
  int served = 0, partial = 0;  // instances where some client is served; where some are left out
  for (int trial = 0; trial < 300; ++trial) {
    double alpha = 2 + 10 * u(rng), beta = 5 + 20 * u(rng);
    jf_dnn dnn{70, 1 + static_cast<int>(rng() % 12), [alpha, beta](int b) { return alpha * b + beta; }};
    size_t n = 1 + rng() % 9;
    std::vector<jf_client> clients;
    for (size_t i = 0; i < n; ++i)
      clients.push_back({static_cast<int>(5 * (1 + rng() % 8)), {2 * beta + (8 * alpha + 40) * 2 * u(rng)}});
    std::vector<size_t> all(n);
    for (size_t i = 0; i < n; ++i) all[i] = i;
    auto got = find_optimal_clients(dnn, 0, clients, all);
    int best = 0;
    for (uint32_t mask = 1; mask < (1u << n); ++mask) {
      int sum = 0;
      double least = 1e18;
      for (size_t i = 0; i < n; ++i)
        if (mask >> i & 1) sum += clients[i].rate, least = std::min(least, clients[i].budget_ms[0]);
      if (sum <= jf_capacity(dnn, least).first + 1e-9) best = std::max(best, sum);
    }
    ASSERT_EQ(got.rate, best) << "trial " << trial;
    served += best > 0;
    partial += best > 0 && got.clients.size() < n;
    int sum = 0;
    double least = 1e18;
    for (auto c : got.clients) sum += clients[c].rate, least = std::min(least, clients[c].budget_ms[0]);
    EXPECT_EQ(sum, got.rate);
    if (!got.clients.empty()) {
      EXPECT_EQ(got.batch, jf_capacity(dnn, least).second);
      EXPECT_LE(sum, jf_capacity(dnn, least).first + 1e-9);
    }
  }
  EXPECT_GE(served, 200);
  EXPECT_GE(partial, 100) << "the capacity must bind often enough to test the choice";
}

// Map: the most accurate DNN takes the largest aggregate rate it can; the next one the best of
// the rest; a client no DNN's budget holds stays unmapped.
TEST(jellyfish, map_clients_gives_the_most_accurate_dnn_the_most_traffic_first) {
  jf_dnn big{78, 4, [](int b) { return 20.0 * b + 10; }};  // t(1) = 33.3, t(2) = 40 req/s
  jf_dnn small{70, 4, [](int b) { return 5.0 * b + 5; }};  // t(4) = 160 req/s
  std::vector<jf_client> clients{{30, {100, 100}}, {20, {100, 100}}, {10, {100, 100}}, {10, {30, 30}}, {5, {5, 5}}};
  auto map = map_clients({small, big}, clients);
  ASSERT_EQ(map.size(), 2u);
  EXPECT_EQ(map[1].rate, 40) << "big, at batch 2 (2 x 50 ms within 100): 30 + 10";
  EXPECT_EQ(map[1].batch, 2);
  EXPECT_EQ(map[0].rate, 30) << "small takes the rest it can: 20 + 10";
  for (auto& m : map)
    for (auto c : m.clients) EXPECT_NE(c, 4u) << "no DNN fits a 5 ms budget";
}

// Algorithm 2 against exhaustive search over every multiset of DNNs for the workers, on small
// random instances: the same (clients mapped, rate-weighted accuracy) on most of them, and never
// a selection that maps fewer clients than the start.
TEST(jellyfish, annealing_finds_the_exhaustive_optimum_on_most_small_instances) {
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<double> u(0, 1);
  int optimal = 0, trials = 60;
  double sa_ms = 0, exhaustive_ms = 0;
  for (int trial = 0; trial < trials; ++trial) {
    // A zoo of 4 sizes: larger is slower and more accurate.
    std::vector<jf_dnn> zoo;
    for (int m = 0; m < 4; ++m) {
      double alpha = 2 + 4 * m + 2 * u(rng), beta = 4 + 3 * m;
      zoo.push_back({60 + 5.0 * m + u(rng), 8, [alpha, beta](int b) { return alpha * b + beta; }});
    }
    size_t workers = 2 + rng() % 2, n = 4 + rng() % 5;
    std::vector<jf_client> clients;
    for (size_t i = 0; i < n; ++i) {
      jf_client c{static_cast<int>(5 * (1 + rng() % 6)), {}};
      double slo = 40 + 120 * u(rng);
      for (int m = 0; m < 4; ++m) c.budget_ms.push_back(slo - 3.0 * m * u(rng));  // larger inputs upload longer
      clients.push_back(std::move(c));
    }
    auto t0 = std::chrono::steady_clock::now();
    auto sa = select_dnns(zoo, clients, std::vector<size_t>(workers, 0), {0.0125, 0.0005, 0.99, 1 + uint64_t(trial)});
    sa_ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    t0 = std::chrono::steady_clock::now();
    jf_quality best{-1, -1};
    std::vector<size_t> pick(workers, 0);
    while (true) {
      auto q = evaluate_selection(zoo, clients, pick).quality;
      if (q.mapped > best.mapped + 1e-12 || (q.mapped > best.mapped - 1e-12 && q.accuracy > best.accuracy)) best = q;
      // Next non-decreasing sequence (a multiset).
      size_t k = workers;
      while (k > 0 && pick[k - 1] == zoo.size() - 1) --k;
      if (k == 0) break;
      ++pick[k - 1];
      for (size_t j = k; j < workers; ++j) pick[j] = pick[k - 1];
    }
    exhaustive_ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    auto start = evaluate_selection(zoo, clients, std::vector<size_t>(workers, 0)).quality;
    EXPECT_GE(sa.quality.mapped, start.mapped - 1e-12) << "trial " << trial;
    EXPECT_LE(sa.quality.mapped, best.mapped + 1e-12);
    optimal += std::abs(sa.quality.mapped - best.mapped) < 1e-9 && std::abs(sa.quality.accuracy - best.accuracy) < 1e-9;
  }
  std::printf("annealing optimal on %d of %d instances; %.2f ms against exhaustive %.2f ms in all\n", optimal, trials,
              sa_ms, exhaustive_ms);
  EXPECT_GE(optimal, trials * 7 / 10);
}

}  // namespace
}  // namespace sloserve::sched
