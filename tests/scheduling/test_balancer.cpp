#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <string>

#include "scheduling/balancer.hpp"

namespace sloserve::sched {
namespace {

TEST(balancer, p2c_prefers_the_shorter_queue_and_skips_dead_backends) {
  p2c_balancer b;
  std::mt19937_64 rng(1);
  std::vector<backend_load> two{{10, 1, true}, {0, 1, true}};
  for (int i = 0; i < 50; ++i) EXPECT_EQ(b.pick(two, rng), 1u);
  std::vector<backend_load> dead{{0, 1, false}, {5, 1, true}, {0, 1, false}};
  for (int i = 0; i < 20; ++i) EXPECT_EQ(b.pick(dead, rng), 1u);
  std::vector<backend_load> none{{0, 1, false}};
  EXPECT_FALSE(b.pick(none, rng));
}

TEST(balancer, p2c_spreads_equal_load) {
  p2c_balancer b;
  std::mt19937_64 rng(2);
  std::vector<backend_load> v(4);
  std::vector<int> hits(4);
  for (int i = 0; i < 4000; ++i) {
    auto k = *b.pick(v, rng);
    ++hits[k];
    ++v[k].outstanding;  // nothing completes: p2c must keep queues even
  }
  for (auto& x : v) EXPECT_NEAR(x.outstanding, 1000, 20);
}

// A route of thousands of instances (a large fleet) is not scanned per pick: draws find planned
// ones; where almost none is planned, a scan still finds them, and spreads among them.
TEST(balancer, p2c_picks_among_the_few_planned_of_a_large_route) {
  p2c_balancer b;
  std::mt19937_64 rng(5);
  std::vector<backend_load> v(5000, backend_load{0, 1, false});
  for (auto i : {7, 1234, 4999}) v[static_cast<size_t>(i)].live = true;
  for (int i = 0; i < 3000; ++i) {
    auto k = b.pick(v, rng);
    ASSERT_TRUE(k);
    ASSERT_TRUE(v[*k].live) << *k;
    ++v[*k].outstanding;
  }
  for (auto i : {7, 1234, 4999}) EXPECT_NEAR(v[static_cast<size_t>(i)].outstanding, 1000, 20);
  for (auto i : {7, 1234}) v[static_cast<size_t>(i)].live = false;
  for (int i = 0; i < 10; ++i) EXPECT_EQ(b.pick(v, rng), 4999u) << "the one planned";
  v[4999].live = false;
  EXPECT_FALSE(b.pick(v, rng));
  std::vector<backend_load> all(10000);
  for (int i = 0; i < 40000; ++i) ++all[*b.pick(all, rng)].outstanding;
  // Two choices keep the fullest near the mean of 4 (one random choice: about 13 among 10,000).
  uint32_t fullest = 0;
  for (auto& x : all) fullest = std::max(fullest, x.outstanding);
  EXPECT_LE(fullest, 8u);
}

TEST(balancer, weighted_random_follows_weights) {
  weighted_random_balancer b;
  std::mt19937_64 rng(3);
  std::vector<backend_load> v{{0, 3, true}, {0, 1, true}, {0, 5, false}};
  int first = 0;
  for (int i = 0; i < 8000; ++i) first += *b.pick(v, rng) == 0;
  EXPECT_NEAR(first / 8000.0, 0.75, 0.03);
  for (auto& [kind, name] : knob<balancer_kind>::names) EXPECT_EQ(make_balancer(kind)->name(), name);
  EXPECT_EQ(parse_knob<balancer_kind>("nope"), std::nullopt);
}

// Spares (kept from an earlier plan) take work only when the planned backend picked is busy
// (a batch running and one waiting): then the spare with the most room; with no planned backend
// live, the least busy spare.
TEST(balancer, work_spills_to_spares_only_past_a_busy_planned_backend) {
  EXPECT_EQ(spill_threshold(0, 1), 0u) << "no spill point: never busy";
  EXPECT_EQ(spill_threshold(8, 1), 8u);
  EXPECT_EQ(spill_threshold(8, 3), 3u) << "each of three frontends its share, rounded up";
  EXPECT_EQ(spill_threshold(1, 4), 1u);
  for (auto kind : {balancer_kind::p2c, balancer_kind::weighted_random}) {
    auto b = make_balancer(kind);
    std::mt19937_64 rng(4);
    backend_load planned{0, 1, true, false, 4};
    backend_load spare{0, 1e-3, true, true, 4};
    std::vector<backend_load> v{planned, spare, spare};
    for (int i = 0; i < 4; ++i) {
      auto k = b->route(v, rng);
      ASSERT_TRUE(k);
      EXPECT_EQ(*k, 0u) << b->name() << ": the planned backend has room";
      ++v[*k].outstanding;
    }
    EXPECT_TRUE(v[0].busy());
    v[1].outstanding = 3;
    EXPECT_EQ(b->route(v, rng), 2u) << b->name() << ": the spare with the most room";
    v[2].outstanding = 4;
    EXPECT_EQ(b->route(v, rng), 1u);
    v[1].outstanding = 4;
    EXPECT_EQ(b->route(v, rng), 0u) << b->name() << ": every spare busy too: the planned one queues it";
    v[0].live = false;
    EXPECT_EQ(b->pick(v, rng), std::nullopt) << b->name() << ": pick never names a spare";
    v[2].outstanding = 9;
    EXPECT_EQ(b->route(v, rng), 1u) << b->name() << ": no planned backend live: the least busy spare";
    v[1].live = v[2].live = false;
    EXPECT_EQ(b->route(v, rng), std::nullopt);
  }
}

// Piccolo's throughput-cost dispatch: the table's first (most cost-efficient) machine fills up to
// its spill point before the next takes any; past every spill point, the one with the most room;
// spares only past that; dead and spare backends are never picked.
TEST(balancer, fill_fills_machines_in_table_order_up_to_their_spill_points) {
  fill_balancer b;
  std::mt19937_64 rng(5);
  std::vector<backend_load> v{{0, 1, true, false, 3}, {0, 1, true, false, 6}, {0, 1, true, true, 4}};
  std::vector<size_t> order;
  for (int i = 0; i < 9; ++i) {
    auto k = b.route(v, rng);
    ASSERT_TRUE(k);
    order.push_back(*k);
    ++v[*k].outstanding;
  }
  EXPECT_EQ(order, (std::vector<size_t>{0, 0, 0, 1, 1, 1, 1, 1, 1}));
  EXPECT_EQ(b.route(v, rng), 2u) << "both planned machines busy: the spare";
  v[2].outstanding = 4;
  EXPECT_EQ(b.route(v, rng), 0u) << "the spare busy too: the planned machine with the most room (3/3 vs 6/6: first)";
  v[1].outstanding = 5;
  EXPECT_EQ(b.route(v, rng), 1u) << "a machine with room again takes the next";
  v[0].outstanding = 0;
  EXPECT_EQ(b.route(v, rng), 0u) << "the cheaper machine, free again, first";
  v[0].live = false;
  EXPECT_EQ(b.route(v, rng), 1u);
  std::vector<backend_load> unbounded{{7, 1, true, false, 0}, {0, 1, true, false, 0}};
  EXPECT_EQ(b.pick(unbounded, rng), 0u) << "no spill point: the first takes everything";
  std::vector<backend_load> none{{0, 1, false}, {0, 1, true, true, 2}};
  EXPECT_EQ(b.pick(none, rng), std::nullopt);
}

// Piccolo's Figure 3: A and B at batch 6 (2.0 s), C at batch 2 (1.0 s), 8 requests/s: requests
// 1-6 to A, 7-12 to B, 13-16 to C (two batches), and again.
TEST(balancer, whole_batches_go_in_turn_as_piccolos_figure_3) {
  fill_balancer b;
  std::mt19937_64 rng(1);
  std::vector<backend_load> v(3);
  for (auto& l : v) l.spill_at = 1;  // spill points play no part in the turn
  v[0].batch = v[1].batch = 6, v[0].weight = v[1].weight = 3;
  v[2].batch = 2, v[2].weight = 2;
  dispatch_state s;
  std::string order;
  for (int i = 0; i < 32; ++i) {
    auto k = b.dispatch(v, s, rng);
    ASSERT_TRUE(k);
    order += static_cast<char>('A' + *k);
  }
  EXPECT_EQ(order, "AAAAAABBBBBBCCCCAAAAAABBBBBBCCCC");
  // A machine out of the turn rejoins at the current virtual time: no run of batches to catch up.
  v[1].live = false;
  order.clear();
  for (int i = 0; i < 16; ++i) order += static_cast<char>('A' + *b.dispatch(v, s, rng));
  v[1].live = true;
  for (int i = 0; i < 16; ++i) order += static_cast<char>('A' + *b.dispatch(v, s, rng));
  EXPECT_EQ(order.find("BBBBBBBBBBBB"), std::string::npos) << order;
  // Without batches the turn is fill's order.
  for (auto& l : v) l.batch = 0, l.outstanding = 0;
  EXPECT_EQ(b.dispatch(v, s, rng), 0u);
}

// Theorem 1 served: modules planned as Piccolo's generator plans them (whole machines of one
// random configuration (b, d) at their full rate b / d, one machine of another for the residual
// at part of its rate), the stream at their sum W with constant gaps, each machine collecting
// its whole batch before it runs it. Written apart from the dispatcher: when each batch fills, when its
// machine is free, and each request's latency. No request waits longer than its machine's
// d_i + b_i / w_i, w_i the rate not taken by the machines before it in the table (the paper's
// remaining workload), but for a few sets a few percent over; one request at a time instead
// (p2c, each machine running what it has) breaks the bound on ten times as many.
TEST(balancer, whole_batches_in_turn_keep_theorem_1s_bound) {
  std::mt19937_64 rng(7);
  int over_whole = 0, over_single = 0, instances = 200;
  double worst = 0;
  for (int n = 0; n < instances; ++n) {
    // As Piccolo's generator plans a module: whole machines of the configuration of most
    // throughput (one price), then one machine of another for the residual, at part of its rate.
    size_t machines = 2 + rng() % 4;
    std::vector<uint32_t> batch;
    std::vector<double> d, rate;
    auto b1 = static_cast<uint32_t>(2 + rng() % 30), b2 = static_cast<uint32_t>(1 + rng() % 30);
    double d1 = 0.05 + 0.001 * static_cast<double>(rng() % 400), d2 = 0.05 + 0.001 * static_cast<double>(rng() % 400);
    if (b2 / d2 > b1 / d1) std::swap(b1, b2), std::swap(d1, d2);  // the whole machines' is the most efficient
    for (size_t i = 0; i < machines; ++i) {
      bool last = i + 1 == machines;
      batch.push_back(last ? b2 : b1);
      d.push_back(last ? d2 : d1);
      rate.push_back(batch.back() / d.back() * (last ? 0.2 + 0.8 * static_cast<double>(rng() % 1000) / 1000 : 1));
    }
    double W = 0;
    for (double r : rate) W += r;
    double bound = 0, before = 0;
    for (size_t i = 0; i < machines; ++i) bound = std::max(bound, d[i] + batch[i] / (W - before)), before += rate[i];
    for (bool whole : {true, false}) {
      fill_balancer b;
      std::vector<backend_load> v(machines);
      for (size_t i = 0; i < machines; ++i)
        v[i].weight = rate[i], v[i].batch = whole ? batch[i] : 0, v[i].duration_s = d[i];
      dispatch_state s;
      std::vector<double> free(machines, 0);
      std::vector<std::vector<double>> queued(machines);
      double latest = 0;
      for (int r = 0; r < 4000; ++r) {
        double t = r / W;
        // Machines with no whole batches run what they have whenever free (at most their batch).
        if (!whole)
          for (size_t i = 0; i < machines; ++i)
            while (!queued[i].empty() && free[i] <= t) {
              double start = std::max(free[i], queued[i].front());
              size_t take = std::min<size_t>(batch[i], queued[i].size());
              for (size_t k = 0; k < take; ++k) latest = std::max(latest, start + d[i] - queued[i][k]);
              queued[i].erase(queued[i].begin(), queued[i].begin() + static_cast<long>(take));
              free[i] = start + d[i];
            }
        s.clock = t;
        size_t k = whole ? *b.dispatch(v, s, rng) : *p2c_balancer{}.pick(v, rng);
        if (!whole) ++v[k].outstanding;
        queued[k].push_back(t);
        if (whole && queued[k].size() == batch[k]) {
          double start = std::max(free[k], t);
          for (double a : queued[k]) latest = std::max(latest, start + d[k] - a);
          queued[k].clear();
          free[k] = start + d[k];
        }
        if (!whole)  // p2c's outstanding: what waits on the machine
          for (size_t i = 0; i < machines; ++i) v[i].outstanding = static_cast<uint32_t>(queued[i].size());
      }
      if (whole) {
        over_whole += latest > bound + 1e-9;
        worst = std::max(worst, latest / bound);
      } else {
        over_single += latest > bound + 1e-9;
      }
    }
  }
  std::printf(
      "theorem 1 on %d random sets: whole batches in turn over the bound on %d (worst %.4f of it); one at a "
      "time (p2c) over it on %d\n",
      instances, over_whole, worst, over_single);
  // Stride spacing is one batch from exact: a residual machine loaded near its capacity can find
  // its batch full a few ms before it is free (2 of these 200, 2.6% over at worst).
  EXPECT_LE(over_whole, instances / 50);
  EXPECT_LE(worst, 1.05);
  EXPECT_GE(over_single, 10 * std::max(1, over_whole));
}

// Several frontends (Piccolo's central dispatcher): requests come to two frontends in turn. Each
// keeping a turn of its own sends every machine its half of a batch, and the halves fill at
// different times, so that machines wait for the rest; one dispatcher placing both frontends'
// requests in one turn keeps the bound as one frontend does. Devices start a batch once it is
// queued, or once the oldest has waited half again the stream's fill time b / W (their collection
// rule), whichever comes first, when free.
TEST(balancer, one_turn_for_two_frontends_keeps_theorem_1s_bound_and_two_turns_do_not) {
  std::mt19937_64 rng(11);
  int instances = 200, over_central = 0, over_split = 0;
  double worst_central = 0, worst_split = 0;
  for (int n = 0; n < instances; ++n) {
    size_t machines = 2 + rng() % 4;
    auto bb = static_cast<uint32_t>(4 + rng() % 30);
    double dd = 0.05 + 0.001 * static_cast<double>(rng() % 400);
    std::vector<uint32_t> batch(machines, bb);
    std::vector<double> d(machines, dd), rate(machines, bb / dd);
    double W = static_cast<double>(machines) * bb / dd, bound = dd + bb / W;
    for (bool central : {true, false}) {
      fill_balancer b;
      uint32_t owners = central ? 1 : 2;
      std::vector<std::vector<backend_load>> v(owners, std::vector<backend_load>(machines));
      std::vector<dispatch_state> s(owners);
      for (uint32_t o = 0; o < owners; ++o) {
        s[o].frontends = owners;
        for (size_t i = 0; i < machines; ++i)
          v[o][i].weight = rate[i], v[o][i].batch = spill_threshold(batch[i], owners), v[o][i].duration_s = d[i];
      }
      std::vector<double> free(machines, 0);
      std::vector<std::vector<double>> queued(machines);
      double latest = 0;
      auto run_due = [&](double t) {
        for (size_t i = 0; i < machines; ++i)
          while (!queued[i].empty() && free[i] <= t + 1e-9 &&
                 (queued[i].size() >= batch[i] || t - queued[i].front() >= 1.5 * batch[i] / W - 1e-12)) {
            double start = std::max(free[i], t);
            size_t take = std::min<size_t>(batch[i], queued[i].size());
            for (size_t k = 0; k < take; ++k) latest = std::max(latest, start + d[i] - queued[i][k]);
            queued[i].erase(queued[i].begin(), queued[i].begin() + static_cast<long>(take));
            free[i] = start + d[i];
          }
      };
      for (int r = 0; r < 4000; ++r) {
        double t = r / W;
        run_due(t);
        auto o = static_cast<size_t>(central ? 0 : r % 2);  // the frontend it came to
        s[o].clock = t;
        size_t k = *b.dispatch(v[o], s[o], rng);
        queued[k].push_back(t);
        run_due(t);
      }
      (central ? over_central : over_split) += latest > bound + 1e-9;
      (central ? worst_central : worst_split) = std::max(central ? worst_central : worst_split, latest / bound);
    }
  }
  std::printf(
      "theorem 1 with two frontends on %d random sets: one turn over the bound on %d (worst %.4f of it), a turn "
      "per frontend on %d (worst %.4f)\n",
      instances, over_central, worst_central, over_split, worst_split);
  EXPECT_LE(over_central, instances / 50);
  EXPECT_LE(worst_central, 1.05);
  EXPECT_GE(over_split, 10 * std::max(1, over_central));
}

// A batch that fills while its machine still runs the one before: the stream is ahead of the
// machines, so padding waits until a batch fills on a free machine.
TEST(balancer, padding_waits_while_batches_fill_on_busy_machines) {
  fill_balancer b;
  std::mt19937_64 rng(3);
  std::vector<backend_load> v(2);
  for (auto& l : v) l.batch = 2, l.weight = 10;
  dispatch_state s;
  v[0].outstanding = 2;  // machine 0 still runs an earlier batch
  for (int i = 0; i < 2; ++i) {
    ASSERT_EQ(b.dispatch(v, s, rng), 0u);
    ++v[0].outstanding;
  }
  EXPECT_EQ(b.dispatch(v, s, rng), 1u) << "the next batch begins";
  ++v[1].outstanding;
  EXPECT_EQ(b.dispatch_padding(v, s, rng), std::nullopt) << "machine 0's batch filled while it was busy";
  v[0].outstanding = 2;  // the earlier batch is done
  EXPECT_EQ(b.dispatch(v, s, rng), 1u);
  ++v[1].outstanding;
  EXPECT_EQ(b.dispatch(v, s, rng), 0u) << "machine 0's turn again";
  EXPECT_TRUE(b.dispatch_padding(v, s, rng)) << "machine 1's batch filled on a free machine: padding goes again";
  // A new table that keeps the backends at their batches keeps the turn; another batch does not.
  auto same = [](size_t i, size_t j) { return i == j; };
  EXPECT_TRUE(kept_turn(v, v, same));
  auto w = v;
  w[1].batch = 3;
  EXPECT_FALSE(kept_turn(w, v, same));
}

// By the clock: a batch not full when the stream's planned rate would have filled it (b / W from
// its first request) is closed with dummies then, not before its machine is free, and not when the
// stream has paused (no request in the last tenth of that: its device runs what it has).
TEST(balancer, a_batch_not_full_by_its_fill_time_is_closed_with_dummies) {
  fill_balancer b;
  std::mt19937_64 rng(5);
  std::vector<backend_load> v(2);
  for (auto& l : v) l.batch = 4, l.weight = 4, l.duration_s = 2;  // W = 8/s: a batch fills in 0.5 s
  dispatch_state s;
  auto request = [&](double t) {
    s.clock = t;
    auto k = b.dispatch(v, s, rng);
    ++v[*k].outstanding;
    return *k;
  };
  auto close = [&](double t) {
    s.clock = t;
    std::string to;
    for (auto n = b.padding_due(v, s); n > 0; --n) to += std::to_string(*b.dispatch_padding(v, s, rng));
    return to;
  };
  EXPECT_EQ(b.padding_deadline(v, s), std::nullopt) << "no batch is filling";
  for (double t : {0.0, 0.2, 0.48}) EXPECT_EQ(request(t), 0u);
  EXPECT_EQ(b.padding_deadline(v, s), 0.5);
  EXPECT_EQ(close(0.45), "") << "before its fill time";
  EXPECT_EQ(close(0.5), "0") << "one dummy closes it";
  EXPECT_EQ(b.padding_deadline(v, s), std::nullopt);
  // The next batch (backend 1) gets one request, then the stream pauses.
  EXPECT_EQ(request(0.6), 1u);
  EXPECT_EQ(close(1.1), "") << "paused: no dummies";
  for (double t : {1.2, 1.3, 1.4}) request(t);  // backend 1's batch fills with requests
  // Backend 0 runs its batch until 2.5: its next, opened at 1.5, closes then, not at 2.0.
  EXPECT_EQ(request(1.5), 0u);
  for (double t = 1.6; t < 2.45; t += 0.04) s.clock = t, s.last = t;  // requests of other models keep the clock
  EXPECT_NEAR(*b.padding_deadline(v, s), 2.5, 1e-9);
  s.last = 2.0;
  EXPECT_EQ(close(2.02), "") << "its machine is busy";
  s.last = 2.48;
  EXPECT_EQ(close(2.5), "000");
}

}  // namespace
}  // namespace sloserve::sched
