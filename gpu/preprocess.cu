// The CUDA path of gpu/preprocess.hpp: one thread per output element.

#include <cuda_runtime.h>

#include "gpu/preprocess.hpp"
#include "gpu/preprocess_math.hpp"

namespace sloserve {
namespace {

struct spec_args {
  int out_h, out_w;
  float mean[3], stddev[3];
};

__global__ void preprocess_kernel(const uint8_t* hwc, int h, int w, spec_args s, float* chw) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  int total = 3 * s.out_h * s.out_w;
  if (i >= total) return;
  int x = i % s.out_w, y = (i / s.out_w) % s.out_h, c = i / (s.out_w * s.out_h);
  chw[i] = detail::normalize(detail::bilinear(hwc, h, w, s.out_h, s.out_w, c, y, x), s.mean[c], s.stddev[c]);
}

std::string check(cudaError_t e, const char* what) {
  return e == cudaSuccess ? std::string() : std::string(what) + ": " + cudaGetErrorString(e);
}

}  // namespace

bool cuda_preprocess_available() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

std::string preprocess_cuda_device(const uint8_t* d_hwc, int h, int w, const preprocess_spec& s, float* d_chw,
                                   void* stream) {
  spec_args a{s.out_h, s.out_w, {s.mean[0], s.mean[1], s.mean[2]}, {s.stddev[0], s.stddev[1], s.stddev[2]}};
  int total = 3 * s.out_h * s.out_w, threads = 256, blocks = (total + threads - 1) / threads;
  preprocess_kernel<<<blocks, threads, 0, static_cast<cudaStream_t>(stream)>>>(d_hwc, h, w, a, d_chw);
  return check(cudaGetLastError(), "kernel launch");
}

std::string preprocess_cuda(const uint8_t* hwc, int h, int w, const preprocess_spec& s, float* chw) {
  size_t in_bytes = static_cast<size_t>(h) * w * 3, out_n = 3 * static_cast<size_t>(s.out_h) * s.out_w;
  uint8_t* d_in = nullptr;
  float* d_out = nullptr;
  std::string err = check(cudaMalloc(&d_in, in_bytes), "cudaMalloc");
  if (err.empty()) err = check(cudaMalloc(&d_out, out_n * sizeof(float)), "cudaMalloc");
  if (err.empty()) err = check(cudaMemcpy(d_in, hwc, in_bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
  if (err.empty()) err = preprocess_cuda_device(d_in, h, w, s, d_out);
  if (err.empty()) err = check(cudaMemcpy(chw, d_out, out_n * sizeof(float), cudaMemcpyDeviceToHost), "cudaMemcpy");
  cudaFree(d_in);
  cudaFree(d_out);
  return err;
}

}  // namespace sloserve
