#pragma once
// Clients' GPU memory, as Triton's CUDA shared-memory extension passes it: a client exports a
// device buffer with cudaIpcGetMemHandle, registers the 64-byte handle under a region's name, and
// its requests name the region instead of carrying the bytes. The node opens the handle in its
// own process and copies between that memory and its own. Behind this interface so that only the
// CUDA runtime's implementation (gpu/cuda_ipc.hpp, loaded at run time) knows CUDA, and tests can
// stand in for a GPU.

#include <cstddef>
#include <string>
#include <string_view>

#include "pipelines/expected.hpp"

namespace sloserve {

class device_memory {
 public:
  virtual ~device_memory() = default;
  // Why this node cannot map clients' GPU memory (no CUDA runtime, no device); empty when it can.
  virtual const std::string& unavailable() const = 0;
  // What serves it ("CUDA runtime 12.4 from libcudart.so.12, 2 devices"), for the node's log.
  virtual const std::string& describe() const = 0;
  // Opens the exported buffer `handle` (cudaIpcMemHandle_t's 64 bytes) on device `device`.
  virtual expected<void*> open(std::string_view handle, int device) = 0;
  // Closes what open() returned; the client's buffer stays the client's.
  virtual void close(void* mapped, int device) = 0;
  // Copies `n` bytes from device memory `from` into host memory `to`, and back.
  virtual status to_host(char* to, const void* from, size_t n, int device) = 0;
  virtual status to_device(void* to, const char* from, size_t n, int device) = 0;
};

}  // namespace sloserve
