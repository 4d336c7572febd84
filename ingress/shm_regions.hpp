#pragma once
// Shared-memory regions that clients on a node's host register (Triton's system shared-memory
// extension): a client creates a POSIX shared-memory object, registers a window of it under a
// name, and its requests name the region, an offset and a size instead of carrying a tensor's
// bytes; an output may be written into a region the same way. Off unless
// runtime.client_shared_memory is set, as Triton's --allow-client-shm.
//
// A region belongs to the client that registered it (its owner: a CurveZMQ key or a bearer token,
// or "" for clients that present neither) and only that owner sees, uses or unregisters it. A
// request's view of a region keeps the mapping alive: a region unregistered while a request reads
// it is unmapped once that request is done. Regions whose registering process exited, or whose
// object was unlinked, are forgotten by sweep(). Thread-safe: the ZeroMQ I/O thread and the HTTP
// and gRPC ingresses of a node share one registry.

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "pipelines/bytes.hpp"
#include "pipelines/expected.hpp"
#include "pipelines/tensor.hpp"

namespace sloserve::shm {

using tensor_ref = sloserve::shm_ref;

struct region_status {
  std::string name, key;
  uint64_t offset = 0, byte_size = 0;
};

// Bytes of a region an output is written into; the mapping stays while this is held.
struct window {
  char* data = nullptr;
  uint64_t size = 0;
  std::shared_ptr<const void> keep;
};

// Why a request that names a region is refused on a node with shared memory off.
inline constexpr const char* off_reason = "shared memory is off on this node (runtime.client_shared_memory: false)";

// What a node answers Triton's CUDA shared-memory calls.
inline constexpr const char* cuda_unavailable =
    "CUDA shared memory is unavailable on this node: sloserve does not map clients' GPU memory "
    "(cudaIpcOpenMemHandle); pass tensors through system shared memory (/v2/systemsharedmemory)";

class registry {
 public:
  // What happened, one call per region or tensor: registered, unregistered, swept (forgotten by
  // sweep()), refused (a call or tensor refused), read, written (tensors through regions).
  using observer = std::function<void(std::string_view what)>;

  // `max_regions`: how many one owner may hold at once. `seen` is told each event.
  registry(bool enabled, int max_regions, observer seen = {});
  ~registry();
  registry(const registry&) = delete;
  registry& operator=(const registry&) = delete;

  bool enabled() const { return enabled_; }

  // Maps bytes [offset, offset + byte_size) of the POSIX shared-memory object `key` ("/name") as
  // region `name` of `owner`. `pid` > 0: the registering process, whose exit forgets it.
  status add(const std::string& owner, const std::string& name, const std::string& key, uint64_t offset,
             uint64_t byte_size, int pid = 0);
  // Forgets `owner`'s region `name`, or all of its regions when `name` is empty.
  status remove(const std::string& owner, const std::string& name);
  // `owner`'s regions, or its region `name` alone (an error when it has none of that name).
  expected<std::vector<region_status>> list(const std::string& owner, const std::string& name) const;

  // The bytes `ref` names, read in place (no copy); they keep the mapping alive.
  expected<bytes> read(const std::string& owner, const tensor_ref& ref) const;
  // Tensor `name` of `type` and `shape` whose bytes are those `ref` names, read in place; why not
  // when the region does not hold them or they are not the shape's size.
  expected<tensor> read_tensor(const std::string& owner, std::string name, dtype type, std::vector<int64_t> shape,
                               const tensor_ref& ref) const;
  // The bytes `ref` names, to write an output into.
  expected<window> write(const std::string& owner, const tensor_ref& ref) const;

  // Forgets regions whose registering process has exited or whose object was unlinked; how many.
  size_t sweep();
  size_t size() const;

  // Runs sweep() every `period_ms` on a thread of its own until the registry is destroyed.
  void sweep_every(int period_ms);

 private:
  struct mapping;
  struct entry {
    std::string key;
    uint64_t offset = 0, byte_size = 0;
    int pid = 0;
    std::shared_ptr<const mapping> map;
  };
  expected<std::shared_ptr<const mapping>> find(const std::string& owner, const tensor_ref& ref, bool writing) const;

  bool enabled_;
  int max_regions_;
  mutable std::mutex mu_;
  std::map<std::pair<std::string, std::string>, entry> regions_;  // (owner, name)
  observer seen_;
  std::thread sweeper_;
  std::condition_variable stop_cv_;
  bool stopping_ = false;  // under mu_
};

// Whose regions a client sees: its CurveZMQ public key's (Z85), its bearer token's, or, for a
// client that presents neither (empty), every such client's.
std::string owner_of_key(std::string_view z85_key);
std::string owner_of_token(std::string_view token);

// Checks a region's name: 1 to 256 printable characters, no '/'.
status check_region_name(const std::string& name);

}  // namespace sloserve::shm
