#pragma once
// Clients' GPU memory through the CUDA runtime, loaded at run time as nvJPEG is (gpu/nvjpeg.hpp):
// cudaIpcOpenMemHandle maps a buffer another process exported, cudaMemcpy moves bytes between it
// and the host. Where the runtime or a device is missing, the object says why (unavailable()), and
// the node answers Triton's CUDA shared-memory calls with that reason.

#include <memory>
#include <string>
#include <vector>

#include "pipelines/device_memory.hpp"

namespace sloserve {

// The CUDA runtime of this process (the one a CUDA-enabled PyTorch loaded, else the first found;
// `SLOSERVE_CUDART`, a library path, is tried first), or one whose unavailable() says why not.
std::shared_ptr<device_memory> open_cuda_ipc();

// The places open_cuda_ipc looks for the runtime, in order.
std::vector<std::string> cudart_candidates();

}  // namespace sloserve
