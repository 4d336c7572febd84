#include <gtest/gtest.h>

#include <random>

#include "scheduling/admission.hpp"
#include "scheduling/pipeline_load.hpp"

namespace sloserve::sched {
namespace {

TEST(fair_shares, water_fills_by_weight_within_a_priority_and_serves_the_higher_first) {
  // One priority, weights 3:1, both offering more than the rate: 3:1.
  auto s = fair_shares(200, {{300, 3, 0}, {300, 1, 0}});
  EXPECT_DOUBLE_EQ(s[0], 150);
  EXPECT_DOUBLE_EQ(s[1], 50);
  // One offers less than its share: it keeps what it offers, the other takes the rest.
  s = fair_shares(200, {{300, 1, 0}, {20, 1, 0}});
  EXPECT_DOUBLE_EQ(s[1], 20);
  EXPECT_DOUBLE_EQ(s[0], 180);
  // The higher priority first, whatever the weights.
  s = fair_shares(200, {{300, 100, 0}, {150, 1, 1}});
  EXPECT_DOUBLE_EQ(s[1], 150);
  EXPECT_DOUBLE_EQ(s[0], 50);
  // Everyone has what it offers: the rest goes to all by weight (none held at its mean).
  s = fair_shares(100, {{30, 1, 0}, {10, 1, 1}, {0, 5, 0}});
  EXPECT_DOUBLE_EQ(s[0], 30 + 30);
  EXPECT_DOUBLE_EQ(s[1], 10 + 30);
  EXPECT_DOUBLE_EQ(s[2], 0);
  // Nobody offers yet: all of it, by weight.
  s = fair_shares(100, {{0, 3, 0}, {0, 1, 0}});
  EXPECT_DOUBLE_EQ(s[0], 75);
  EXPECT_DOUBLE_EQ(s[1], 25);
}

// Poisson arrivals of tenants, `rates` queries/s each, for `seconds`, through `a`: what each had
// admitted (and, into `sent`, sent).
std::vector<int> send(admission& a, std::vector<double> rates, double seconds, std::vector<int>* sent = nullptr,
                      uint64_t seed = 1) {
  double from_s = 0;
  std::mt19937_64 rng(seed);
  std::vector<double> next(rates.size(), from_s);
  std::vector<int> admitted(rates.size(), 0);
  if (sent) sent->assign(rates.size(), 0);
  std::vector<std::exponential_distribution<double>> gaps;
  for (auto r : rates) gaps.emplace_back(r);
  for (size_t k = 0; k < rates.size(); ++k) next[k] += gaps[k](rng);
  for (;;) {
    size_t k = static_cast<size_t>(std::min_element(next.begin(), next.end()) - next.begin());
    if (next[k] >= from_s + seconds) break;
    int tenant = a.tenants() > k ? static_cast<int>(k) : -1;
    if (a.admit(0, "p", tenant, next[k]).result == admission::outcome::admitted) ++admitted[k];
    if (sent) ++(*sent)[k];
    next[k] += gaps[k](rng);
  }
  return admitted;
}

// Two tenants at one priority, weights 3 and 1, each sending 300 queries/s into a quota of 200
// across two frontends that each see half of the 1,200 offered (100 here): over 30 s, their
// shares within 5% of 3:1.
TEST(admission, two_tenants_at_one_priority_get_shares_within_five_percent_of_their_weights) {
  admission a;
  a.configure({{"gold", -1, 3, 0}, {"bronze", -1, 1, 0}}, 1, 2);
  a.set_quota(0, 200, 1200, 0);
  auto got = send(a, {300, 300}, 30);
  double total = got[0] + got[1];
  EXPECT_NEAR(total / 30, 100, 3) << "this frontend's half of the plan's 200/s";
  EXPECT_NEAR(got[0] / total, 0.75, 0.75 * 0.05) << got[0] << " and " << got[1];
  EXPECT_NEAR(got[1] / total, 0.25, 0.25 * 0.05) << got[0] << " and " << got[1];
  // What it says to the one shed.
  a.set_quota(0, 2, 600, 3);
  admission::verdict v;
  for (int i = 0; i < 50 && v.result == admission::outcome::admitted; ++i) v = a.admit(0, "p", 1, 40 + i * 0.001);
  EXPECT_EQ(v.result, admission::outcome::shed);
  EXPECT_NE(v.why.find("shed for fair share: the cluster is short of devices and carries 2.0 of the 600.0 queries/s "
                       "sent to pipeline 'p' (priority 3); tenant 'bronze' (priority 0, weight 1) is given"),
            std::string::npos)
      << v.why;
}

// Of two frontends, one reached by 550 of the 600 queries/s offered and one by 50: each admits
// the plan's 200 in proportion (183 and 17 a second), so that a request stands the same chance at
// either and the quota is used whole (an even split would admit 100 + 50).
TEST(admission, frontends_split_a_quota_by_the_load_that_reaches_each) {
  admission busy, quiet;
  for (auto* a : {&busy, &quiet}) {
    a->configure({}, 1, 2);
    a->set_quota(0, 200, 600, 0);
  }
  auto many = send(busy, {550}, 30), few = send(quiet, {50}, 30, nullptr, 7);
  EXPECT_NEAR((many[0] + few[0]) / 30.0, 200, 10);
  EXPECT_NEAR(many[0] / 30.0, 550.0 / 600 * 200, 8);
  EXPECT_NEAR(few[0] / 30.0, 50.0 / 600 * 200, 3);
}

// A tenant under its share keeps what it sends; the other has the rest. Of two priorities, the
// higher is served first.
TEST(admission, a_tenant_under_its_share_keeps_it_and_the_higher_priority_goes_first) {
  admission a;
  a.configure({{"small", -1, 1, 0}, {"big", -1, 1, 0}}, 1, 1);
  a.set_quota(0, 100, 400, 0);
  std::vector<int> sent;
  auto got = send(a, {20, 300}, 30, &sent);
  EXPECT_GE(got[0], 0.97 * sent[0]) << "the small one keeps nearly all it sends";
  EXPECT_NEAR((got[0] + got[1]) / 30.0, 100, 3);

  admission b;
  b.configure({{"low", -1, 100, 0}, {"high", -1, 1, 1}}, 1, 1);
  b.set_quota(0, 100, 300, 0);
  got = send(b, {150, 80}, 30, &sent);
  EXPECT_GE(got[1], 0.97 * sent[1]) << "the high priority keeps what it sends";
  EXPECT_NEAR(got[0] / 30.0, 20, 3) << "the low one has what is left, what the high one leaves of its margin too";
}

// A tenant's cap holds with or without a quota, each frontend its share; requests of no tenant
// and pipelines without quotas are not shed; without tenants the quota is the pipeline's.
TEST(admission, a_cap_holds_at_each_frontends_share_and_nothing_else_is_shed) {
  admission a;
  a.configure({{"capped", 60, 1, 0}}, 2, 2);  // 30/s here
  int admitted = 0, capped = 0;
  std::string why;
  for (int i = 0; i < 1000; ++i) {  // 100/s for 10 s
    auto v = a.admit(0, "p", 0, i * 0.01);
    if (v.result == admission::outcome::admitted) ++admitted;
    if (v.result == admission::outcome::capped) ++capped, why = v.why;
  }
  EXPECT_NEAR(admitted, 300 + 6, 2);  // the rate, and the first burst of 6
  EXPECT_EQ(admitted + capped, 1000);
  EXPECT_EQ(why, "tenant 'capped' is over its rate cap of 60 queries/s");
  for (int i = 0; i < 1000; ++i) EXPECT_EQ(a.admit(1, "q", -1, 20 + i * 0.001).result, admission::outcome::admitted);

  admission none;
  none.configure({}, 1, 1);
  none.set_quota(0, 50, 100, 0);
  auto got = 0;
  for (int i = 0; i < 1000; ++i) got += none.admit(0, "p", -1, i * 0.01).result == admission::outcome::admitted;
  EXPECT_NEAR(got, 500 + 10, 2);
  none.set_quota(0, -1, 0, 0);
  EXPECT_EQ(none.given(0, -1), -1);
}

TEST(add_shed, counts_what_was_shed_as_offered_and_keeps_the_fanouts) {
  uint64_t queries = 100;
  std::vector<uint64_t> stages{100, 250}, falls{0, 30};
  add_shed(queries, stages, falls, 300);
  EXPECT_EQ(queries, 400u);
  EXPECT_EQ(stages, (std::vector<uint64_t>{400, 1000}));
  EXPECT_EQ(falls, (std::vector<uint64_t>{0, 120}));
  uint64_t none = 0;
  std::vector<uint64_t> empty_stages{0, 0}, empty_falls;
  add_shed(none, empty_stages, empty_falls, 50);
  EXPECT_EQ(none, 50u);
  EXPECT_EQ(empty_stages, (std::vector<uint64_t>{0, 0}));
}

}  // namespace
}  // namespace sloserve::sched

