#pragma once
// A fixed pool of threads with a bounded queue: enqueue() waits while the queue is full,
// try_enqueue() refuses. The HTTP ingress runs its requests that wait (readiness, statistics,
// metrics) on one, off its connections' threads, and refuses them when it is full.

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace sloserve {

class bounded_pool {
 public:
  bounded_pool(size_t threads, size_t queue_cap) : cap_(queue_cap) {
    for (size_t i = 0; i < threads; ++i) threads_.emplace_back([this] { work(); });
  }
  ~bounded_pool() { shutdown(); }
  bounded_pool(const bounded_pool&) = delete;
  bounded_pool& operator=(const bounded_pool&) = delete;

  // Queues `fn`, waiting while `queue_cap` tasks wait already; after shutdown, drops it.
  void enqueue(std::function<void()> fn) {
    std::unique_lock lock(mu_);
    room_.wait(lock, [&] { return stopping_ || queue_.size() < cap_; });
    if (stopping_) return;
    queue_.push_back(std::move(fn));
    work_.notify_one();
  }

  // Queues `fn` unless `queue_cap` tasks wait already (or the pool is shut down): false then.
  bool try_enqueue(std::function<void()> fn) {
    {
      std::lock_guard lock(mu_);
      if (stopping_ || queue_.size() >= cap_) return false;
      queue_.push_back(std::move(fn));
    }
    work_.notify_one();
    return true;
  }

  // Runs what is queued, then joins the threads.
  void shutdown() {
    {
      std::lock_guard lock(mu_);
      if (stopping_) return;
      stopping_ = true;
    }
    work_.notify_all();
    room_.notify_all();
    for (auto& t : threads_) t.join();
  }

  size_t waiting() const {
    std::lock_guard lock(mu_);
    return queue_.size();
  }

 private:
  void work() {
    while (true) {
      std::function<void()> fn;
      {
        std::unique_lock lock(mu_);
        work_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
        if (queue_.empty()) return;
        fn = std::move(queue_.front());
        queue_.pop_front();
        room_.notify_one();
      }
      fn();
    }
  }

  size_t cap_;
  mutable std::mutex mu_;
  std::condition_variable work_, room_;
  std::deque<std::function<void()>> queue_;
  std::vector<std::thread> threads_;
  bool stopping_ = false;
};

}  // namespace sloserve
