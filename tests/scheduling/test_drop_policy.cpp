#include <gtest/gtest.h>

#include "scheduling/session_queue.hpp"

namespace sloserve::sched {
namespace {

using std::chrono::milliseconds;

// l(b) = 10 + 2b ms.
nanos lat(int b) {
  return milliseconds(10 + 2 * b);
}

struct queue_fixture : ::testing::Test {
  time_point t0{};  // the injected clock: every time is relative to t0
  session_queue<int> q;
  std::vector<session_queue<int>::entry> batch, dropped;

  void push_ms(std::initializer_list<int> deadlines_ms) {
    int id = 0;
    for (auto d : deadlines_ms) q.push(t0 + milliseconds(d), id++);
  }
  std::vector<int> ids(const std::vector<session_queue<int>::entry>& v) {
    std::vector<int> out;
    for (auto& e : v) out.push_back(e.item);
    return out;
  }
};

TEST_F(queue_fixture, keeps_deadline_order) {
  q.push(t0 + milliseconds(50), 1);
  q.push(t0 + milliseconds(20), 2);
  q.push(t0 + milliseconds(80), 3);
  q.push(t0 + milliseconds(20), 4);
  EXPECT_EQ(q.front_deadline(), t0 + milliseconds(20));
  sliding_window_policy p;
  q.form_batch(p, t0, 4, lat, batch, dropped);
  EXPECT_EQ(ids(batch), (std::vector<int>{2, 4, 1, 3}));
}

TEST_F(queue_fixture, sliding_window_drops_until_a_full_window_fits) {
  // Target 3: l(3) = 16 ms. Deadlines 5, 12, 17, 30, 40: the window starting at 5 or 12 misses;
  // the one starting at 17 fits.
  push_ms({5, 12, 17, 30, 40});
  sliding_window_policy p;
  q.form_batch(p, t0, 3, lat, batch, dropped);
  EXPECT_EQ(ids(dropped), (std::vector<int>{0, 1}));
  EXPECT_EQ(ids(batch), (std::vector<int>{2, 3, 4}));
  EXPECT_TRUE(q.empty());
}

TEST_F(queue_fixture, sliding_window_costs_a_partial_batch_at_its_own_size) {
  push_ms({13});  // alone: l(1) = 12 ms fits
  sliding_window_policy p;
  q.form_batch(p, t0, 8, lat, batch, dropped);
  EXPECT_TRUE(dropped.empty());
  EXPECT_EQ(batch.size(), 1u);
}

TEST_F(queue_fixture, earliest_first_shrinks_the_batch_to_the_oldest_deadline) {
  // Oldest deadline 15 ms allows only b = 2 (l = 14); sliding window would drop it instead.
  push_ms({15, 100, 100, 100});
  earliest_first_policy ef;
  q.form_batch(ef, t0, 4, lat, batch, dropped);
  EXPECT_TRUE(dropped.empty());
  EXPECT_EQ(ids(batch), (std::vector<int>{0, 1}));

  session_queue<int> q2;
  for (int i = 0; i < 4; ++i) q2.push(t0 + milliseconds(i == 0 ? 15 : 100), i);
  std::vector<session_queue<int>::entry> b2, d2;
  sliding_window_policy sw;
  q2.form_batch(sw, t0, 4, lat, b2, d2);
  EXPECT_EQ(ids(d2), std::vector<int>{0});
  EXPECT_EQ(ids(b2), (std::vector<int>{1, 2, 3}));
}

TEST_F(queue_fixture, earliest_first_drops_only_the_hopeless) {
  push_ms({11, 13});  // l(1) = 12: the first cannot make it even alone
  earliest_first_policy ef;
  q.form_batch(ef, t0, 4, lat, batch, dropped);
  EXPECT_EQ(ids(dropped), std::vector<int>{0});
  EXPECT_EQ(ids(batch), std::vector<int>{1});
}

TEST_F(queue_fixture, maximal_window_skips_ahead_for_a_bigger_batch) {
  // From the first request only b = 1 fits (deadline 13); skipping it allows 4 (l(4) = 18).
  push_ms({13, 40, 40, 40, 40});
  maximal_window_policy mw;
  q.form_batch(mw, t0, 4, lat, batch, dropped);
  EXPECT_EQ(ids(dropped), std::vector<int>{0});
  EXPECT_EQ(ids(batch), (std::vector<int>{1, 2, 3, 4}));
}

TEST_F(queue_fixture, the_clock_decides_what_is_dropped) {
  push_ms({30, 30});
  sliding_window_policy p;
  q.form_batch(p, t0 + milliseconds(15), 2, lat, batch, dropped);  // 15 + 14 <= 30
  EXPECT_EQ(batch.size(), 2u);
  batch.clear();
  push_ms({30, 30});
  q.form_batch(p, t0 + milliseconds(17), 2, lat, batch, dropped);  // 17 + 14 > 30, and alone 17 + 12 <= 30
  EXPECT_EQ(dropped.size(), 1u);
  EXPECT_EQ(batch.size(), 1u);
}

TEST(drop_policy, every_name_of_the_knob_makes_the_policy_of_that_name) {
  for (auto& [kind, name] : knob<drop_policy_kind>::names) EXPECT_EQ(make_drop_policy(kind)->name(), name);
  EXPECT_EQ(parse_knob<drop_policy_kind>("lifo"), std::nullopt);
}

// A session that collects its batch (Piccolo's whole batches): it starts at once with the batch
// queued; else when the most urgent can wait no longer (its deadline less l(b)), when the oldest
// has waited half again the planned fill time, or a tenth of it after the last arrival.
TEST_F(queue_fixture, a_collecting_session_starts_with_its_batch_or_when_waiting_would_cost_it) {
  push_ms({500, 600});
  auto now = t0 + milliseconds(10);
  EXPECT_EQ(q.start_at(now, 0, lat(4)), now) << "not collecting";
  EXPECT_EQ(q.start_at(now, 2, lat(2)), now) << "the batch is there";
  EXPECT_EQ(q.start_at(now, 4, lat(4)), t0 + milliseconds(500 - 18)) << "the deadline less l(4)";
  auto fill = milliseconds(100);
  EXPECT_EQ(q.start_at(now, 4, lat(4), t0, t0 + milliseconds(5), fill), t0 + milliseconds(15))
      << "a tenth of the fill time after the last arrival";
  EXPECT_EQ(q.start_at(now, 4, lat(4), t0, t0 + milliseconds(140), fill), t0 + milliseconds(150))
      << "half again the fill time after the oldest came";
  EXPECT_EQ(q.start_at(t0 + milliseconds(900), 4, lat(4)), t0 + milliseconds(900)) << "never before now";
}

// Padding gives way to work: beyond `keep` queued, dummies go, most urgent first.
TEST_F(queue_fixture, padding_beyond_a_batch_gives_way_to_work) {
  push_ms({10, 20, 30, 40, 50});  // items 0..4; odd ones are padding
  std::vector<session_queue<int>::entry> removed;
  q.shed_padding(
      4, [](int i) { return i % 2 == 1; }, removed);
  EXPECT_EQ(ids(removed), (std::vector<int>{1}));
  EXPECT_EQ(q.size(), 4u);
  q.shed_padding(
      1, [](int i) { return i % 2 == 1; }, removed);
  EXPECT_EQ(ids(removed), (std::vector<int>{1, 3}));
  EXPECT_EQ(q.size(), 3u) << "work stays, whatever `keep` says";
}

}  // namespace
}  // namespace sloserve::sched
