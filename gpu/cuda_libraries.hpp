#pragma once
// Where NVIDIA's libraries are looked for when they are loaded at run time (nvJPEG, the CUDA
// runtime): sloserve links none of them, so that one binary serves machines with and without a
// GPU.

#include <dlfcn.h>

#include <string>
#include <vector>

#include "pipelines/expected.hpp"

namespace sloserve {

// A library loaded with dlopen, and the path it was loaded from.
struct loaded_library {
  void* handle = nullptr;
  std::string path;
};
// The first of `candidates` that loads, or "tried A, B, ..." when none does.
expected<loaded_library> load_first(const std::vector<std::string>& candidates);

// A function of `lib` as type F; null where the library has none of that name.
template <class F>
F symbol(void* lib, const char* name) {
  return reinterpret_cast<F>(dlsym(lib, name));
}

// The places to try for the library whose file names start with `stem` ("libnvjpeg"), in order:
// the path in environment variable `env` when set; those already mapped into this process (a
// CUDA-enabled PyTorch's own); beside the PyTorch this process runs, in site-packages/nvidia/
// `wheel`/lib (the wheels' CUDA libraries) and in each of `beside_torch` (site-packages/NAME);
// /usr/local/cuda's; then `sonames`, for the loader's own search.
std::vector<std::string> cuda_library_candidates(const std::string& stem, const char* env, const std::string& wheel,
                                                 const std::vector<std::string>& beside_torch,
                                                 const std::vector<std::string>& sonames);

}  // namespace sloserve
