// Jellyfish's client-to-DNN mapping (Algorithm 1): the worked example of its Fig. 8, and the DP
// against every subset on random instances.

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <random>

#include "scheduling/dip_quantile.hpp"
#include "scheduling/policies/jellyfish/mapping.hpp"
#include "scheduling/policies/jellyfish/plan.hpp"

namespace sloserve::sched {
namespace {

// Fig. 8: five clients; at batch 3 the DNN carries 80 requests/s and serves c1-c3 (40 in all); at
// batch 2 it carries 60 and serves all five, best {c1, c2, c4, c5} with 60. The figure's rates
// are not printed; these (20, 15, 5, 15, 10) give exactly its sums, with {c1, c2, c4, c5} the one
// subset of 60.
TEST(jellyfish, the_worked_example_of_fig_8_maps_60_at_batch_2) {
  jellyfish::dnn dnn{76.13, 3, [](int b) { return b == 1 ? 25.0 : b == 2 ? 2000.0 / 60 : 37.5; }};
  std::vector<jellyfish::client> clients;
  for (auto [rate, budget] : std::vector<std::pair<int, double>>{{20, 80}, {15, 80}, {5, 80}, {15, 70}, {10, 70}})
    clients.push_back({rate, {budget}});
  EXPECT_NEAR(jellyfish::capacity(dnn, 80).first, 80, 1e-9);
  EXPECT_EQ(jellyfish::capacity(dnn, 80).second, 3);
  EXPECT_NEAR(jellyfish::capacity(dnn, 70).first, 60, 1e-9);
  auto got = find_optimal_clients(dnn, 0, clients, {0, 1, 2, 3, 4});
  EXPECT_EQ(got.rate, 60);
  EXPECT_EQ(got.batch, 2);
  EXPECT_EQ(got.clients, (std::vector<size_t>{0, 1, 3, 4}));
  // Only c1-c3 to choose from: all three at batch 3.
  auto three = find_optimal_clients(dnn, 0, clients, {0, 1, 2});
  EXPECT_EQ(three.rate, 40);
  EXPECT_EQ(three.batch, 3);
  // With a tenth of t(b) left as headroom (plan_options::headroom) the DNN carries 72 and 54:
  // the best subset is then 50 ({c1, c2, c4} at batch 2, or another of 50), not the 60 that
  // fills it.
  dnn.load = 0.9;
  EXPECT_NEAR(jellyfish::capacity(dnn, 80).first, 72, 1e-9);
  EXPECT_NEAR(jellyfish::capacity(dnn, 70).first, 54, 1e-9);
  auto roomy = find_optimal_clients(dnn, 0, clients, {0, 1, 2, 3, 4});
  EXPECT_EQ(roomy.rate, 50);
  int sum = 0;
  for (auto c : roomy.clients) sum += clients[c].rate;
  EXPECT_EQ(sum, 50);
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
    jellyfish::dnn dnn{70, 1 + static_cast<int>(rng() % 12), [alpha, beta](int b) { return alpha * b + beta; }};
    size_t n = 1 + rng() % 9;
    std::vector<jellyfish::client> clients;
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
      if (sum <= jellyfish::capacity(dnn, least).first + 1e-9) best = std::max(best, sum);
    }
    ASSERT_EQ(got.rate, best) << "trial " << trial;
    served += best > 0;
    partial += best > 0 && got.clients.size() < n;
    int sum = 0;
    double least = 1e18;
    for (auto c : got.clients) sum += clients[c].rate, least = std::min(least, clients[c].budget_ms[0]);
    EXPECT_EQ(sum, got.rate);
    if (!got.clients.empty()) {
      EXPECT_EQ(got.batch, jellyfish::capacity(dnn, least).second);
      EXPECT_LE(sum, jellyfish::capacity(dnn, least).first + 1e-9);
    }
  }
  EXPECT_GE(served, 200);
  EXPECT_GE(partial, 100) << "the capacity must bind often enough to test the choice";
}

