// The HTTP ingress's connection pool: a fixed number of threads, a bounded queue, and an
// enqueue that waits while the queue is full.

#include <gtest/gtest.h>

#include <atomic>
#include <future>

#include "actors/bounded_pool.hpp"

namespace sloserve {
namespace {

using namespace std::chrono_literals;

TEST(bounded_pool, enqueue_waits_while_the_queue_is_full_and_every_task_runs) {
  std::promise<void> release;
  auto held = release.get_future().share();
  std::atomic<int> ran{0};
  bounded_pool pool(1, 1);
  std::promise<void> started;
  pool.enqueue([&] {
    started.set_value();
    held.wait();
    ++ran;
  });
  started.get_future().wait();   // the one thread is busy
  pool.enqueue([&] { ++ran; });  // waits in the queue
  auto third = std::async(std::launch::async, [&] { pool.enqueue([&] { ++ran; }); });
  EXPECT_EQ(third.wait_for(100ms), std::future_status::timeout) << "the queue is full: enqueue must wait";
  EXPECT_EQ(pool.waiting(), 1u);
  release.set_value();
  third.get();
  pool.shutdown();  // runs what is queued first
  EXPECT_EQ(ran, 3);
}

TEST(bounded_pool, shutdown_releases_a_waiting_enqueue_and_runs_what_was_queued) {
  std::promise<void> release, started;
  auto held = release.get_future().share();
  std::atomic<int> ran{0};
  bounded_pool pool(1, 1);
  pool.enqueue([&] {
    started.set_value();
    held.wait();
    ++ran;
  });
  started.get_future().wait();
  pool.enqueue([&] { ++ran; });
  auto blocked = std::async(std::launch::async, [&] { pool.enqueue([&] { ran += 100; }); });
  EXPECT_EQ(blocked.wait_for(50ms), std::future_status::timeout);
  std::thread stopper([&] { pool.shutdown(); });
  blocked.get();  // returns while the thread is still held: its task is dropped
  release.set_value();
  stopper.join();
  EXPECT_EQ(ran, 2);
}

TEST(bounded_pool, try_enqueue_refuses_when_the_queue_is_full_and_after_shutdown) {
  std::promise<void> release, started;
  auto held = release.get_future().share();
  std::atomic<int> ran{0};
  bounded_pool pool(1, 1);
  ASSERT_TRUE(pool.try_enqueue([&] {
    started.set_value();
    held.wait();
    ++ran;
  }));
  started.get_future().wait();
  EXPECT_TRUE(pool.try_enqueue([&] { ++ran; }));
  EXPECT_FALSE(pool.try_enqueue([&] { ran += 100; })) << "the queue holds one already";
  release.set_value();
  pool.shutdown();
  EXPECT_EQ(ran, 2);
  EXPECT_FALSE(pool.try_enqueue([&] { ran += 100; }));
}

}  // namespace
}  // namespace sloserve
