// The load client's emulated uplink: frames cross one after another at each second's rate, reach
// the far end half a round trip later, and a frame given up mid-way frees the link for the
// frames behind it. Times are injected: nothing here waits.

#include <gtest/gtest.h>

#include "loadgen/clients.hpp"
#include "loadgen/uplink.hpp"

namespace sloserve {
namespace {

using clock_t_ = emulated_uplink::clock;

clock_t_::time_point at_ms(clock_t_::time_point t0, double ms) {
  return t0 + std::chrono::duration_cast<clock_t_::duration>(std::chrono::duration<double, std::milli>(ms));
}

double ms_between(clock_t_::time_point a, clock_t_::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

TEST(uplink, a_transfer_spanning_seconds_crosses_each_at_its_rate) {
  std::vector<double> mbps{8, 1, 4};  // 1 MB/s, then 125 kB/s, then 500 kB/s
  auto t0 = clock_t_::time_point{} + std::chrono::hours(1);
  emulated_uplink link(&mbps, t0, 10);
  // 100 kB from 0.95 s: 50 kB by 1 s, 50 kB more at 125 kB/s = 400 ms.
  EXPECT_NEAR(link.transfer_ms(at_ms(t0, 950), 100e3 * 8), 450, 1e-6);
  // 200 kB from 0.9 s: 100 kB by 1 s, and the other 100 kB in 0.8 s of the slow second.
  EXPECT_NEAR(link.transfer_ms(at_ms(t0, 900), 200e3 * 8), 900, 1e-6);
  // Past the trace, its last second holds.
  EXPECT_NEAR(link.transfer_ms(at_ms(t0, 5000), 500e3 * 8), 1000, 1e-6);
  EXPECT_NEAR(link.bits_between(at_ms(t0, 500), at_ms(t0, 1500)), 0.5 * 8e6 + 0.5 * 1e6, 1e-3);
  // A dead second still trickles at 0.05 Mbps.
  std::vector<double> dead{0};
  emulated_uplink still(&dead, t0, 0);
  EXPECT_NEAR(still.mbps_at(t0), 0.05, 1e-12);
  // No trace: unlimited.
  emulated_uplink open(nullptr, t0, 0);
  EXPECT_EQ(open.transfer_ms(t0, 1e9), 0);
}

TEST(uplink, frames_queue_behind_each_other_and_arrive_half_a_round_trip_after_their_last_byte) {
  std::vector<double> mbps{8};  // 1 kB per ms
  auto t0 = clock_t_::time_point{} + std::chrono::hours(1);
  emulated_uplink link(&mbps, t0, 10);
  auto& a = link.send(1, at_ms(t0, 0), 30e3);  // 0-30 ms
  EXPECT_NEAR(ms_between(t0, a.end), 30, 1e-3);
  link.send(2, at_ms(t0, 10), 20e3);  // waits: 30-50 ms
  EXPECT_NEAR(ms_between(t0, link.free_at()), 50, 1e-3);
  EXPECT_NEAR(link.backlog_bytes(at_ms(t0, 20)), 10e3 + 20e3, 1);
  ASSERT_NE(link.crossing(at_ms(t0, 20)), nullptr);
  EXPECT_EQ(link.crossing(at_ms(t0, 20))->id, 1u);
  EXPECT_EQ(link.crossing(at_ms(t0, 40))->id, 2u);
  EXPECT_EQ(link.crossing(at_ms(t0, 60)), nullptr);
  EXPECT_NEAR(ms_between(t0, *link.next_arrival()), 35, 1e-3);
  EXPECT_TRUE(link.arrived(at_ms(t0, 34)).empty());
  auto first = link.arrived(at_ms(t0, 36));
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0].id, 1u);
  EXPECT_NEAR(ms_between(t0, first[0].start), 0, 1e-3);
  // What the client timed: each transfer once, in order, whether it has arrived or not.
  auto timed = link.ended(at_ms(t0, 60));
  ASSERT_EQ(timed.size(), 2u);
  EXPECT_EQ(timed[0].id, 1u);
  EXPECT_NEAR(ms_between(timed[1].start, timed[1].end), 20, 1e-3);
  EXPECT_TRUE(link.ended(at_ms(t0, 70)).empty());
  auto second = link.arrived(at_ms(t0, 60));
  ASSERT_EQ(second.size(), 1u);
  EXPECT_FALSE(link.next_arrival());
  EXPECT_TRUE(link.ended(at_ms(t0, 80)).empty());
}

TEST(uplink, a_frame_given_up_frees_the_link_for_the_frames_behind_it) {
  std::vector<double> mbps{8, 0.8};  // 1 kB/ms, then 0.1 kB/ms
  auto t0 = clock_t_::time_point{} + std::chrono::hours(1);
  emulated_uplink link(&mbps, t0, 0);
  link.send(1, at_ms(t0, 990), 60e3);  // 10 kB by 1 s, then 50 kB at 0.1 kB/ms: ends at 1.5 s
  link.send(2, at_ms(t0, 1000), 5e3);  // behind it: 1.5-1.55 s
  EXPECT_NEAR(ms_between(t0, link.free_at()), 1550, 1e-3);
  EXPECT_FALSE(link.cancel(at_ms(t0, 980)));  // nothing crossing yet
  ASSERT_TRUE(link.cancel(at_ms(t0, 1100)));
  // Frame 2 moves up: 1.1-1.15 s.
  auto* next = link.crossing(at_ms(t0, 1120));
  ASSERT_NE(next, nullptr);
  EXPECT_EQ(next->id, 2u);
  EXPECT_NEAR(ms_between(t0, link.free_at()), 1150, 1e-3);
  // The client timed what crossed of frame 1: 20 kB in 110 ms, then frame 2.
  auto timed = link.ended(at_ms(t0, 1200));
  ASSERT_EQ(timed.size(), 2u);
  EXPECT_EQ(timed[0].id, 1u);
  EXPECT_NEAR(timed[0].bytes, 20e3, 1);
  EXPECT_NEAR(ms_between(timed[0].start, timed[0].end), 110, 1e-3);
  EXPECT_EQ(timed[1].id, 2u);
  // Only frame 2 reaches the far end.
  auto got = link.arrived(at_ms(t0, 1200));
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].id, 2u);
}

