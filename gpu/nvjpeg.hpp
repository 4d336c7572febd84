#pragma once
// JPEG decoding on the GPU with NVIDIA's nvJPEG, loaded at run time: sloserve links no nvJPEG
// (Debian's CUDA toolkit has none), and a machine with a GPU usually has it in its CUDA toolkit or
// in the libraries its PyTorch ships (site-packages/nvidia/nvjpeg/lib). A cuda device decodes a
// batch's JPEGs in one batched call, on the GPU's hardware JPEG decoder where it has one (A100,
// H100, H200) and else on its CUDA cores, straight into device memory; the resize and the
// normalization follow there (gpu/preprocess.cu). Where nvJPEG is absent, the device says so once
// and decodes on CPU threads (gpu/image.hpp).

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "pipelines/expected.hpp"

namespace sloserve {

// One JPEG of a batch: its bytes (host memory) and its size from its header (jpeg_size).
struct jpeg_view {
  const uint8_t* data = nullptr;
  size_t size = 0;
  int h = 0, w = 0;
};

class gpu_jpeg_decoder {
 public:
  virtual ~gpu_jpeg_decoder() = default;
  // The library and the decoder it uses ("nvJPEG 12.3 from /usr/local/cuda/lib64/libnvjpeg.so.12,
  // hardware decoder"), for the device's one line about it.
  virtual const std::string& describe() const = 0;
  // Decodes `jpegs` into `out[i]`, device buffers of h x w x 3 bytes (RGB interleaved), on CUDA
  // stream `stream` (a cudaStream_t; null: the default stream), in one batched call; the work is
  // queued on the stream when it returns. An error says what failed (then the caller decodes the
  // batch on the CPU).
  virtual status decode(const std::vector<jpeg_view>& jpegs, const std::vector<uint8_t*>& out, void* stream) = 0;
};

// A decoder for the current CUDA device, or why there is none: no libnvjpeg where it looked (the
// error lists the places), or the library refused to start (its status). `SLOSERVE_NVJPEG`, a
// library path, is tried first.
expected<std::unique_ptr<gpu_jpeg_decoder>> open_gpu_jpeg_decoder();

// The places open_gpu_jpeg_decoder looks for the library, in order.
std::vector<std::string> nvjpeg_candidates();

}  // namespace sloserve
