#include "actors/response_cache.hpp"

#include <cstring>

namespace sloserve {

namespace {

// Two independent 64-bit hashes of a byte stream, eight bytes at a time: FNV-1a-like over words
// with two multipliers, each word mixed first (a bit anywhere moves every bit of both).
struct hasher {
  uint64_t a = 0xcbf29ce484222325ULL, b = 0x84222325cbf29ce4ULL;

  static uint64_t mix(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    return x ^ (x >> 33);
  }
  void word(uint64_t w) {
    auto m = mix(w);
    a = (a ^ m) * 0x100000001b3ULL;
    b = (b ^ (m + 0x9e3779b97f4a7c15ULL)) * 0x880355f21e6d1965ULL;
  }
  void add(std::string_view s) {
    word(s.size());
    size_t i = 0;
    for (; i + 8 <= s.size(); i += 8) {
      uint64_t w;
      std::memcpy(&w, s.data() + i, 8);
      word(w);
    }
    uint64_t tail = 0;
    std::memcpy(&tail, s.data() + i, s.size() - i);
    word(tail);
  }
  cache_key done() const { return {mix(a), mix(b ^ a)}; }
};

}  // namespace

cache_key response_cache::key_of(std::string_view what, const std::vector<tensor>& inputs) const {
  hasher h;
  h.word(generation_);
  h.add(what);
  h.word(inputs.size());
  for (auto& t : inputs) {
    h.add(t.name);
    h.word(static_cast<uint64_t>(t.type));
    h.word(t.shape.size());
    for (auto d : t.shape) h.word(static_cast<uint64_t>(d));
    h.add(t.data.view());
  }
  return h.done();
}

uint64_t response_cache::charge_of(const std::vector<tensor>& outputs) {
  uint64_t n = 128;  // the entry, its list node and its index slot
  for (auto& t : outputs) n += 64 + t.name.size() + 8 * t.shape.size() + t.data.size();
  return n;
}

std::optional<std::vector<tensor>> response_cache::find(const cache_key& key) {
  auto it = index_.find(key);
  if (it == index_.end()) {
    ++counts_.misses;
    return std::nullopt;
  }
  ++counts_.hits;
  lru_.splice(lru_.begin(), lru_, it->second);
  return it->second->outputs;
}

response_cache::kept response_cache::insert(const cache_key& key, const std::vector<tensor>& outputs) {
  if (capacity_ == 0) return kept::off;
  if (index_.count(key)) return kept::already;
  auto charge = charge_of(outputs);
  if (charge > capacity_) {
    ++counts_.too_large;
    return kept::too_large;
  }
  evict_to(capacity_ - charge);
  entry e{key, {}, charge};
  // A copy of its own: outputs may be views of a larger message that the cache must not hold.
  for (auto& t : outputs) {
    auto& c = e.outputs.emplace_back(tensor{t.name, t.type, t.shape, {}});
    c.data = sloserve::bytes(std::string(t.data.view()));
  }
  lru_.push_front(std::move(e));
  index_.emplace(key, lru_.begin());
  bytes_ += charge;
  ++counts_.insertions;
  return kept::inserted;
}

void response_cache::evict_to(uint64_t limit) {
  while (bytes_ > limit && !lru_.empty()) {
    auto& last = lru_.back();
    bytes_ -= last.charge;
    index_.erase(last.key);
    lru_.pop_back();
    ++counts_.evictions;
  }
}

void response_cache::resize(uint64_t capacity_bytes) {
  capacity_ = capacity_bytes;
  evict_to(capacity_);
}

void response_cache::clear() {
  ++generation_;
  lru_.clear();
  index_.clear();
  bytes_ = 0;
}

}  // namespace sloserve