// A Jellyfish client sends the size advised, or what its uplink carries when less, and no size
// it knows would cross too late to be answered within its SLO.
TEST(clients, a_jellyfish_client_sends_the_size_advised_or_what_crosses_in_time) {
  std::vector<size_t> bytes{5000, 20000, 50000};  // at 8 Mbps (1 kB/ms): 5, 20 and 50 ms
  EXPECT_EQ(jellyfish_size(bytes, 1, 2, 8, 10, 100), 1u) << "advised";
  EXPECT_EQ(jellyfish_size(bytes, 2, 1, 8, 10, 100), 1u) << "carried";
  EXPECT_EQ(jellyfish_size(bytes, 3, 2, 8, 10, 100), 2u) << "no advice yet: what it carries";
  EXPECT_EQ(jellyfish_size(bytes, 2, 2, 8, 60, 100), 1u) << "50 + 60 ms: too late";
  EXPECT_EQ(jellyfish_size(bytes, 2, 2, 8, 96, 100), 0u) << "nothing crosses in time: the smallest";
  EXPECT_EQ(jellyfish_size(bytes, 2, 2, -1, 96, 100), 2u) << "an uplink not known yet: as advised";
  EXPECT_EQ(jellyfish_size({}, 2, 2, 8, 10, 100), 0u);
}

// An SLO-aware client (DA_slo) sends the largest size its uplink carries that uploads within its
// share of the SLO.
TEST(clients, an_slo_aware_client_sends_the_largest_size_that_uploads_within_its_share) {
  std::vector<size_t> bytes{5000, 20000, 50000};  // at 8 Mbps (1 kB/ms): 5, 20 and 50 ms
  EXPECT_EQ(within_share(bytes, 2, 8, 50), 2u) << "50 ms of upload within 50";
  EXPECT_EQ(within_share(bytes, 2, 8, 49), 1u);
  EXPECT_EQ(within_share(bytes, 1, 8, 100), 1u) << "no larger than the link carries at its frame rate";
  EXPECT_EQ(within_share(bytes, 2, 8, 1), 0u) << "nothing within the share: the smallest";
  EXPECT_EQ(within_share(bytes, 2, -1, 100), 0u) << "an uplink not known yet: the smallest";
}

}  // namespace
}  // namespace sloserve
