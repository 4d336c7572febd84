#include <gtest/gtest.h>

#include <random>

#include "actors/parallel_for.hpp"
#include "bench/fleet.hpp"
#include "config/cluster_config.hpp"
#include "scheduling/batch_table.hpp"
#include "scheduling/epoch.hpp"
#include "scheduling/packing.hpp"
#include "scheduling/placement.hpp"
#include "scheduling/query_analyzer.hpp"

namespace sloserve::sched {
namespace {

// Linear, tabular, tabular with steps, and tabular profiles whose latency dips somewhere.
model_spec any_model(std::mt19937_64& rng, int i) {
  std::uniform_real_distribution<double> alpha(0.2, 6), beta(1, 25);
  model_spec m;
  m.name = "m" + std::to_string(i);
  m.max_batch = std::uniform_int_distribution<int>(1, 64)(rng);
  m.memory_mb = std::uniform_real_distribution<double>(100, 3000)(rng);
  int kind = static_cast<int>(rng() % 4);
  if (kind == 0) {
    m.profile.alpha_ms = alpha(rng);
    m.profile.beta_ms = beta(rng);
    return m;
  }
  double a = alpha(rng), b = beta(rng);
  for (int x = 1; x <= 2 * m.max_batch; x *= 2) {
    m.profile.batch.push_back(x);
    double l = a * x + b;
    if (kind == 3 && rng() % 3 == 0) l *= 0.5;  // not monotone
    m.profile.latency_ms.push_back(l);
  }
  m.profile.step = kind == 2;
  return m;
}

TEST(batch_table, agrees_with_the_profile_it_tabulates) {
  std::mt19937_64 rng(31);
  for (int round = 0; round < 300; ++round) {
    auto m = any_model(rng, round);
    batch_table t(m);
    ASSERT_EQ(t.limit(), m.batch_limit());
    ASSERT_EQ(t.plannable(), m.profile.plannable_batches(m.max_batch));
    for (int b = 1; b <= t.limit() + 3; ++b) ASSERT_DOUBLE_EQ(t.ms(b), m.profile.latency_ms_at(b));
    for (double L = 0; L < 12 * m.profile.latency_ms_at(std::max(1, t.limit())); L += 0.37) {
      ASSERT_EQ(t.saturating_batch(L), saturating_batch(m, L)) << "round " << round << " L " << L;
      ASSERT_DOUBLE_EQ(t.throughput(L), max_throughput(m, L));
    }
    for (int b = 1; b <= t.limit(); ++b) {
      double least = 1e300, most = 0;
      for (int x = b; x <= t.limit(); ++x) least = std::min(least, t.ms(x));
      for (int x = 1; x <= b; ++x) most = std::max(most, t.ms(x));
      ASSERT_DOUBLE_EQ(t.least_from(b), least);
      ASSERT_DOUBLE_EQ(t.most_upto(b), most);
      ASSERT_LE(t.least_per_request_ms() * b, t.ms(b) + 1e-9);
    }
  }
}

struct random_sessions {
  std::vector<model_spec> models;
  std::vector<session> ss;
  random_sessions(std::mt19937_64& rng, int n) {
    models.reserve(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) models.push_back(any_model(rng, i));
    for (auto& m : models)
      ss.push_back({&m, std::uniform_real_distribution<double>(2.2, 12)(rng) * m.profile.latency_ms_at(1),
                    std::exp(std::uniform_real_distribution<double>(0, 6)(rng))});
  }
};

// The best fit through the index is the best fit over every device, ties to the lowest index.
TEST(shared_devices, the_indexed_best_fit_is_the_exhaustive_one) {
  std::mt19937_64 rng(5);
  int compared = 0;
  for (int round = 0; round < 150; ++round) {
    random_sessions r(rng, 30);
    batch_tables tables;
    device_caps caps{rng() % 2 ? 0.0 : 5000.0};
    shared_devices shared(r.ss, caps);
    std::vector<residual> rests;
    for (size_t i = 0; i < r.ss.size(); ++i)
      if (auto load = load_of(r.ss, i, tables); load.rest) rests.push_back(*load.rest);
    for (auto& x : rests) {
      std::optional<size_t> best;
      double top = -1;
      for (size_t k = 0; k < shared.all().size(); ++k) {
        if (!shared.all()[k].alive) continue;
        auto merged = shared.join(k, x);
        if (merged && merged->plan.occupancy > top) top = merged->plan.occupancy, best = k;
      }
      auto found = shared.best_fit(x);
      ASSERT_EQ(found.has_value(), best.has_value()) << "round " << round;
      if (best) {
        ASSERT_EQ(*found, *best) << "round " << round;
        ++compared;
        shared.replace(*found, *shared.join(*found, x));
      } else if (auto alone = shared.make({x})) {
        shared.add(*alone);
      }
    }
  }
  EXPECT_GT(compared, 500);
}

// What a packing's shared device holds still makes a device: batches fit the cycle, every SLO
// holds, the duty cycle is one the members accept.
void expect_sound(const squishy_packing& p, const std::vector<session>& ss) {
  for (auto& dev : p.shared().all()) {
    if (!dev.alive) continue;
    double busy = 0;
    for (auto& a : dev.plan.sessions) {
      double l = ss[a.session].model->profile.latency_ms_at(a.batch);
      busy += l;
      EXPECT_LE(l + dev.plan.duty_cycle_ms, ss[a.session].slo_ms + 1e-6);
      EXPECT_GE(a.batch + 1e-6, dev.plan.duty_cycle_ms * a.rate / 1000);
    }
    EXPECT_LE(busy, dev.plan.duty_cycle_ms + 1e-6);
  }
}

TEST(squishy_packing, a_session_taken_out_and_put_back_changes_only_what_it_must) {
  std::mt19937_64 rng(17);
  for (int round = 0; round < 40; ++round) {
    random_sessions r(rng, 80);
    batch_tables tables;
    squishy_packing p(r.ss, {}, tables);
    auto whole = p.make();
    ASSERT_EQ(p.devices(), whole.devices.size());
    ASSERT_EQ(p.infeasible(), whole.infeasible.size());
    double load = p.load();
    // Rejected: everything as it was.
    auto i = rng() % r.ss.size();
    p.begin();
    p.remove(i);
    double rate = r.ss[i].rate;
    r.ss[i].rate *= 3;
    p.add(i);
    expect_sound(p, r.ss);
    p.rollback();
    r.ss[i].rate = rate;
    EXPECT_EQ(p.devices(), whole.devices.size());
    EXPECT_NEAR(p.load(), load, 1e-9);
    // Kept: a new session appended, another gone.
    r.ss.push_back({r.ss[i].model, r.ss[i].slo_ms * 1.5, 40});
    p.begin();
    p.remove(i);
    r.ss[i].rate = 0;
    p.add(i);
    p.add(r.ss.size() - 1);
    p.commit();
    expect_sound(p, r.ss);
    // Taking every session out leaves nothing.
    for (size_t k = 0; k < r.ss.size(); ++k) p.remove(k);
    EXPECT_EQ(p.devices(), 0u);
    EXPECT_EQ(p.infeasible(), 0u);
  }
}

// A fleet of mixed single- and 3-stage pipelines, as the planning benchmark plans it.
struct fleet_epoch : ::testing::Test {
  std::unique_ptr<cluster_config> cfg;
  epoch_input in;
  void SetUp() override {
    bench::fleet_spec spec;
    spec.sessions = 1500;
    auto f = bench::make_fleet(spec);
    auto parsed = parse_cluster_config(f.yaml, "fleet.yaml");
    ASSERT_TRUE(parsed) << parsed.error_text();
    cfg = std::make_unique<cluster_config>(std::move(*parsed.config));
    in = planning_input(*cfg, cfg->models);
    in.rates = f.rates;
  }
};

TEST_F(fleet_epoch, the_neighbour_search_keeps_every_promise_and_never_adds_devices) {
  in.neighbours = 0;
  auto dp = plan_epoch(in);
  in.neighbours = 2;
  auto refined = plan_epoch(in);
  ASSERT_TRUE(dp && refined);
  EXPECT_TRUE(check_plan(refined->placement, refined->sessions, {}).empty());
  EXPECT_TRUE(refined->placement.infeasible.empty());
  EXPECT_LE(refined->placement.devices.size(), dp->placement.devices.size());
  EXPECT_EQ(refined->devices_missing, 0u);
  // Planned again for the same load, it moves a session only to free a device; for a slightly
  // changed load, few sessions move.
  auto again = plan_epoch(in, &*refined);
  ASSERT_TRUE(again);
  EXPECT_LE(again->placement.devices.size(), refined->placement.devices.size());
  EXPECT_LE(again->placement.moved, 4 * (refined->placement.devices.size() - again->placement.devices.size()));
  std::mt19937_64 rng(3);
  for (auto& x : in.rates) x *= std::uniform_real_distribution<double>(0.95, 1.05)(rng);
  auto moved = plan_epoch(in, &*refined);
  ASSERT_TRUE(moved);
  EXPECT_TRUE(check_plan(moved->placement, moved->sessions, {}).empty());
  EXPECT_LT(moved->placement.moved, moved->sessions.size() / 5);
}

TEST_F(fleet_epoch, threads_change_nothing_in_the_plan) {
  auto alone = plan_epoch(in);
  in.parallel = parallel_for;
  auto threaded = plan_epoch(in);
  ASSERT_TRUE(alone && threaded);
  ASSERT_EQ(alone->splits.size(), threaded->splits.size());
  for (size_t i = 0; i < alone->splits.size(); ++i)
    EXPECT_EQ(alone->splits[i].budget_ms, threaded->splits[i].budget_ms) << i;
  EXPECT_EQ(alone->placement.devices.size(), threaded->placement.devices.size());
}

}  // namespace
}  // namespace sloserve::sched
