#include "gpu/cuda_ipc.hpp"

#include <dlfcn.h>

#include <cstring>

#include "gpu/cuda_libraries.hpp"

namespace sloserve {
namespace {

// The part of cuda_runtime_api.h that sloserve calls; the header is not needed to build, so its
// types are declared here as the runtime defines them.
using cuda_error = int;  // cudaError_t: 0 is cudaSuccess
struct ipc_handle {      // cudaIpcMemHandle_t
  char reserved[64];
};
constexpr unsigned lazy_peer_access = 1;               // cudaIpcMemLazyEnablePeerAccess
constexpr int host_to_device = 1, device_to_host = 2;  // cudaMemcpyKind

struct cudart_api {
  cuda_error (*device_count)(int*) = nullptr;
  cuda_error (*set_device)(int) = nullptr;
  cuda_error (*open_handle)(void**, ipc_handle, unsigned) = nullptr;
  cuda_error (*close_handle)(void*) = nullptr;
  cuda_error (*memcpy)(void*, const void*, size_t, int) = nullptr;
  const char* (*error_string)(cuda_error) = nullptr;
  cuda_error (*runtime_version)(int*) = nullptr;
};

class cuda_ipc final : public device_memory {
 public:
  // A runtime that cannot serve, and why.
  explicit cuda_ipc(std::string why) : unavailable_(std::move(why)) {}
  cuda_ipc(cudart_api api, const std::string& path) : api_(api) {
    int n = 0;
    if (auto e = api_.device_count(&n); e != 0) {
      unavailable_ = "no CUDA device (" + path + ": cudaGetDeviceCount: " + text(e) + ")";
    } else if (n == 0) {
      unavailable_ = "no CUDA device (" + path + " sees none)";
    } else {
      devices_ = n;
      int version = 0;
      if (api_.runtime_version) api_.runtime_version(&version);
      describe_ = "CUDA runtime " + std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10) +
                  " from " + path + ", " + std::to_string(n) + (n == 1 ? " device" : " devices");
    }
  }
  // The runtime stays loaded: it tears itself down at exit, and unloading it before can crash.
  ~cuda_ipc() override = default;

  const std::string& unavailable() const override { return unavailable_; }
  const std::string& describe() const override { return unavailable_.empty() ? describe_ : unavailable_; }

  expected<void*> open(std::string_view handle, int device) override {
    if (!unavailable_.empty()) return fail(unavailable_);
    if (handle.size() != sizeof(ipc_handle))
      return fail("raw_handle has " + std::to_string(handle.size()) + " bytes; a cudaIpcMemHandle_t has " +
                  std::to_string(sizeof(ipc_handle)));
    if (auto ok = on(device); !ok) return fail(ok.error());
    ipc_handle h;
    std::memcpy(h.reserved, handle.data(), sizeof h.reserved);
    void* mapped = nullptr;
    if (auto e = api_.open_handle(&mapped, h, lazy_peer_access); e != 0)
      return fail("cudaIpcOpenMemHandle on device " + std::to_string(device) + ": " + text(e));
    return mapped;
  }

  void close(void* mapped, int device) override {
    if (on(device)) api_.close_handle(mapped);
  }

  status to_host(char* to, const void* from, size_t n, int device) override {
    return copy(to, from, n, device_to_host, device);
  }
  status to_device(void* to, const char* from, size_t n, int device) override {
    return copy(to, from, n, host_to_device, device);
  }

 private:
  std::string text(cuda_error e) const {
    const char* s = api_.error_string ? api_.error_string(e) : nullptr;
    return (s ? std::string(s) : std::string("error")) + " (" + std::to_string(e) + ")";
  }
  // Makes `device` this thread's current device.
  status on(int device) const {
    if (device < 0 || device >= devices_)
      return fail("device_id " + std::to_string(device) + " is not one of this node's " + std::to_string(devices_) +
                  " CUDA devices");
    if (auto e = api_.set_device(device); e != 0)
      return fail("cudaSetDevice(" + std::to_string(device) + "): " + text(e));
    return {};
  }
  status copy(void* to, const void* from, size_t n, int kind, int device) const {
    if (auto ok = on(device); !ok) return ok;
    if (auto e = api_.memcpy(to, from, n, kind); e != 0) return fail("cudaMemcpy: " + text(e));
    return {};
  }

  cudart_api api_;
  int devices_ = 0;
  std::string unavailable_, describe_;
};

}  // namespace

std::vector<std::string> cudart_candidates() {
  return cuda_library_candidates("libcudart", "SLOSERVE_CUDART", "cuda_runtime", {},
                                 {"libcudart.so.13", "libcudart.so.12", "libcudart.so.11.0", "libcudart.so"});
}

std::shared_ptr<device_memory> open_cuda_ipc() {
  auto found = load_first(cudart_candidates());
  if (!found)
    return std::make_shared<cuda_ipc>("no CUDA runtime found (" + found.error() + "; SLOSERVE_CUDART names one)");
  auto [lib, path] = *found;
  cudart_api api;
  api.device_count = symbol<decltype(api.device_count)>(lib, "cudaGetDeviceCount");
  api.set_device = symbol<decltype(api.set_device)>(lib, "cudaSetDevice");
  api.open_handle = symbol<decltype(api.open_handle)>(lib, "cudaIpcOpenMemHandle");
  api.close_handle = symbol<decltype(api.close_handle)>(lib, "cudaIpcCloseMemHandle");
  api.memcpy = symbol<decltype(api.memcpy)>(lib, "cudaMemcpy");
  api.error_string = symbol<decltype(api.error_string)>(lib, "cudaGetErrorString");
  api.runtime_version = symbol<decltype(api.runtime_version)>(lib, "cudaRuntimeGetVersion");
  if (!api.device_count || !api.set_device || !api.open_handle || !api.close_handle || !api.memcpy) {
    dlclose(lib);  // no runtime was started from it
    return std::make_shared<cuda_ipc>(path + " lacks the CUDA runtime's IPC calls (cudaIpcOpenMemHandle)");
  }
  return std::make_shared<cuda_ipc>(api, path);  // `lib` stays loaded
}

}  // namespace sloserve
