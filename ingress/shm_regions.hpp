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
//
// A region may also be GPU memory (Triton's CUDA shared-memory extension): the client registers a
// cudaIpcMemHandle_t, the node opens it through its device_memory (pipelines/device_memory.hpp),
// and an input named there is copied from the GPU once, an output copied to it. Regions of both
// kinds share one namespace per owner, and a request names either kind alike.

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
#include "pipelines/device_memory.hpp"
#include "pipelines/expected.hpp"
#include "pipelines/tensor.hpp"

namespace sloserve::shm {

using tensor_ref = sloserve::shm_ref;

// Which extension a region came through.
enum class kind { system, cuda };

struct region_status {
  std::string name, key;  // key: the shared-memory object (system regions)
  uint64_t offset = 0, byte_size = 0;
  int device = -1;  // the GPU (cuda regions)
};

// Bytes of a region an output is written into; the mapping stays while this is held.
struct window {
  char* data = nullptr;  // a system region's bytes, in place; null for a cuda region
  uint64_t size = 0;
  std::shared_ptr<const void> keep;
  std::function<status(const char*, size_t)> to_device;  // a cuda region's copy in

  // Writes `b` (at most `size` bytes) at the window's start.
  status put(std::string_view b) const;
};

// Why a request that names a region is refused on a node with shared memory off.
inline constexpr const char* off_reason = "shared memory is off on this node (runtime.client_shared_memory: false)";

// What a node answers Triton's CUDA shared-memory calls when it cannot map GPU memory: `why`.
std::string cuda_unavailable(const std::string& why);

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
  // Opens the GPU buffer that `raw_handle` (cudaIpcMemHandle_t) exports, of `byte_size` bytes on
  // device `device`, as region `name` of `owner`; refused with cuda_unavailable() as the reason
  // when this node cannot.
  status add_cuda(const std::string& owner, const std::string& name, std::string_view raw_handle, int64_t device,
                  uint64_t byte_size);
  // Forgets `owner`'s region `name` of kind `k`, or all of its regions of that kind when `name`
  // is empty.
  status remove(const std::string& owner, const std::string& name, kind k = kind::system);
  // `owner`'s regions of kind `k`, or its region `name` alone (an error when it has none of that
  // name and kind).
  expected<std::vector<region_status>> list(const std::string& owner, const std::string& name,
                                            kind k = kind::system) const;

  // What maps clients' GPU memory (open_cuda_ipc(), or a test's); none: CUDA regions refused.
  void set_device_memory(std::shared_ptr<device_memory> gpu);
  // Why CUDA regions are refused here (shared memory off, no runtime, no device); empty: served.
  std::string cuda_unavailable() const;

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
    kind k = kind::system;
  };
  expected<std::shared_ptr<const mapping>> find(const std::string& owner, const tensor_ref& ref, bool writing) const;
  // Checks what every region's registration needs: shared memory on, a name, a size, room.
  status admit(const std::string& owner, const std::string& name, uint64_t byte_size) const;
  status insert(const std::string& owner, const std::string& name, entry e);
  error refuse(std::string why) const;  // counted as refused

  bool enabled_;
  int max_regions_;
  mutable std::mutex mu_;
  std::map<std::pair<std::string, std::string>, entry> regions_;  // (owner, name)
  observer seen_;
  std::shared_ptr<device_memory> gpu_;  // set before serving
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
