#pragma once
// Rate-limited logging of what peers and clients get wrong: per key (a peer and a reason), at most
// one line per `interval_s`, and across all keys one line per `overall_s` with bursts of up to
// `burst` lines; each line says how many like it were held back. Bounded: past `max_keys` keys, the one logged longest
// ago is forgotten (its held-back count goes into the next new key's line). A client that sends garbage from many
// connections cannot fill a disk. Thread-safe; the clock is the caller's (seconds), so that tests inject it.

#include <map>
#include <mutex>
#include <optional>
#include <string>

namespace sloserve {

class log_limiter {
 public:
  explicit log_limiter(double interval_s = 1.0, double overall_s = 1.0, size_t max_keys = 1024, double burst = 10)
      : interval_(interval_s), overall_(overall_s), burst_(burst), tokens_(burst), max_keys_(max_keys) {}

  // Whether to log an event of `key` at `now_s`; when so, how many were held back since the
  // last line of that key (0 for the first).
  std::optional<uint64_t> admit(const std::string& key, double now_s) {
    std::lock_guard lock(mu_);
    auto it = keys_.find(key);
    if (it == keys_.end()) {
      if (keys_.size() >= max_keys_) evict();
      it = keys_.emplace(key, entry{}).first;
      it->second.held = std::exchange(forgotten_, 0);
    }
    auto& e = it->second;
    if (overall_ > 0) tokens_ = std::min(burst_, tokens_ + std::max(0.0, now_s - refilled_s_) / overall_);
    refilled_s_ = std::max(refilled_s_, now_s);
    if ((e.logged && now_s - e.last_s < interval_) || (overall_ > 0 && tokens_ < 1)) {
      ++e.held;
      return std::nullopt;
    }
    if (overall_ > 0) tokens_ -= 1;
    e.last_s = now_s;
    e.logged = true;
    return std::exchange(e.held, 0);
  }

  size_t keys() const {
    std::lock_guard lock(mu_);
    return keys_.size();
  }

 private:
  struct entry {
    double last_s = 0;
    uint64_t held = 0;
    bool logged = false;
  };
  // Forgets the key logged longest ago.
  void evict() {
    auto oldest = keys_.begin();
    for (auto it = keys_.begin(); it != keys_.end(); ++it)
      if (!it->second.logged || (oldest->second.logged && it->second.last_s < oldest->second.last_s)) oldest = it;
    forgotten_ += oldest->second.held;
    keys_.erase(oldest);
  }

  double interval_, overall_, burst_;
  double tokens_;          // lines the overall budget allows now
  double refilled_s_ = 0;  // when tokens_ was last topped up
  size_t max_keys_;
  mutable std::mutex mu_;
  std::map<std::string, entry> keys_;
  uint64_t forgotten_ = 0;
};

}  // namespace sloserve