// Map: the most accurate DNN takes the largest aggregate rate it can; the next one the best of
// the rest; a client no DNN's budget holds stays unmapped.
TEST(jellyfish, map_clients_gives_the_most_accurate_dnn_the_most_traffic_first) {
  jellyfish::dnn big{78, 4, [](int b) { return 20.0 * b + 10; }};  // t(1) = 33.3, t(2) = 40 req/s
  jellyfish::dnn small{70, 4, [](int b) { return 5.0 * b + 5; }};  // t(4) = 160 req/s
  std::vector<jellyfish::client> clients{
      {30, {100, 100}}, {20, {100, 100}}, {10, {100, 100}}, {10, {30, 30}}, {5, {5, 5}}};
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
    std::vector<jellyfish::dnn> zoo;
    for (int m = 0; m < 4; ++m) {
      double alpha = 2 + 4 * m + 2 * u(rng), beta = 4 + 3 * m;
      zoo.push_back({60 + 5.0 * m + u(rng), 8, [alpha, beta](int b) { return alpha * b + beta; }});
    }
    size_t workers = 2 + rng() % 2, n = 4 + rng() % 5;
    std::vector<jellyfish::client> clients;
    for (size_t i = 0; i < n; ++i) {
      jellyfish::client c{static_cast<int>(5 * (1 + rng() % 6)), {}};
      double slo = 40 + 120 * u(rng);
      for (int m = 0; m < 4; ++m) c.budget_ms.push_back(slo - 3.0 * m * u(rng));  // larger inputs upload longer
      clients.push_back(std::move(c));
    }
    auto t0 = std::chrono::steady_clock::now();
    auto sa = select_dnns(zoo, clients, std::vector<size_t>(workers, 0), {0.0125, 0.0005, 0.99, 1 + uint64_t(trial)});
    sa_ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    t0 = std::chrono::steady_clock::now();
    jellyfish::quality best{-1, -1};
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

// The whole scheduler (Algorithm 2 over Algorithm 1) against the exact optimum of the paper's
// program (P1): every client mapped to one worker, each worker one DNN at one batch b with
// 2·l(b) within each of its clients' budgets and their rates within b / l(b), the rate-weighted
// accuracy maximal. Instances as the paper's §7.6 draws them (rates {10, 15, 25} frames/s, SLOs
// {75, 100, 150} ms, uplinks in [7.5, 50) Mbps, 4-8 clients a worker) over a compute-bound zoo of
// four sizes (the smallest at 23 ms a frame); the optimum by a DP over workers and subsets of
// clients written here, sharing nothing with the scheduler. The paper reports 0.966-0.996 of a
// MILP's optimum.
TEST(jellyfish, the_scheduler_is_near_the_exact_optimum_of_the_papers_program) {
  std::mt19937_64 rng(17);
  std::uniform_real_distribution<double> u(0, 1);
  // Sizes 128, 256, 416, 608: l(b) = beta + alpha·b, accuracy, JPEG bytes at 0.25 a pixel.
  const double beta[] = {17, 22, 30, 40}, alpha[] = {6, 10, 18, 30}, acc[] = {38, 52, 61, 66};
  const double side[] = {128, 256, 416, 608};
  std::vector<jellyfish::dnn> zoo;
  for (int m = 0; m < 4; ++m) zoo.push_back({acc[m], 8, [b0 = beta[m], a = alpha[m]](int b) { return b0 + a * b; }});
  auto l = [&](int m, int b) { return beta[m] + alpha[m] * b; };
  int instances = 0, drawn = 0;
  double sum = 0, worst = 1;
  while (instances < 100 && drawn < 2000) {
    ++drawn;
    size_t workers = 2 + rng() % 2;
    // 2 workers: 8-16 clients (4-8 a worker, as the paper's); 3 workers: 6-9 (the DP is 3^n).
    size_t n = workers == 2 ? 8 + rng() % 9 : 6 + rng() % 4;
    std::vector<jellyfish::client> clients;
    const int rates[] = {10, 15, 25};
    const double slos[] = {75, 100, 150};
    for (size_t i = 0; i < n; ++i) {
      jellyfish::client c{rates[rng() % 3], {}};
      double slo = slos[rng() % 3], mbps = 7.5 + 42.5 * u(rng);
      for (int m = 0; m < 4; ++m) {
        double bytes = 0.25 * side[m] * side[m];
        double upload = bytes * 8 / (mbps * 1000);  // ms
        bool carries = mbps * 1e6 / (bytes * 8) > c.rate;
        c.budget_ms.push_back(carries ? std::max(0.0, slo - upload - 10) : 0);
      }
      clients.push_back(std::move(c));
    }
    // Per DNN and subset of clients: whether one worker serves them all, and their rate.
    size_t subsets = size_t{1} << n;
    std::vector<int> rate(subsets, 0);
    for (size_t s = 1; s < subsets; ++s) {
      size_t low = s & (~s + 1);
      rate[s] = rate[s ^ low] + clients[static_cast<size_t>(__builtin_ctzll(low))].rate;
    }
    std::vector<std::vector<char>> feasible(4, std::vector<char>(subsets, 0));
    for (int m = 0; m < 4; ++m) {
      std::vector<double> least(subsets, 1e18);  // the tightest budget of the subset on DNN m
      for (size_t s = 1; s < subsets; ++s) {
        size_t low = s & (~s + 1);
        least[s] = std::min(least[s ^ low],
                            clients[static_cast<size_t>(__builtin_ctzll(low))].budget_ms[static_cast<size_t>(m)]);
        for (int b = 1; b <= 8 && !feasible[static_cast<size_t>(m)][s]; ++b)
          feasible[static_cast<size_t>(m)][s] = 2 * l(m, b) <= least[s] && rate[s] <= b / l(m, b) * 1000;
      }
      feasible[static_cast<size_t>(m)][0] = 1;
    }
    // one[S]: the most accuracy x rate one worker earns serving exactly S (-1: it cannot);
    // best[S]: what k workers earn serving exactly S, over k; the last worker takes the rest.
    std::vector<double> one(subsets, -1);
    for (size_t s = 0; s < subsets; ++s)
      for (int m = 0; m < 4; ++m)
        if (feasible[static_cast<size_t>(m)][s]) one[s] = std::max(one[s], acc[m] * rate[s]);
    auto split = [&](const std::vector<double>& before, size_t s) {
      double v = -1;
      for (size_t t = s;; t = (t - 1) & s) {  // t: what the next worker serves of s
        if (before[s ^ t] >= 0 && one[t] >= 0) v = std::max(v, before[s ^ t] + one[t]);
        if (t == 0) break;
      }
      return v;
    };
    auto best = one;
    for (size_t k = 2; k < workers; ++k) {
      std::vector<double> next(subsets, -1);
      for (size_t s = 0; s < subsets; ++s) next[s] = split(best, s);
      best = std::move(next);
    }
    double optimum = split(best, subsets - 1);
    if (optimum < 0) continue;  // (P1) has no solution: not every client can be served
    auto sel = select_dnns(zoo, clients, std::vector<size_t>(workers, 0));
    double got = 0;
    for (size_t k = 0; k < workers; ++k)
      for (auto i : sel.mapping[k].clients) got += acc[sel.dnns[k]] * clients[i].rate;
    double ratio = got / optimum;
    EXPECT_LE(ratio, 1 + 1e-9) << "no better than the optimum";
    sum += ratio;
    worst = std::min(worst, ratio);
    ++instances;
  }
  ASSERT_EQ(instances, 100) << "drawn " << drawn;
  std::printf("jellyfish against (P1)'s optimum on %d instances (%d drawn): mean %.4f, worst %.4f\n", instances, drawn,
              sum / instances, worst);
  EXPECT_GE(sum / instances, 0.966);
}

// L_ij: SLO less upload at the variant's size and the round trip and overheads; 0 when the uplink
// cannot carry that size at the client's rate.
TEST(jellyfish_plan, budgets_count_the_upload_of_each_variants_input_size) {
  jellyfish::plan_options o;
  o.overhead_ms = 5;
  jellyfish::client_state c{"c", 100, 10, 8, 10, 0.25, 0, {}};    // 8 Mbps = 1 MB/s
  jellyfish::variant small{"s", 200, 200, 70, 8, [](int b) { return 1.0 * b; }};  // 10,000 bytes: 10 ms
  jellyfish::variant large{"l", 400, 500, 80, 8, [](int b) { return 2.0 * b; }};  // 50,000 bytes: 50 ms
  EXPECT_DOUBLE_EQ(jellyfish::input_bytes(c, small, o), 10000);
  EXPECT_DOUBLE_EQ(jellyfish::budget_ms(c, small, o), 100 - 10 - 10 - 5);
  EXPECT_DOUBLE_EQ(jellyfish::budget_ms(c, large, o), 100 - 50 - 10 - 5);
  // A changeable link: uploads timed at the bandwidth it fell below rarely, half the estimate;
  // whether it carries the size at all still goes by the estimate.
  auto shaky = c;
  shaky.uplink_low_mbps = 4;
  EXPECT_EQ(jellyfish::budget_ms(shaky, large, o), 0) << "100 ms of upload leave nothing";
  EXPECT_DOUBLE_EQ(jellyfish::budget_ms(shaky, small, o), 100 - 20 - 10 - 5);
  shaky.uplink_low_mbps = 16;  // never above the estimate
  EXPECT_DOUBLE_EQ(jellyfish::budget_ms(shaky, small, o), 100 - 10 - 10 - 5);
  c.rate_hz = 20;
  c.uplink_mbps = 0.8;  // 100,000 B/s: 10 of the small a second, fewer than the 20 it sends
  EXPECT_EQ(jellyfish::budget_ms(c, small, o), 0);
  c.uplink_mbps = -1;  // not measured yet: uploads cost nothing
  EXPECT_DOUBLE_EQ(jellyfish::budget_ms(c, large, o), 100 - 10 - 5);
  // Measured on images of 100x100: larger ones weigh less per pixel.
  auto measured = c;
  measured.image_pixels = 10000;
  EXPECT_NEAR(jellyfish::input_bytes(measured, small, o), 0.25 * 10000 * std::pow(4.0, 0.9), 1e-6);
  // Sizes it sent are known by what they weighed: exact at those, the nearest one carried to
  // the others.
  measured.image_bytes = {{10000, 3000}, {40000, 9000}, {250000, 52000}};
  EXPECT_DOUBLE_EQ(jellyfish::input_bytes(measured, small, o), 9000);
  EXPECT_DOUBLE_EQ(jellyfish::input_bytes(measured, large, o), 52000 * std::pow(200000.0 / 250000, 0.9));
  o.compute_share = 0.5;  // a fixed share of the SLO, whatever the uplink
  EXPECT_DOUBLE_EQ(jellyfish::budget_ms(c, large, o), 50);
  o.compute_share = 0;
  // Clients that send one size whatever they are told (DA_off): every variant's upload is that size's.
  auto fixed = o;
  fixed.client_side = 400;
  jellyfish::variant square{"q", 400, 400, 80, 8, [](int b) { return 2.0 * b; }};
  auto sent = measured;
  sent.uplink_mbps = 8;
  EXPECT_DOUBLE_EQ(jellyfish::budget_ms(sent, small, fixed), jellyfish::budget_ms(sent, square, o));
  EXPECT_DOUBLE_EQ(jellyfish::budget_ms(sent, large, fixed), jellyfish::budget_ms(sent, square, o));
  EXPECT_LT(jellyfish::budget_ms(sent, square, o), jellyfish::budget_ms(sent, small, o));
  c.bytes_per_pixel = 0;  // images not seen yet: the plan's default
  o.bytes_per_pixel = 1;
  EXPECT_DOUBLE_EQ(jellyfish::input_bytes(c, small, o), 40000);
}

// A client on a slow uplink gets a smaller variant than one on a fast uplink; everyone is mapped.
TEST(jellyfish_plan, slow_uplinks_get_smaller_inputs_and_everyone_is_mapped) {
  std::vector<jellyfish::variant> zoo;
  for (int k = 0; k < 4; ++k) {
    int side = 128 + 128 * k;
    double a = 0.5 + 0.5 * k;
    zoo.push_back({"v" + std::to_string(side), side, side, 60.0 + 5 * k, 8, [a](int b) { return a * b + 2; }});
  }
  std::vector<jellyfish::client_state> clients{{"fast", 100, 10, 200, 10, 0.25, 0, {}},
                                               {"slow", 100, 10, 2, 10, 0.25, 0, {}}};
  auto plan = plan_jellyfish(zoo, clients, 2, {}, {});
  ASSERT_EQ(plan.clients.size(), 2u);
  EXPECT_TRUE(plan.clients[0].mapped);
  EXPECT_TRUE(plan.clients[1].mapped);
  EXPECT_GT(plan.clients[0].variant, plan.clients[1].variant);
  EXPECT_NE(plan.clients[0].worker, plan.clients[1].worker);
  EXPECT_DOUBLE_EQ(plan.quality.mapped, 1);
  for (auto& a : plan.clients) EXPECT_GT(a.budget_ms, 0);
  // No clients: every worker keeps what it ran.
  auto idle = plan_jellyfish(zoo, {}, 2, {3, 1}, {});
  EXPECT_EQ(idle.variants, (std::vector<size_t>{3, 1}));
}

// A client no variant serves within its budget is still routed: to the fastest variant running.
TEST(jellyfish_plan, clients_beyond_every_budget_go_to_the_fastest_worker) {
  std::vector<jellyfish::variant> zoo{{"small", 100, 100, 60, 4, [](int b) { return 10.0 * b; }},
                                      {"large", 300, 300, 80, 4, [](int b) { return 30.0 * b; }}};
  std::vector<jellyfish::client_state> clients{{"ok", 200, 5, -1, 0, 0.25, 0, {}},
                                               {"hopeless", 20, 5, -1, 0, 0.25, 0, {}}};
  auto plan = plan_jellyfish(zoo, clients, 2, {1, 1}, {});
  EXPECT_TRUE(plan.clients[0].mapped);
  EXPECT_FALSE(plan.clients[1].mapped);
  auto fastest = std::min(plan.variants[0], plan.variants[1]);
  EXPECT_EQ(plan.clients[1].variant, fastest);
  EXPECT_EQ(plan.variants[plan.clients[1].worker], fastest);
  EXPECT_DOUBLE_EQ(plan.quality.mapped, 0.5);
}

// Spare compute: a client whose link carries only the small size now, but whose SLO holds an
// upload of a whole frame interval (whatever its link carries at its rate) and 2·l(b) of the large
// variant, moves to an idle worker, which then runs the most accurate variant that fits, and is
// told its size; its link then decides what it sends. A worker whose clients all allow it is
// raised in place. Not where the SLO is too tight, the link dips, the uplink is not measured,
// spare is off, or no worker has room.
TEST(jellyfish_plan, spare_compute_lifts_clients_whose_slo_holds_any_size_their_link_carries) {
  std::vector<jellyfish::variant> zoo{{"small", 100, 100, 60, 8, [](int b) { return 2.0 * b + 2; }},
                                      {"large", 300, 300, 80, 8, [](int b) { return 5.0 * b + 5; }}};
  // 10 frames/s at 1 Mbps: 12,500 bytes a frame. Small: 2,500 bytes (20 ms). Large: 22,500, not carried.
  jellyfish::client_state c{"c", 200, 10, 1, 10, 0.25, 0, {}};
  jellyfish::plan_options o;
  o.overhead_ms = 5;
  ASSERT_EQ(jellyfish::budget_ms(c, zoo[1], o), 0);
  EXPECT_DOUBLE_EQ(jellyfish::spare_budget_ms(c, o), 200 - 100 - 10 - 5);
  auto plan = plan_jellyfish(zoo, {c}, 2, {0, 0}, o);
  ASSERT_TRUE(plan.clients[0].mapped);
  EXPECT_EQ(plan.clients[0].variant, 1u);
  EXPECT_EQ(plan.variants[plan.clients[0].worker], 1u);
  EXPECT_EQ(plan.batch[plan.clients[0].worker], 1);
  EXPECT_DOUBLE_EQ(plan.clients[0].budget_ms, 85);
  EXPECT_DOUBLE_EQ(plan.quality.accuracy, 0.6) << "the mapping's quality, before the lift";
  // Off: it stays on the small variant.
  o.spare = false;
  EXPECT_EQ(plan_jellyfish(zoo, {c}, 2, {0, 0}, o).clients[0].variant, 0u);
  o.spare = true;
  // A tight SLO: a frame interval of upload leaves 15 ms, no room for 2·l(1) = 20 ms of the large
  // one. Alone on a worker, its frames (100 ms apart) never wait behind each other: l(1) = 10 ms
  // fits, and it moves to the idle worker.
  auto tight = c;
  tight.slo_ms = 130;
  EXPECT_DOUBLE_EQ(jellyfish::spare_budget_ms(tight, o), 15);
  EXPECT_EQ(plan_jellyfish(zoo, {tight}, 2, {0, 0}, o).clients[0].variant, 1u);
  // Two of them on one worker: a frame may wait for the other's, 2·l(1) = 20 ms: they stay, until
  // their pipeline plans for less of that wait (at most 0.5 of it: 1.5·l(1) = 15 ms).
  auto tight2 = tight;
  tight2.id = "c2";
  EXPECT_EQ(plan_jellyfish(zoo, {tight, tight2}, 1, {0}, o).variants[0], 0u);
  for (double share : {0.5, 0.25, 0.0}) {
    tight.wait_share = tight2.wait_share = share;
    auto shared = plan_jellyfish(zoo, {tight, tight2}, 1, {0}, o);
    EXPECT_EQ(shared.variants[0], 1u) << share;
    for (auto& a : shared.clients) EXPECT_EQ(a.variant, 1u) << share;
  }
  tight.wait_share = 0.75;
  EXPECT_EQ(plan_jellyfish(zoo, {tight, tight2}, 1, {0}, o).variants[0], 0u) << "the larger share of the two counts";
  tight.wait_share = tight2.wait_share = 1;
  // ...but a variant between them (15,625 bytes, not carried either) fits: 2·l(1) = 12 ms.
  std::vector<jellyfish::variant> three{zoo[0], {"mid", 250, 250, 70, 8, [](int b) { return 3.0 * b + 3; }}, zoo[1]};
  auto middle = plan_jellyfish(three, {tight, tight2}, 1, {0}, o);
  EXPECT_EQ(middle.variants[0], 1u);
  EXPECT_EQ(middle.batch[0], 1);
  for (auto& a : middle.clients) EXPECT_EQ(a.variant, 1u);
  // A link that dipped to half its estimate: two intervals of upload.
  auto shaky = c;
  shaky.uplink_low_mbps = 0.5;
  EXPECT_DOUBLE_EQ(jellyfish::spare_budget_ms(shaky, o), 0);
  EXPECT_EQ(plan_jellyfish(zoo, {shaky}, 2, {0, 0}, o).clients[0].variant, 0u);
  // Room for the link to fall by a quarter unseen (lift_margin): 4/3 of an interval of upload,
  // which leaves 200 - 133.3 - 10 - 5; at a margin of a half, two intervals: nothing.
  o.lift_margin = 0.25;
  EXPECT_NEAR(jellyfish::spare_budget_ms(c, o), 200 - 400.0 / 3 - 10 - 5, 1e-9);
  EXPECT_EQ(plan_jellyfish(zoo, {c}, 2, {0, 0}, o).clients[0].variant, 1u) << "l(1) = 10 ms still fits alone";
  o.lift_margin = 0.5;
  EXPECT_DOUBLE_EQ(jellyfish::spare_budget_ms(c, o), 0);
  EXPECT_EQ(plan_jellyfish(zoo, {c}, 2, {0, 0}, o).clients[0].variant, 0u);
  o.lift_margin = 0;
  // Not measured yet: nothing is known to hold (the mapping, counting its uploads as free, may
  // still give it the large one).
  auto unknown = c;
  unknown.uplink_mbps = -1;
  EXPECT_DOUBLE_EQ(jellyfish::spare_budget_ms(unknown, o), 0);
  // One worker: it is raised in place, its client with it.
  auto alone = plan_jellyfish(zoo, {c}, 1, {0}, o);
  EXPECT_EQ(alone.clients[0].variant, 1u);
  EXPECT_EQ(alone.variants[0], 1u);
  // Ten on one worker, 100/s: the large variant carries them at b = 1 (100/s), within 85 ms.
  std::vector<jellyfish::client_state> ten;
  for (int k = 0; k < 10; ++k) ten.push_back(c), ten.back().id = "c" + std::to_string(k);
  auto raised = plan_jellyfish(zoo, ten, 1, {0}, o);
  EXPECT_EQ(raised.variants[0], 1u);
  EXPECT_EQ(raised.batch[0], 1);
  for (auto& a : raised.clients) EXPECT_EQ(a.variant, 1u);
  // Twenty, 200/s: beyond what the large one carries within 85 ms (b <= 7: 175/s). It stays.
  ten.resize(20, c);
  for (size_t k = 10; k < 20; ++k) ten[k].id = "c" + std::to_string(k);
  auto kept = plan_jellyfish(zoo, ten, 1, {0}, o);
  EXPECT_EQ(kept.variants[0], 0u);
  for (auto& a : kept.clients) EXPECT_EQ(a.variant, 0u);
  // Twenty, 200/s: one small worker carries them all (b = 8, 444/s); the other, idle, runs the
  // large variant, and takes clients while a batch whose 2·l(b) their 85 ms hold (b <= 7: 175/s at
  // most) carries them: 17 of them, 170/s, at b = 6 (171/s). The three left, 30/s, no longer need
  // the small one: their worker is raised in place too, at b = 1.
  std::vector<jellyfish::client_state> many;
  for (int k = 0; k < 20; ++k) many.push_back(c), many.back().id = "c" + std::to_string(k);
  auto full = plan_jellyfish(zoo, many, 2, {0, 0}, o);
  std::map<int, size_t> at_batch;
  for (auto& a : full.clients) {
    EXPECT_EQ(a.variant, full.variants[a.worker]);
    EXPECT_EQ(a.variant, 1u);
    ++at_batch[full.batch[a.worker]];
  }
  EXPECT_EQ(at_batch, (std::map<int, size_t>{{1, 3}, {6, 17}}));
}

}  // namespace
}  // namespace sloserve::sched