namespace sloserve::sched {
namespace {

// A tenant capped at 60/s across the cluster that sends 100/s here for 10 s: what this frontend
// admits when the other frontends report `elsewhere` (nullopt: none heard, of two frontends).
int admitted_with(std::optional<double> elsewhere) {
  admission a;
  a.configure({{"capped", 60, 1, 0}}, 1, 2);
  if (elsewhere) a.set_elsewhere(std::vector<double>{*elsewhere});
  int admitted = 0;
  for (int i = 0; i < 1000; ++i) admitted += a.admit(0, "p", 0, i * 0.01).result == admission::outcome::admitted;
  EXPECT_NEAR(a.offered_here(0, 10), 100, 5);
  return admitted;
}

// The cap is split by where the tenant sends: all of it here when it sends nowhere else, half
// when it sends as much elsewhere, a quarter when three times as much; an even split until the
// other frontends have said.
TEST(admission, a_cap_is_split_by_where_its_tenant_sends_once_the_other_frontends_say) {
  EXPECT_NEAR(admitted_with(0.0), 600, 30);
  EXPECT_NEAR(admitted_with(100.0), 300, 30);
  EXPECT_NEAR(admitted_with(300.0), 150, 30);
  EXPECT_NEAR(admitted_with(std::nullopt), 300 + 6, 2);
}

}  // namespace
}  // namespace sloserve::sched
