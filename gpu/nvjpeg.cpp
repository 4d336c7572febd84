#include "gpu/nvjpeg.hpp"

#include <dlfcn.h>

#include "gpu/cuda_libraries.hpp"

namespace sloserve {
namespace {

// The part of nvjpeg.h that sloserve calls (CUDA 11 and later; the header is not at hand, so its
// types are declared here as the library defines them).
using nvjpeg_status = int;  // nvjpegStatus_t: 0 is NVJPEG_STATUS_SUCCESS
constexpr nvjpeg_status nvjpeg_success = 0;
struct nvjpeg_handle_s;
struct nvjpeg_state_s;
using nvjpeg_handle = nvjpeg_handle_s*;
using nvjpeg_state = nvjpeg_state_s*;
constexpr int nvjpeg_max_component = 4;
struct nvjpeg_image {  // nvjpegImage_t
  unsigned char* channel[nvjpeg_max_component];
  size_t pitch[nvjpeg_max_component];
};
constexpr int backend_default = 0;   // NVJPEG_BACKEND_DEFAULT
constexpr int backend_hardware = 3;  // NVJPEG_BACKEND_HARDWARE
constexpr int output_rgbi = 5;       // NVJPEG_OUTPUT_RGBI: interleaved RGB in channel[0]

struct nvjpeg_api {
  nvjpeg_status (*create_ex)(int backend, void* dev_allocator, void* pinned_allocator, unsigned flags,
                             nvjpeg_handle* handle) = nullptr;
  nvjpeg_status (*destroy)(nvjpeg_handle) = nullptr;
  nvjpeg_status (*state_create)(nvjpeg_handle, nvjpeg_state*) = nullptr;
  nvjpeg_status (*state_destroy)(nvjpeg_state) = nullptr;
  nvjpeg_status (*batched_initialize)(nvjpeg_handle, nvjpeg_state, int batch, int max_cpu_threads,
                                      int output_format) = nullptr;
  nvjpeg_status (*decode_batched)(nvjpeg_handle, nvjpeg_state, const unsigned char* const* data, const size_t* lengths,
                                  nvjpeg_image* destinations, void* stream) = nullptr;
  nvjpeg_status (*get_property)(int type, int* value) = nullptr;  // libraryPropertyType: 0 major, 1 minor
};

std::string status_text(nvjpeg_status s) {
  static const char* names[] = {"success",
                                "not initialized",
                                "invalid parameter",
                                "bad JPEG",
                                "JPEG not supported",
                                "allocator failure",
                                "execution failed",
                                "arch mismatch",
                                "internal error",
                                "implementation not supported",
                                "incomplete bitstream"};
  if (s >= 0 && s < static_cast<int>(std::size(names))) return names[s];
  return "status " + std::to_string(s);
}

// One handle and its decoding state, with the batch size they were initialized for.
struct engine {
  nvjpeg_handle handle = nullptr;
  nvjpeg_state state = nullptr;
  int batch = 0;
};

class nvjpeg_decoder final : public gpu_jpeg_decoder {
 public:
  nvjpeg_decoder(void* lib, nvjpeg_api api, std::string path) : lib_(lib), api_(api), path_(std::move(path)) {}
  ~nvjpeg_decoder() override {
    for (auto* e : {&hardware_, &hybrid_}) {
      if (e->state) api_.state_destroy(e->state);
      if (e->handle) api_.destroy(e->handle);
    }
    dlclose(lib_);
  }

  // Both engines: the hardware decoder where the GPU has one, the hybrid one always (it takes
  // what the hardware decoder does not: progressive JPEGs, some subsamplings).
  status start() {
    if (auto s = make(backend_default, hybrid_); !s) return s;
    hardware_ok_ = static_cast<bool>(make(backend_hardware, hardware_));
    int major = 0, minor = 0;
    if (api_.get_property) api_.get_property(0, &major), api_.get_property(1, &minor);
    describe_ = "nvJPEG " + std::to_string(major) + "." + std::to_string(minor) + " from " + path_ + ", " +
                (hardware_ok_ ? "the GPU's hardware JPEG decoder" : "decoded on the CUDA cores (no hardware decoder)");
    return {};
  }

  const std::string& describe() const override { return describe_; }

