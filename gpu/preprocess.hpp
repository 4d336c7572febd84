#pragma once
// Input preprocessing: a uint8 HWC image becomes a normalized float32 CHW tensor of the model's
// input size (bilinear resize as torch.nn.functional.interpolate with align_corners=False, then
// (x / 255 - mean) / std). The CPU path and the CUDA kernel share the per-pixel math
// (preprocess_math.hpp), so both give the same results.

#include <cstdint>
#include <string>

namespace sloserve {

struct preprocess_spec {
  int out_h = 224, out_w = 224;
  float mean[3] = {0.485f, 0.456f, 0.406f};
  float stddev[3] = {0.229f, 0.224f, 0.225f};
};

// `hwc`: h x w x 3 bytes; `chw`: 3 x out_h x out_w floats.
void preprocess_cpu(const uint8_t* hwc, int h, int w, const preprocess_spec& s, float* chw);

// The same on the GPU (host buffers in and out). Returns why it cannot, or an empty string.
std::string preprocess_cuda(const uint8_t* hwc, int h, int w, const preprocess_spec& s, float* chw);
bool cuda_preprocess_available();

// The same on buffers already on the GPU (`d_hwc` in, `d_chw` out), launched on `stream` (a
// cudaStream_t; null: the default stream) after what it already holds (the batch upload). What a
// cuda device serves images with.
std::string preprocess_cuda_device(const uint8_t* d_hwc, int h, int w, const preprocess_spec& s, float* d_chw,
                                   void* stream = nullptr);

}  // namespace sloserve
