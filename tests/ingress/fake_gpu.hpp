#pragma once
// A stand-in for the CUDA runtime in tests of clients' GPU memory (pipelines/device_memory.hpp):
// its "device memory" is host buffers.

#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "pipelines/device_memory.hpp"

namespace sloserve {

// Device buffers numbered from 1; a handle is 64 bytes, the buffer's number in the first eight.
class fake_gpu final : public device_memory {
 public:
  std::string why_not;  // non-empty: unavailable
  int devices = 2;
  std::map<uint64_t, std::vector<char>> buffers;
  int opened = 0, closed = 0;
  bool fail_copies = false;

  std::string handle_of(uint64_t buffer) const {
    std::string h(64, '\0');
    std::memcpy(h.data(), &buffer, sizeof buffer);
    return h;
  }
  const std::string& unavailable() const override { return why_not; }
  const std::string& describe() const override { return name_; }
  expected<void*> open(std::string_view handle, int device) override {
    if (handle.size() != 64) return fail("raw_handle has " + std::to_string(handle.size()) + " bytes");
    if (device >= devices) return fail("no device " + std::to_string(device));
    uint64_t n = 0;
    std::memcpy(&n, handle.data(), sizeof n);
    auto it = buffers.find(n);
    if (it == buffers.end()) return fail("cudaIpcOpenMemHandle: invalid argument");
    ++opened;
    return static_cast<void*>(it->second.data());
  }
  void close(void*, int) override { ++closed; }
  status to_host(char* to, const void* from, size_t n, int) override {
    if (fail_copies) return fail("cudaMemcpy: an illegal memory access was encountered");
    std::memcpy(to, from, n);
    return {};
  }
  status to_device(void* to, const char* from, size_t n, int) override {
    if (fail_copies) return fail("cudaMemcpy: an illegal memory access was encountered");
    std::memcpy(to, from, n);
    return {};
  }

 private:
  std::string name_ = "a stand-in GPU";
};

}  // namespace sloserve