  status decode(const std::vector<jpeg_view>& jpegs, const std::vector<uint8_t*>& out, void* stream) override {
    if (jpegs.size() != out.size())
      return fail("nvJPEG: " + std::to_string(jpegs.size()) + " images, " + std::to_string(out.size()) + " buffers");
    if (jpegs.empty()) return {};
    std::vector<const unsigned char*> data;
    std::vector<size_t> lengths;
    std::vector<nvjpeg_image> images(jpegs.size());
    for (size_t i = 0; i < jpegs.size(); ++i) {
      data.push_back(jpegs[i].data);
      lengths.push_back(jpegs[i].size);
      images[i] = {};
      images[i].channel[0] = out[i];
      images[i].pitch[0] = static_cast<size_t>(jpegs[i].w) * 3;
    }
    auto run = [&](engine& e) -> nvjpeg_status {
      auto n = static_cast<int>(jpegs.size());
      if (e.batch != n) {
        if (auto s = api_.batched_initialize(e.handle, e.state, n, 1, output_rgbi); s != nvjpeg_success) return s;
        e.batch = n;
      }
      return api_.decode_batched(e.handle, e.state, data.data(), lengths.data(), images.data(), stream);
    };
    if (hardware_ok_ && run(hardware_) == nvjpeg_success) return {};
    if (auto s = run(hybrid_); s != nvjpeg_success) return fail("nvJPEG could not decode the batch: " + status_text(s));
    return {};
  }

 private:
  status make(int backend, engine& e) {
    if (auto s = api_.create_ex(backend, nullptr, nullptr, 0, &e.handle); s != nvjpeg_success) {
      e.handle = nullptr;
      return fail("nvjpegCreateEx: " + status_text(s));
    }
    if (auto s = api_.state_create(e.handle, &e.state); s != nvjpeg_success) {
      api_.destroy(e.handle);
      e = {};
      return fail("nvjpegJpegStateCreate: " + status_text(s));
    }
    return {};
  }

  void* lib_;
  nvjpeg_api api_;
  std::string path_;
  std::string describe_;
  engine hardware_, hybrid_;
  bool hardware_ok_ = false;
};

}  // namespace

std::vector<std::string> nvjpeg_candidates() {
  return cuda_library_candidates("libnvjpeg", "SLOSERVE_NVJPEG", "nvjpeg", {"torchvision.libs"},
                                 {"libnvjpeg.so.13", "libnvjpeg.so.12", "libnvjpeg.so.11", "libnvjpeg.so"});
}

expected<std::unique_ptr<gpu_jpeg_decoder>> open_gpu_jpeg_decoder() {
  auto found = load_first(nvjpeg_candidates());
  if (!found) return fail("no nvJPEG library found (" + found.error() + "; SLOSERVE_NVJPEG names one)");
  auto [lib, path] = *found;
  nvjpeg_api api;
  api.create_ex = symbol<decltype(api.create_ex)>(lib, "nvjpegCreateEx");
  api.destroy = symbol<decltype(api.destroy)>(lib, "nvjpegDestroy");
  api.state_create = symbol<decltype(api.state_create)>(lib, "nvjpegJpegStateCreate");
  api.state_destroy = symbol<decltype(api.state_destroy)>(lib, "nvjpegJpegStateDestroy");
  api.batched_initialize = symbol<decltype(api.batched_initialize)>(lib, "nvjpegDecodeBatchedInitialize");
  api.decode_batched = symbol<decltype(api.decode_batched)>(lib, "nvjpegDecodeBatched");
  api.get_property = symbol<decltype(api.get_property)>(lib, "nvjpegGetProperty");
  if (!api.create_ex || !api.destroy || !api.state_create || !api.state_destroy || !api.batched_initialize ||
      !api.decode_batched) {
    dlclose(lib);
    return fail(path + " lacks nvJPEG's batched decoding API (nvJPEG of CUDA 11 or later is needed)");
  }
  auto d = std::make_unique<nvjpeg_decoder>(lib, api, path);
  if (auto s = d->start(); !s) return fail(path + ": " + s.error());
  return std::unique_ptr<gpu_jpeg_decoder>(std::move(d));
}

}  // namespace sloserve
