#pragma once
// Answers (encoded reply frames) that a load connection's threads hand to the lane that reads
// them: the HTTP and gRPC connections turn their protocol's replies into frames and queue them.

#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <string>
#include <vector>

namespace sloserve {

class answer_queue {
 public:
  void push(std::string frame) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      frames_.push_back(std::move(frame));
    }
    cv_.notify_one();
  }

  // Queues `frames` (and empties it) with one wake-up of the reader.
  void push_all(std::vector<std::string>& frames) {
    if (frames.empty()) return;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (auto& f : frames) frames_.push_back(std::move(f));
    }
    frames.clear();
    cv_.notify_one();
  }

  // Waits up to `timeout_ms` for one frame.
  bool pop(std::string& out, int timeout_ms) {
    std::unique_lock<std::mutex> lock(mu_);
    if (!cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms), [&] { return !frames_.empty(); })) return false;
    out = std::move(frames_.front());
    frames_.pop_front();
    return true;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::string> frames_;
};

}  // namespace sloserve
