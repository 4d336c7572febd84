#pragma once
// A frontend's response cache, as Triton's: outputs kept by a hash of what produced them (a
// model's or a pipeline's name and version, and the inputs' names, types, shapes and bytes), so
// that an input seen before is answered without a device. Bounded in bytes, the least recently
// used entry evicted first; an entry larger than the whole cache is not kept. Keys are 128 bits
// (two independent hashes of every byte): two different inputs share one with a chance of about
// 2^-128. Not thread-safe: the frontend actor owns it.

#include <cstdint>
#include <list>
#include <optional>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "pipelines/tensor.hpp"

namespace sloserve {

struct cache_key {
  uint64_t a = 0, b = 0;
  bool operator==(const cache_key&) const = default;
};

class response_cache {
 public:
  explicit response_cache(uint64_t capacity_bytes = 0) : capacity_(capacity_bytes) {}

  // The key of the outputs `what` (a model's or a pipeline's name, with anything else that
  // changes them) makes of `inputs`, in this generation of the cache (clear() starts the next:
  // what a request of the last one would keep is never found).
  cache_key key_of(std::string_view what, const std::vector<tensor>& inputs) const;

  // The outputs kept under `key`, now the most recently used; nothing on a miss.
  std::optional<std::vector<tensor>> find(const cache_key& key);
  enum class kept { inserted, already, too_large, off };
  // Keeps a copy of `outputs` under `key`, evicting the least recently used entries to make room.
  kept insert(const cache_key& key, const std::vector<tensor>& outputs);
  // The bound: entries beyond it are evicted now; 0 turns the cache off (and empties it).
  void resize(uint64_t capacity_bytes);
  void clear();

  struct counts {
    uint64_t hits = 0, misses = 0, insertions = 0, evictions = 0, too_large = 0;
  };
  const counts& counted() const { return counts_; }
  uint64_t bytes() const { return bytes_; }
  size_t entries() const { return index_.size(); }
  uint64_t capacity() const { return capacity_; }

  // What an entry of `outputs` is charged: their bytes, names and shapes, and a fixed overhead.
  static uint64_t charge_of(const std::vector<tensor>& outputs);

 private:
  struct key_hash {
    size_t operator()(const cache_key& k) const { return static_cast<size_t>(k.a ^ (k.b * 0x9e3779b97f4a7c15ULL)); }
  };
  struct entry {
    cache_key key;
    std::vector<tensor> outputs;
    uint64_t charge = 0;
  };
  void evict_to(uint64_t limit);

  uint64_t capacity_ = 0, bytes_ = 0, generation_ = 0;
  std::list<entry> lru_;  // most recently used first
  std::unordered_map<cache_key, std::list<entry>::iterator, key_hash> index_;
  counts counts_;
};

}  // namespace sloserve
