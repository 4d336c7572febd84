// Jellyfish's client-to-DNN mapping (Algorithm 1): the worked example of its Fig. 8, and the DP
// against every subset on random instances.

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace sloserve::sched