namespace sloserve::sched {
namespace {

// The dip quantile follows the misses: deeper dips (a lower quantile: halved while over twice the
// target miss, 1.25x lower while over the target), shallower ones (doubled, or 0.005 more at least,
// while under half the target miss), steady between; every second, judged on outcomes that fade
// 0.85x a step, once 100 are weighed.
// The zoo cleaned as the paper's estimator does: a variant beaten in accuracy and l(1) goes, of
// two equal ones the first stays, and l(b) never falls as the variants grow (a p99 profile whose
// larger variant measured faster at some batch is planned at the smaller one's latency).
TEST(jellyfish_plan, the_zoo_drops_dominated_variants_and_its_latencies_grow_with_size) {
  auto v = [](std::string name, double accuracy, std::vector<double> l) {
    jellyfish::variant x;
    x.model = std::move(name);
    x.accuracy = accuracy;
    x.max_batch = static_cast<int>(l.size());
    x.latency_ms = [l](int b) { return l[static_cast<size_t>(std::clamp(b, 1, static_cast<int>(l.size()))) - 1]; };
    return x;
  };
  auto zoo =
      jellyfish::clean_zoo({v("c", 60, {30, 40, 50}), v("a", 40, {10, 14, 20}), v("slow_and_worse", 45, {35, 40, 45}),
                            v("b", 50, {20, 25, 19}), v("twin", 60, {30, 40, 50}), v("d", 70, {25, 41, 60})});
  std::vector<std::string> names;
  for (auto& x : zoo) names.push_back(x.model);
  // slow_and_worse: b is more accurate and faster; twin equals c; c is beaten by d (faster at
  // l(1), more accurate).
  EXPECT_EQ(names, (std::vector<std::string>{"a", "b", "d"}));
  EXPECT_DOUBLE_EQ(zoo[1].latency_ms(3), 20) << "b's 19 ms at batch 3 is below a's 20";
  EXPECT_DOUBLE_EQ(zoo[1].latency_ms(2), 25);
  EXPECT_DOUBLE_EQ(zoo[2].latency_ms(1), 25);
  for (size_t j = 1; j < zoo.size(); ++j)
    for (int b = 1; b <= 3; ++b) EXPECT_GE(zoo[j].latency_ms(b), zoo[j - 1].latency_ms(b)) << j << " " << b;
}

// The DNN update: the new selection goes to the workers so that the total step from what each
// ran to what it runs is least (against every permutation on random small instances), the same
// DNNs run, and each client moves with its worker's variant and batch.
TEST(jellyfish_plan, the_new_selection_goes_to_the_workers_by_sorted_matching) {
  std::mt19937 rng(46);
  for (int trial = 0; trial < 300; ++trial) {
    size_t n = 1 + rng() % 6;
    jellyfish::plan p;
    std::vector<size_t> previous(n);
    for (size_t w = 0; w < n; ++w) {
      previous[w] = rng() % 8;
      p.variants.push_back(rng() % 8);
      p.batch.push_back(1 + static_cast<int>(rng() % 8));
    }
    for (size_t c = 0; c < 2 * n; ++c) {
      jellyfish::assignment a;
      a.worker = rng() % n;
      a.variant = p.variants[a.worker];
      p.clients.push_back(a);
    }
    auto before = p;
    jellyfish::match_to_previous(p, previous);
    auto distance = [&](const std::vector<size_t>& v) {
      size_t d = 0;
      for (size_t w = 0; w < n; ++w) d += v[w] > previous[w] ? v[w] - previous[w] : previous[w] - v[w];
      return d;
    };
    std::vector<size_t> perm(n);
    for (size_t w = 0; w < n; ++w) perm[w] = w;
    size_t least = SIZE_MAX;
    do {
      std::vector<size_t> v(n);
      for (size_t w = 0; w < n; ++w) v[w] = before.variants[perm[w]];
      least = std::min(least, distance(v));
    } while (std::next_permutation(perm.begin(), perm.end()));
    EXPECT_EQ(distance(p.variants), least) << "trial " << trial;
    auto sorted = [](std::vector<size_t> v) {
      std::sort(v.begin(), v.end());
      return v;
    };
    EXPECT_EQ(sorted(p.variants), sorted(before.variants)) << "trial " << trial;
    for (size_t c = 0; c < p.clients.size(); ++c) {
      EXPECT_EQ(p.clients[c].variant, p.variants[p.clients[c].worker]) << "trial " << trial;
      EXPECT_EQ(p.batch[p.clients[c].worker], before.batch[before.clients[c].worker]) << "trial " << trial;
    }
  }
}

TEST(dip_quantile, plans_for_deeper_dips_while_clients_miss_more_than_the_target) {
  dip_quantile d(0.2, 0.02);
  d.outcome(0, 150, 15);  // 10% missed
  EXPECT_DOUBLE_EQ(d.quantile(0.9), 0.2) << "no step before 1 s";
  EXPECT_DOUBLE_EQ(d.quantile(1), 0.1) << "over twice the target: halved";
  d.outcome(1.5, 150, 15);
  EXPECT_DOUBLE_EQ(d.quantile(2), 0.05);
  // Then nothing missed: the two bad steps, fading, still hold it down for four steps (6.1% and
  // 4.2% missed as weighed: halved; 3.1% and 2.3%: 1.25x lower), then it stays (1.8% to 1.2%),
  // then it climbs (0.9%, under half the target: doubled).
  const double expected[] = {0.025, 0.0125, 0.01, 0.008, 0.008, 0.008, 0.008, 0.016, 0.032};
  for (int k = 0; k < 9; ++k) {
    double t = 3 + k;
    d.outcome(t - 0.5, 150, 0);
    EXPECT_NEAR(d.quantile(t), expected[k], 1e-12) << "at " << t;
  }
  // Between half the target and the target: it stays.
  dip_quantile steady(0.1, 0.02);
  steady.outcome(0, 1000, 11);
  EXPECT_DOUBLE_EQ(steady.quantile(1), 0.1);
  EXPECT_DOUBLE_EQ(steady.wait_share(), 1);
  dip_quantile slight(0.1, 0.02);
  slight.outcome(0, 1000, 25);
  EXPECT_DOUBLE_EQ(slight.quantile(1), 0.1 / 1.25) << "2.5%: over the target, under twice it";
}

// Once uploads are planned at the estimate itself (the quantile at 1), misses under 0.75 of the
// target lower the share of a batch's wait the lift plans for, a quarter a step, to none; misses
// over the target raise it again (a half at once while over twice the target) before the quantile
// falls.
TEST(dip_quantile, plans_for_less_of_a_batchs_wait_once_uploads_are_timed_at_the_estimate) {
  dip_quantile d(0.5, 0.02);
  EXPECT_DOUBLE_EQ(d.wait_share(), 1);
  d.outcome(0, 1000, 0);
  EXPECT_DOUBLE_EQ(d.quantile(1), 1);
  EXPECT_DOUBLE_EQ(d.wait_share(), 1) << "the quantile rises first";
  const double expected[] = {0.75, 0.5, 0.25, 0, 0};
  for (int k = 0; k < 5; ++k) {
    d.outcome(1.5 + k, 1000, 0);
    EXPECT_DOUBLE_EQ(d.quantile(2 + k), 1);
    EXPECT_DOUBLE_EQ(d.wait_share(), expected[k]) << k;
  }
  dip_quantile e(1, 0.02);
  for (int k = 0; k < 3; ++k) e.outcome(k, 1000, 0), e.quantile(k + 1);
  ASSERT_DOUBLE_EQ(e.wait_share(), 0.25);
  e.outcome(4.5, 10000, 400);  // 3.3% of all weighed: over the target, a quarter back
  EXPECT_DOUBLE_EQ(e.quantile(5), 1);
  EXPECT_DOUBLE_EQ(e.wait_share(), 0.5);
  e.outcome(5.5, 10000, 1000);  // over twice the target: half at once, to the worst case
  EXPECT_DOUBLE_EQ(e.quantile(6), 1);
  EXPECT_DOUBLE_EQ(e.wait_share(), 1);
  e.outcome(6.5, 10000, 1000);  // then the quantile falls
  EXPECT_DOUBLE_EQ(e.quantile(7), 0.5);
  EXPECT_DOUBLE_EQ(e.wait_share(), 1);
  // At 1, 1.6% of outcomes missed (over 0.75 of the target): it stays; 1.4%: a quarter down.
  dip_quantile near(1, 0.02), under(1, 0.02);
  near.outcome(0, 1000, 16);
  under.outcome(0, 1000, 14);
  EXPECT_DOUBLE_EQ(near.quantile(1), 1);
  EXPECT_DOUBLE_EQ(near.wait_share(), 1);
  EXPECT_DOUBLE_EQ(under.quantile(1), 1);
  EXPECT_DOUBLE_EQ(under.wait_share(), 0.75);
  // With no target, nothing moves.
  dip_quantile fixed(1, 0);
  fixed.outcome(0, 1000, 0);
  fixed.quantile(5);
  EXPECT_DOUBLE_EQ(fixed.wait_share(), 1);
  EXPECT_DOUBLE_EQ(fixed.headroom_share(), 1);
}

// The wait share goes no lower than its floor (scheduler.jellyfish.min_wait_share): at 1, the
// default, the lift plans for a whole batch's wait however few miss, and the headroom's share moves
// from there; at 0.5, two quarter steps; misses over the target still take the quantile down.
TEST(dip_quantile, lowers_the_wait_share_no_further_than_its_floor) {
  dip_quantile whole(1, 0.02, 1), half(1, 0.02, 0.5);
  const double headroom[] = {0.75, 0.5, 0.25, 0, 0, 0};
  const double wait[] = {0.75, 0.5, 0.5, 0.5, 0.5, 0.5};
  const double half_headroom[] = {1, 1, 0.75, 0.5, 0.25, 0};  // from the wait share's floor on
  for (int k = 0; k < 6; ++k) {
    whole.outcome(k, 1000, 0), half.outcome(k, 1000, 0);
    EXPECT_DOUBLE_EQ(whole.quantile(k + 1), 1);
    EXPECT_DOUBLE_EQ(whole.wait_share(), 1) << k;
    EXPECT_DOUBLE_EQ(whole.headroom_share(), headroom[k]) << k;
    EXPECT_DOUBLE_EQ(half.quantile(k + 1), 1);
    EXPECT_DOUBLE_EQ(half.wait_share(), wait[k]) << k;
    EXPECT_DOUBLE_EQ(half.headroom_share(), half_headroom[k]) << k;
  }
  whole.outcome(6, 10000, 1000);  // over twice the target: the headroom back first
  whole.quantile(7);
  EXPECT_DOUBLE_EQ(whole.headroom_share(), 0.5);
  whole.outcome(7, 10000, 3000);
  whole.quantile(8);
  ASSERT_DOUBLE_EQ(whole.headroom_share(), 1);
  whole.outcome(8, 10000, 3000);  // then the quantile, the wait share being whole
  EXPECT_DOUBLE_EQ(whole.quantile(9), 0.5);
  EXPECT_DOUBLE_EQ(whole.wait_share(), 1);
  dip_quantile clamped(1, 0.02, 1.5);
  clamped.outcome(0, 1000, 0);
  clamped.quantile(1);
  EXPECT_DOUBLE_EQ(clamped.wait_share(), 1);
}

// Once the lift plans for none of a batch's wait, misses under a quarter of the target give back
// the workers' headroom a quarter a step, to none; misses over half the target take it back first
// (a half at once while over twice the target), before the wait share rises.
TEST(dip_quantile, gives_back_the_headroom_last_and_takes_it_again_first) {
  dip_quantile d(1, 0.02);
  const double wait[] = {0.75, 0.5, 0.25, 0, 0, 0, 0, 0, 0};
  const double headroom[] = {1, 1, 1, 1, 0.75, 0.5, 0.25, 0, 0};
  for (int k = 0; k < 9; ++k) {
    d.outcome(k, 1000, 0);
    EXPECT_DOUBLE_EQ(d.quantile(k + 1), 1);
    EXPECT_DOUBLE_EQ(d.wait_share(), wait[k]) << k;
    EXPECT_DOUBLE_EQ(d.headroom_share(), headroom[k]) << k;
  }
  d.outcome(9, 10000, 90);  // 0.6% of all weighed: over a quarter of the target, under half: it stays
  d.quantile(10);
  EXPECT_DOUBLE_EQ(d.headroom_share(), 0);
  d.outcome(10, 10000, 200);  // 1.2%: over half the target, a quarter of the headroom back
  d.quantile(11);
  EXPECT_DOUBLE_EQ(d.headroom_share(), 0.25);
  EXPECT_DOUBLE_EQ(d.wait_share(), 0);
  d.outcome(11, 10000, 1000);  // over twice the target: a half at once
  d.quantile(12);
  EXPECT_DOUBLE_EQ(d.headroom_share(), 0.75);
  EXPECT_DOUBLE_EQ(d.wait_share(), 0);
  d.outcome(12, 10000, 1000);  // whole again; then the wait share rises
  d.quantile(13);
  EXPECT_DOUBLE_EQ(d.headroom_share(), 1);
  EXPECT_DOUBLE_EQ(d.wait_share(), 0);
  d.outcome(13, 10000, 1000);
  EXPECT_DOUBLE_EQ(d.quantile(14), 1);
  EXPECT_DOUBLE_EQ(d.wait_share(), 0.5);
  EXPECT_DOUBLE_EQ(d.headroom_share(), 1);
  // A share taken back is the least for 30 s, then a quarter less: down to 0.5, misses take it
  // to 0.75, and however few miss after, 0.5 comes again only 30 s later.
  dip_quantile e(1, 0.02);
  for (int k = 0; k < 6; ++k) e.outcome(k, 1000, 0), e.quantile(k + 1);
  ASSERT_DOUBLE_EQ(e.headroom_share(), 0.5);
  e.outcome(6, 10000, 150);  // 1.1%: over half the target
  e.quantile(7);
  ASSERT_DOUBLE_EQ(e.headroom_share(), 0.75);
  for (int t = 7; t < 36; ++t) {
    e.outcome(t, 100000, 0);
    e.quantile(t + 1);
    EXPECT_DOUBLE_EQ(e.headroom_share(), 0.75) << "at " << t + 1;
  }
  e.outcome(36, 100000, 0);
  e.quantile(37);
  EXPECT_DOUBLE_EQ(e.headroom_share(), 0.5) << "30 s after the take-back";
  e.outcome(37, 100000, 0);
  e.quantile(38);
  EXPECT_DOUBLE_EQ(e.headroom_share(), 0.5);
}

// The headroom is judged by the misses the servers caused alone: misses that are the uploads'
// (1.2% of all, none at the servers) let it be given back all the same, and more of them (over
// the target) raise the wait share, not the headroom; the same 1.2% at the servers keep it whole.
TEST(dip_quantile, the_headroom_is_judged_by_the_misses_the_servers_caused) {
  auto run = [](int64_t servers) {
    dip_quantile d(1, 0.02);
    for (int k = 0; k < 12; ++k) {
      d.outcome(k, 10000, 120, servers);
      d.quantile(k + 1);
    }
    return d;
  };
  auto uploads = run(0), servers = run(120);
  EXPECT_DOUBLE_EQ(uploads.wait_share(), 0);
  EXPECT_DOUBLE_EQ(uploads.headroom_share(), 0);
  EXPECT_DOUBLE_EQ(servers.wait_share(), 0);
  EXPECT_DOUBLE_EQ(servers.headroom_share(), 1);
  uploads.outcome(12, 20000, 2000, 0);  // 3.6% of all weighed: over the target
  EXPECT_DOUBLE_EQ(uploads.quantile(13), 1);
  EXPECT_DOUBLE_EQ(uploads.headroom_share(), 0);
  EXPECT_DOUBLE_EQ(uploads.wait_share(), 0.25);
}

// A level taken back is judged on the misses that come after it, 2 s on: the misses weighed
// from the fuller plan before take no more back; its own misses do, and a step whose own servers'
// misses pass twice the target takes back at once.
TEST(dip_quantile, a_level_taken_back_is_judged_on_its_own_misses) {
  dip_quantile d(1, 0.02);
  for (int k = 0; k < 8; ++k) d.outcome(k, 1000, 0), d.quantile(k + 1);
  ASSERT_DOUBLE_EQ(d.headroom_share(), 0);
  d.outcome(8, 10000, 300, 300);  // 2% of all weighed: over half the target, a quarter back
  d.quantile(9);
  ASSERT_DOUBLE_EQ(d.headroom_share(), 0.25);
  d.outcome(9, 10000, 0, 0);  // those misses weighed still: 1.1%, yet none since
  d.quantile(10);
  EXPECT_DOUBLE_EQ(d.headroom_share(), 0.25) << "not judged by the fuller plan's misses";
  d.outcome(10, 10000, 0, 0);
  d.quantile(11);
  EXPECT_DOUBLE_EQ(d.headroom_share(), 0.25);
  d.outcome(11, 10000, 400, 400);  // its own: 1.6% since the take-back
  d.quantile(12);
  EXPECT_DOUBLE_EQ(d.headroom_share(), 0.5);
  d.outcome(12, 10000, 1000, 1000);  // 10% within one step
  d.quantile(13);
  EXPECT_DOUBLE_EQ(d.headroom_share(), 0.75) << "at once, however recent the take-back";
  EXPECT_DOUBLE_EQ(d.wait_share(), 0);
}

TEST(dip_quantile, stays_within_its_bounds_and_needs_enough_outcomes) {
  dip_quantile low(0.006, 0.01);
  for (double t = 0; t < 20; t += 2) {
    low.outcome(t, 200, 100);
    low.quantile(t + 2);
  }
  EXPECT_DOUBLE_EQ(low.quantile(30), dip_quantile::min_quantile);
  dip_quantile high(0.3, 0.01);
  for (double t = 0; t < 40; t += 2) {
    high.outcome(t, 200, 0);
    high.quantile(t + 2);
  }
  EXPECT_DOUBLE_EQ(high.quantile(50), dip_quantile::max_quantile);
  dip_quantile little(0.05, 0.01);
  little.outcome(0, 50, 50);
  EXPECT_DOUBLE_EQ(little.quantile(2), 0.05) << "50 outcomes: too few to judge";
  little.outcome(3, 80, 0);
  EXPECT_LT(little.quantile(4), 0.05) << "50x0.85+80 weighed, 42.5 missed";
  // A zero quantile (uploads at the estimate itself) or target stays where it is.
  dip_quantile off(0, 0.01), fixed(0.05, 0);
  off.outcome(0, 1000, 1000);
  fixed.outcome(0, 1000, 1000);
  EXPECT_DOUBLE_EQ(off.quantile(10), 0);
  EXPECT_DOUBLE_EQ(fixed.quantile(10), 0.05);
}

}  // namespace
}  // namespace sloserve::sched
