// LibTorch executors (kind cpu, and cuda with a CUDA-enabled LibTorch): TorchScript modules,
// batches stacked into one tensor, forward in inference mode, outputs split per request.
// The only translation unit that includes torch headers: keep it that way (build time).

#include <ATen/Parallel.h>
#include <c10/core/InferenceMode.h>
#include <torch/cuda.h>
#include <torch/script.h>

#include <chrono>
#include <cstring>
#include <map>
#include <mutex>

#include "gpu/executor.hpp"

namespace sloserve {
namespace {

c10::ScalarType scalar_of(dtype t) {
  switch (t) {
    case dtype::float32: return torch::kFloat32;
    case dtype::float16: return torch::kFloat16;
    case dtype::int64: return torch::kInt64;
    case dtype::int32: return torch::kInt32;
    case dtype::uint8: return torch::kUInt8;
  }
  return torch::kFloat32;
}

std::optional<dtype> dtype_of(c10::ScalarType s) {
  switch (s) {
    case torch::kFloat32: return dtype::float32;
    case torch::kFloat16: return dtype::float16;
    case torch::kInt64: return dtype::int64;
    case torch::kInt32: return dtype::int32;
    case torch::kUInt8: return dtype::uint8;
    default: return std::nullopt;
  }
}

// at::set_num_threads in LibTorch 1.13 sizes the process-wide intra-op pool (OpenMP here), so
// two cpu devices of one node share it: the last setting applied wins. Each device applies its
// own count right before each of its batches, under this lock, so a batch runs with the count of
// the device that runs it.
std::mutex intra_op_mutex;

class torch_executor final : public device_executor {
 public:
  torch_executor(torch::Device device, int threads) : device_(device), threads_(threads) {}

  std::string_view kind() const override { return device_.is_cuda() ? "cuda" : "cpu"; }

  void set_threads(int threads) override { threads_ = std::max(1, threads); }

  double memory_mb(const std::string& model) const override {
    auto it = loaded_.find(model);
    return it == loaded_.end() ? 0 : it->second.memory_mb;
  }

  std::string load(const model_spec& m) override {
    if (loaded_.count(m.name)) return {};
    if (m.path.empty()) return "model '" + m.name + "' has no TorchScript path (models[].path)";
    entry e;
    try {
      e.module = torch::jit::load(m.path, device_);
      e.module.eval();
      size_t bytes = 0;
      for (const auto& p : e.module.parameters()) bytes += p.numel() * p.element_size();
      for (const auto& b : e.module.buffers()) bytes += b.numel() * b.element_size();
      e.memory_mb = bytes / (1024.0 * 1024.0);
    } catch (const std::exception& ex) {
      return "cannot load model '" + m.name + "' from " + m.path + ": " + first_line(ex.what());
    }
    loaded_.emplace(m.name, std::move(e));
    // Warm up: the first forward pays for allocation and JIT; do not let a request pay it.
    std::vector<tensor> zeros{make_tensor(m.input, 0)};
    std::vector<const std::vector<tensor>*> one{&zeros};
    auto out = execute(m, one);
    if (!out.error.empty()) {
      loaded_.erase(m.name);
      return "model '" + m.name + "' failed its warm-up batch: " + out.error;
    }
    return {};
  }

  batch_outcome execute(const model_spec& m, const std::vector<const std::vector<tensor>*>& inputs) override {
    batch_outcome out;
    auto it = loaded_.find(m.name);
    if (it == loaded_.end()) {
      if (auto err = load(m); !err.empty()) {
        out.error = err;
        return out;
      }
      it = loaded_.find(m.name);
    }
    const auto b = static_cast<int64_t>(inputs.size());
    std::vector<int64_t> shape{b};
    shape.insert(shape.end(), m.input.shape.begin(), m.input.shape.end());
    auto row_bytes = m.input.byte_size().value_or(0);
    try {
      auto batch = torch::empty(shape, torch::TensorOptions().dtype(scalar_of(m.input.type)));
      auto* dst = static_cast<char*>(batch.data_ptr());
      for (int64_t i = 0; i < b; ++i) std::memcpy(dst + i * row_bytes, (*inputs[i])[0].data.data(), row_bytes);
      torch::Tensor result;
      {
        std::lock_guard<std::mutex> lock(intra_op_mutex);
        if (at::get_num_threads() != threads_) at::set_num_threads(threads_);
        c10::InferenceMode guard;
        auto v = it->second.module.forward({batch.to(device_)});
        if (v.isTuple()) v = v.toTuple()->elements().at(0);
        result = v.toTensor().to(torch::kCPU).contiguous();
      }
      if (result.dim() < 1 || result.size(0) != b) {
        out.error = "model '" + m.name + "' returned " + std::to_string(result.dim() ? result.size(0) : 0) +
                    " rows for a batch of " + std::to_string(b);
        return out;
      }
      auto t = dtype_of(result.scalar_type());
      std::vector<int64_t> row_shape(result.sizes().begin() + 1, result.sizes().end());
      if (!t || *t != m.output.type || row_shape != m.output.shape) {
        tensor_spec got{t.value_or(dtype::float32), row_shape};
        out.error = "model '" + m.name + "' produced " + (t ? got.to_string() : std::string("an unsupported dtype")) +
                    " per request, not the declared output " + m.output.to_string();
        return out;
      }
      auto out_bytes = m.output.byte_size().value_or(0);
      auto* src = static_cast<const char*>(result.data_ptr());
      out.outputs.reserve(inputs.size());
      for (int64_t i = 0; i < b; ++i) {
        tensor o;
        o.name = "output";
        o.type = m.output.type;
        o.shape = m.output.shape;
        o.data.assign(src + i * out_bytes, out_bytes);
        out.outputs.push_back({std::move(o)});
      }
    } catch (const std::exception& ex) {
      out.error = "model '" + m.name + "' failed: " + first_line(ex.what());
    }
    return out;
  }

 private:
  struct entry {
    torch::jit::Module module;
    double memory_mb = 0;
  };

  static std::string first_line(const char* what) {
    std::string s(what);
    auto nl = s.find('\n');
    return nl == std::string::npos ? s : s.substr(0, nl);
  }

  torch::Device device_;
  int threads_;
  std::map<std::string, entry> loaded_;
};

}  // namespace

std::unique_ptr<device_executor> make_torch_executor(std::string_view kind, int threads, std::string& error) {
  if (kind == "cuda") {
    if (!torch::cuda::is_available()) {
      error = "device kind 'cuda': this LibTorch has no CUDA or the machine has no GPU";
      return nullptr;
    }
    return std::make_unique<torch_executor>(torch::Device(torch::kCUDA, 0), threads);
  }
  return std::make_unique<torch_executor>(torch::Device(torch::kCPU), threads);
}

}  // namespace sloserve
