// Two transports on loopback: a control frame sent after a backlog of data frames overtakes it.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "messages/transport.hpp"

namespace sloserve {
namespace {

transport_options loopback() {
  transport_options o;
  o.bind = "tcp://127.0.0.1:0";
  return o;
}

TEST(transport, a_control_frame_does_not_wait_behind_data_queued_for_a_slow_receiver) {
  std::mutex mu;
  std::vector<char> order;  // the first byte of each frame, as the receiver took them
  std::atomic<bool> control_seen{false};
  transport receiver(loopback(), [&](std::string_view, const std::vector<bytes>& parts, std::string_view) {
    auto& frame = parts[0];
    std::lock_guard<std::mutex> lock(mu);
    order.push_back(frame.data()[0]);
    if (frame.data()[0] == 'c') control_seen = true;
    // A receiver that takes 2 ms a data frame: what the sender queues waits.
    if (frame.data()[0] == 'd') std::this_thread::sleep_for(std::chrono::milliseconds(2));
  });
  transport sender(loopback(), [](std::string_view, const std::vector<bytes>&, std::string_view) {});
  ASSERT_TRUE(receiver.start());
  ASSERT_TRUE(sender.start());
  sender.connect_peer("r", receiver.endpoint());
  // Both connections up: one frame on each, waited for.
  sender.send_to_peer("r", std::string("d"));
  sender.send_to_peer("r", std::string("c"), true);
  for (int i = 0; i < 500 && !control_seen; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_TRUE(control_seen);
  control_seen = false;
  const int backlog = 300;
  for (int i = 0; i < backlog; ++i) sender.send_to_peer("r", std::string(64 * 1024, 'd'));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // the receiver is behind by now
  sender.send_to_peer("r", std::string("c"), true);
  for (int i = 0; i < 1000; ++i) {
    {
      std::lock_guard<std::mutex> lock(mu);
      if (order.size() >= backlog + 3u) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  sender.stop();
  receiver.stop();
  std::lock_guard<std::mutex> lock(mu);
  ASSERT_EQ(order.size(), backlog + 3u);
  // The second control frame, among the 300 data frames queued before it: taken in turn with
  // them, well before the last (on one connection it would come after all of them).
  size_t at = 0;
  for (size_t i = 2; i < order.size(); ++i)
    if (order[i] == 'c') at = i - 2;
  EXPECT_GT(at, 0u);
  EXPECT_LT(at, backlog / 2u) << "the control frame came after " << at << " of the " << backlog << " data frames";
}

// A multipart message arrives as its parts, in order, each its own ZeroMQ message: a part of
// 64 KiB and more is read into a buffer of its own, word-aligned (what the codec reads in place).
TEST(transport, a_multipart_message_arrives_whole_as_its_parts) {
  std::mutex mu;
  std::vector<std::vector<std::string>> got;
  std::vector<bool> aligned;
  transport receiver(loopback(), [&](std::string_view, const std::vector<bytes>& parts, std::string_view) {
    std::lock_guard<std::mutex> lock(mu);
    got.emplace_back();
    for (auto& p : parts) {
      got.back().push_back(p.str());
      aligned.push_back(reinterpret_cast<uintptr_t>(p.data()) % 8 == 0 || p.size() < 64 * 1024);
    }
  });
  transport sender(loopback(), [](std::string_view, const std::vector<bytes>&, std::string_view) {});
  ASSERT_TRUE(receiver.start());
  ASSERT_TRUE(sender.start());
  sender.connect_peer("r", receiver.endpoint());
  std::string big(600 * 1024, 'b');
  sender.send_to_peer("r", std::vector<bytes>{std::string("head"), big, std::string("tail")});
  sender.send_to_peer("r", std::string("one"));
  for (int i = 0; i < 500; ++i) {
    {
      std::lock_guard<std::mutex> lock(mu);
      if (got.size() >= 2) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  sender.stop();
  receiver.stop();
  std::lock_guard<std::mutex> lock(mu);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0], (std::vector<std::string>{"head", big, "tail"}));
  EXPECT_EQ(got[1], (std::vector<std::string>{"one"}));
  for (bool a : aligned) EXPECT_TRUE(a);
}

}  // namespace
}  // namespace sloserve
