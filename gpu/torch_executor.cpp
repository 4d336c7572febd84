// LibTorch executors (kind cpu, and cuda with a CUDA-enabled LibTorch): TorchScript modules,
// batches stacked into one tensor, forward in inference mode, outputs split per request.
// The only translation unit that includes torch headers: keep it that way (build time).

#include <ATen/Parallel.h>
#include <c10/core/InferenceMode.h>
#include <torch/csrc/jit/runtime/graph_executor.h>
#include <torch/cuda.h>
#include <torch/script.h>
#ifdef SLOSERVE_WITH_CUDA
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

#include <chrono>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "gpu/executor.hpp"
#include "gpu/image.hpp"
#include "gpu/nvjpeg.hpp"

namespace sloserve {
namespace {

// LibTorch 1.13 has no unsigned integers wider than 8 bits (torch_type refuses them at load).
c10::ScalarType scalar_of(dtype t) {
  switch (t) {
    case dtype::float32:
      return torch::kFloat32;
    case dtype::float16:
      return torch::kFloat16;
    case dtype::float64:
      return torch::kFloat64;
    case dtype::int64:
      return torch::kInt64;
    case dtype::int32:
      return torch::kInt32;
    case dtype::int16:
      return torch::kInt16;
    case dtype::int8:
      return torch::kInt8;
    case dtype::uint8:
      return torch::kUInt8;
    case dtype::boolean:
      return torch::kBool;
    case dtype::uint16:
    case dtype::uint32:
    case dtype::uint64:
    case dtype::bytes:
      break;
  }
  return torch::kFloat32;
}

// Empty when LibTorch has `t`; else why model `m` cannot use it.
std::string torch_type(const model_spec& m, const char* what, dtype t) {
  if (t == dtype::bytes)
    return "model '" + m.name + "': its " + what +
           " is bytes, which a TorchScript module cannot take or return as a tensor (serve it on an emulated "
           "device, or declare the tokens the model reads as int64)";
  if (t != dtype::uint16 && t != dtype::uint32 && t != dtype::uint64) return {};
  return "model '" + m.name + "': its " + what + " is " + std::string(dtype_name(t)) +
         ", which LibTorch has no tensors of (declare int32 or int64, or serve it on an emulated device)";
}

std::optional<dtype> dtype_of(c10::ScalarType s) {
  switch (s) {
    case torch::kFloat32:
      return dtype::float32;
    case torch::kFloat16:
      return dtype::float16;
    case torch::kInt64:
      return dtype::int64;
    case torch::kInt32:
      return dtype::int32;
    case torch::kUInt8:
      return dtype::uint8;
    case torch::kFloat64:
      return dtype::float64;
    case torch::kInt16:
      return dtype::int16;
    case torch::kInt8:
      return dtype::int8;
    case torch::kBool:
      return dtype::boolean;
    default:
      return std::nullopt;
  }
}

// at::set_num_threads in LibTorch 1.13 sizes the process-wide intra-op pool (OpenMP here), so
// two cpu devices of one node share it: the last setting applied wins. Each device applies its
// own count right before each of its batches, under this lock, so a batch runs with the count of
// the device that runs it.
std::mutex intra_op_mutex;

// TorchScript's profiling executor re-optimises a graph on the first runs of each new input
// shape, so a batch size a session had not yet used ran several times slower (p99 325 ms against
// a 42 ms median on ResNet-18). Serving wants every batch size equally fast from the first
// request on, and conv-heavy models lose little without those passes on CPU.
void plain_graph_executor() {
  static std::once_flag once;
  std::call_once(once, [] {
    torch::jit::getProfilingMode() = false;
    torch::jit::getExecutorMode() = false;
    torch::jit::setGraphExecutorOptimize(false);
  });
}

class torch_executor final : public device_executor {
 public:
  torch_executor(torch::Device device, int threads) : device_(device), threads_(threads) {
    plain_graph_executor();
    // cuDNN picks its algorithm per shape by heuristics, the same on every load: profiles and
    // serving then time the same kernels (benchmark mode would re-time and may pick others).
    if (device_.is_cuda()) at::globalContext().setBenchmarkCuDNN(false);
#ifdef SLOSERVE_WITH_CUDA
    if (device_.is_cuda()) {
      upload_.emplace(c10::cuda::getStreamFromPool(false, device_.index()));
      compute_.emplace(c10::cuda::getStreamFromPool(false, device_.index()));
    }
#endif
    // JPEGs on a GPU: decoded there when nvJPEG is at hand; said once either way.
    if (device_.is_cuda()) {
      auto d = open_gpu_jpeg_decoder();
      if (d) {
        jpeg_ = std::move(*d);
        notes_.push_back("JPEG inputs are decoded on the GPU by " + jpeg_->describe());
      } else {
        notes_.push_back("JPEG inputs are decoded on up to " + std::to_string(row_threads()) +
                         " CPU threads: " + d.error());
      }
    }
  }

  std::vector<std::string> take_notes() override {
    return std::exchange(notes_, {});
  }

#ifdef SLOSERVE_WITH_CUDA
  // Two batches in flight on a GPU: batch k+1 is stacked into pinned memory and uploaded on the
  // upload stream while batch k computes on the compute stream; its results come back to pinned
  // host memory asynchronously, and finish() waits for them.
  int depth() const override {
    return device_.is_cuda() ? 2 : 1;
  }

  std::optional<batch_outcome> start(const model_spec& m,
                                     const std::vector<const std::vector<tensor>*>& inputs) override {
    if (!device_.is_cuda() || m.is_variant()) return execute(m, inputs);  // prefix families: one at a time
    in_flight f;
    f.model = &m;
    f.rows = static_cast<int64_t>(inputs.size());
    if (auto ready = ensure(m); !ready) {
      f.out.error = ready.error();
    } else {
      try {
        torch::Tensor batch;
        at::cuda::CUDAEvent uploaded;
        {
          c10::cuda::CUDAStreamGuard on_upload(*upload_);
          batch = stack(m, inputs, f.out.failed);
          uploaded.record(*upload_);
        }
        c10::cuda::CUDAStreamGuard on_compute(*compute_);
        uploaded.block(*compute_);
        batch.record_stream(*compute_);  // the allocator must not reuse it before compute is done
        auto result = forward(m, in_precision(m, batch));
        if (result.dim() >= 1 && result.size(0) == padded(f.rows)) result = result.narrow(0, 0, f.rows);
        f.result = in_declared_type(m, result).to(torch::kCPU,
                                                  /*non_blocking=*/true);  // into pinned memory, on the compute stream
        f.done.record(*compute_);
      } catch (const std::exception& ex) {
        f.out.error = "model '" + m.name + "' failed: " + first_line(ex.what());
      }
    }
    flight_.push_back(std::move(f));
    return std::nullopt;
  }

  batch_outcome finish() override {
    if (flight_.empty()) return device_executor::finish();
    auto f = std::move(flight_.front());
    flight_.pop_front();
    if (!f.out.error.empty()) return std::move(f.out);
    try {
      f.done.synchronize();
      if (auto err = split(*f.model, f.result, 0, f.rows, f.out); !err.empty()) f.out.error = err;
    } catch (const std::exception& ex) {
      f.out.error = "model '" + f.model->name + "' failed: " + first_line(ex.what());
    }
    return std::move(f.out);
  }
#endif

  device_kind kind() const override {
    return device_.is_cuda() ? device_kind::cuda : device_kind::cpu;
  }
  bool blocks() const override {
    return true;
  }

  void set_threads(int threads) override {
    threads_ = std::max(1, threads);
  }

  // A variant's own suffix; its prefix is counted once, under the prefix's name.
  double memory_mb(const std::string& model) const override {
    auto it = modules_.find(model);
    if (it == modules_.end()) it = modules_.find("prefix:" + model);
    return it == modules_.end() ? 0 : it->second.memory_mb;
  }

  void unload(const std::string& model) override {
    modules_.erase(model);
    warmed_.erase(model);
  }

  // The new file loads and warms beside the one held, which stays if it fails.
  status reload(const model_spec& m) override {
    auto module = modules_.extract(m.name);
    auto warmed = warmed_.extract(m.name);
    ready_.erase(m.name);
    auto loaded = load(m);
    if (loaded) return {};
    modules_.erase(m.name);
    warmed_.erase(m.name);
    if (!module.empty()) modules_.insert(std::move(module)), ready_.insert(m.name);
    if (!warmed.empty()) warmed_.insert(std::move(warmed));
    return loaded;
  }

  status load(const model_spec& m) override {
    if (ready_.count(m.name)) return {};
    if (m.path.empty()) return fail("model '" + m.name + "' has no TorchScript path (models[].path)");
    for (auto [what, t] : {std::pair{"input", m.input.type}, std::pair{"output", m.output.type}})
      if (auto e = torch_type(m, what, t); !e.empty()) return fail(e);
    if (m.precision == precision::fp16 && !device_.is_cuda())
      return fail("model '" + m.name + "': precision fp16 needs a cuda device (cpu devices run fp32 or bf16)");
    if (m.is_variant()) {
      if (m.prefix_path.empty())
        return fail("prefix model '" + m.prefix + "' of '" + m.name + "' has no TorchScript path");
      if (auto e = load_module(prefix_key(m), m.prefix_path, m.prefix, m.precision); !e.empty()) return fail(e);
    }
    if (m.partitioned() || m.is_fragment()) {
      if (auto e = load_layers(m); !e.empty()) return fail(e);
    } else if (auto e = load_module(m.name, m.path, m.name, m.precision); !e.empty()) {
      return fail(e);
    }
    // Warm up: the first forwards pay for allocation and setup; do not let requests pay them.
    // On cpu, twice at batch 1 and twice at the largest batch the session may run, then two rows
    // timed against one (pads_lone_request) where one takes under 20 ms. On cuda every
    // padded size a request can meet (below), because cuDNN builds a plan per new input shape:
    // 5-100 ms that the first request of each size would otherwise wait.
    ready_.insert(m.name);
    std::vector<tensor> zeros{make_tensor(m.input, 0)};
    int limit = std::max(1, m.batch_limit());
    std::vector<int> sizes{1, limit};
    if (device_.is_cuda()) {
      // A prefix family runs every loaded variant's batch in one pass of its prefix.
      if (m.is_variant()) limit *= ++family_size_[m.prefix];
      sizes.clear();
      for (int b = 1; b < limit; b <<= 1) sizes.push_back(b);
      sizes.push_back(static_cast<int>(padded(limit)));
    }
    auto& warmed = warmed_[m.is_variant() ? prefix_key(m) : m.name];
    // The milliseconds a batch takes, or why it failed.
    auto timed = [&](const std::vector<const std::vector<tensor>*>& batch) -> expected<double> {
      auto t0 = std::chrono::steady_clock::now();
      if (auto error = execute(m, batch).error; !error.empty()) return fail(error);
      return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    };
    double one_ms = 0;  // the faster warm-up run at one row: whether timing more costs little
    for (int b : sizes) {
      if (device_.is_cuda() && !warmed.insert(b).second) continue;
      std::vector<const std::vector<tensor>*> batch(static_cast<size_t>(b), &zeros);
      for (int i = 0; i < 2; ++i) {
        auto ms = timed(batch);
        if (!ms) {
          ready_.erase(m.name);
          return fail("model '" + m.name + "' failed its warm-up batch: " + ms.error());
        }
        if (b == 1) one_ms = i ? std::min(one_ms, *ms) : *ms;
      }
    }
    // Where one row runs fast enough for a few more runs to cost little, two rows timed against
    // one, both warm (the warm-up's first runs may still be optimising the graph). A run that
    // fails here decides nothing.
    if (!device_.is_cuda() && !m.is_variant() && limit >= 2 && one_ms < 20) {
      std::vector<const std::vector<tensor>*> one(1, &zeros), two(2, &zeros);
      (void)timed(two);  // warm at two rows, had the warm-up not run them
      auto one_a = timed(one), one_b = timed(one), two_a = timed(two), two_b = timed(two);
      if (one_a && one_b && two_a && two_b && pads_lone_request(std::min(*one_a, *one_b), std::min(*two_a, *two_b)))
        lone_padded_.insert(m.name);
    }
    return {};
  }

  batch_outcome execute(const model_spec& m, const std::vector<const std::vector<tensor>*>& inputs) override {
    if (m.is_variant()) return execute_family({{&m, inputs}});
    batch_outcome out;
    if (auto ready = ensure(m); !ready) {
      out.error = ready.error();
      return out;
    }
    try {
      auto n = static_cast<int64_t>(inputs.size());
      auto batch = in_precision(m, stack(m, inputs, out.failed));
      if (n == 1 && lone_padded_.count(m.name)) batch = torch::cat({batch, torch::zeros_like(batch)});
      auto rows = batch.size(0);
      auto result = forward(m, batch);
      if (result.dim() >= 1 && result.size(0) == rows) result = result.narrow(0, 0, n);
      if (auto err = split(m, result, 0, n, out); !err.empty()) out.error = err;
    } catch (const std::exception& ex) {
      out.error = "model '" + m.name + "' failed: " + first_line(ex.what());
    }
    return out;
  }

  batch_outcome execute_family(const std::vector<family_group>& groups) override {
    batch_outcome out;
    if (groups.empty()) return out;
    auto& first = *groups.front().model;
    for (auto& g : groups)
      if (auto ready = ensure(*g.model); !ready) {
        out.error = ready.error();
        return out;
      }
    try {
      std::vector<const std::vector<tensor>*> all;
      for (auto& g : groups) all.insert(all.end(), g.inputs.begin(), g.inputs.end());
      // One pass of the shared prefix over every variant's requests.
      auto n = static_cast<int64_t>(all.size());
      auto features =
          forward(modules_.at(prefix_key(first)).module, in_precision(first, stack(first, all, out.failed)));
      if (features.dim() >= 1 && features.size(0) == padded(n)) features = features.narrow(0, 0, n);
      std::vector<int64_t> want{n};
      want.insert(want.end(), first.prefix_output.shape.begin(), first.prefix_output.shape.end());
      if (features.sizes().vec() != want) {
        out.error = "prefix '" + first.prefix + "' produced " + shape_text(features) + ", not the declared " +
                    first.prefix_output.to_string() + " per request";
        return out;
      }
      int64_t offset = 0;
      for (auto& g : groups) {
        auto b = static_cast<int64_t>(g.inputs.size());
        auto result = forward(modules_.at(g.model->name).module, features.narrow(0, offset, b));
        if (auto err = split(*g.model, result, 0, b, out); !err.empty()) {
          out.error = err;
          return out;
        }
        offset += b;
      }
    } catch (const std::exception& ex) {
      out.error = "prefix family '" + first.prefix + "' failed: " + first_line(ex.what());
    }
    return out;
  }

 private:
  struct entry {
    torch::jit::Module module;
    double memory_mb = 0;
    // A partitioned model's file: its top-level children, the model's layers in order.
    std::vector<torch::jit::Module> layers{};
    int from = 0, to = 0;  // the range this model runs of them
  };

  // A partitioned model or one of its fragments: the file is loaded once per path (every range
  // shares it) and must hold exactly as many top-level children as the model declares layers.
  std::string load_layers(const model_spec& m) {
    auto key = "layers:" + m.path;
    if (auto e = load_module(key, m.path, m.name, m.precision); !e.empty()) return e;
    auto& file = modules_.at(key);
    if (file.layers.empty())
      for (const auto& child : file.module.children()) file.layers.push_back(child);
    int from = m.is_fragment() ? m.layer_from : 0;
    int to = m.is_fragment() ? m.layer_to : static_cast<int>(m.layers.size());
    if (m.partitioned() && file.layers.size() != m.layers.size())
      return "model '" + m.name + "' declares " + std::to_string(m.layers.size()) + " layers but " + m.path +
             " holds " + std::to_string(file.layers.size()) + " top-level modules";
    if (to > static_cast<int>(file.layers.size()))
      return "model '" + m.name + "' runs layers up to " + std::to_string(to) + " but " + m.path + " holds " +
             std::to_string(file.layers.size());
    entry e = file;
    e.from = from;
    e.to = to;
    modules_[m.name] = std::move(e);
    return {};
  }

  static std::string prefix_key(const model_spec& m) {
    return "prefix:" + m.prefix;
  }

  static std::string first_line(const char* what) {
    std::string s(what);
    auto nl = s.find('\n');
    return nl == std::string::npos ? s : s.substr(0, nl);
  }

  static std::string shape_text(const torch::Tensor& t) {
    std::string s = "[";
    for (int64_t i = 0; i < t.dim(); ++i) s += (i ? "," : "") + std::to_string(t.size(i));
    return s + "]";
  }

  status ensure(const model_spec& m) {
    return ready_.count(m.name) ? status{} : load(m);
  }

  static c10::ScalarType compute_type(precision p) {
    return p == precision::fp16 ? torch::kFloat16 : p == precision::bf16 ? torch::kBFloat16 : torch::kFloat32;
  }

  // A floating batch in the model's arithmetic (the cast runs where the batch is, on the GPU).
  static torch::Tensor in_precision(const model_spec& m, torch::Tensor batch) {
    if (m.precision == precision::fp32 || !batch.is_floating_point()) return batch;
    return batch.to(compute_type(m.precision));
  }

  // Reduced precision computes in half or bfloat16; the reply keeps the declared dtype (cast
  // where the result is, before it leaves the GPU).
  static torch::Tensor in_declared_type(const model_spec& m, torch::Tensor result) {
    if (m.precision == precision::fp32 || result.scalar_type() != compute_type(m.precision)) return result;
    return result.to(scalar_of(m.output.type));
  }

  std::string load_module(const std::string& key, const std::string& path, const std::string& what, precision p) {
    if (modules_.count(key)) return {};
    entry e;
    try {
      e.module = torch::jit::load(path, device_);
      e.module.eval();
      if (p != precision::fp32) e.module.to(compute_type(p));  // weights converted once, at load
      size_t bytes = 0;
      for (const auto& p : e.module.parameters()) bytes += p.numel() * p.element_size();
      for (const auto& b : e.module.buffers()) bytes += b.numel() * b.element_size();
      e.memory_mb = bytes / (1024.0 * 1024.0);
    } catch (const std::exception& ex) {
      return "cannot load model '" + what + "' from " + path + ": " + first_line(ex.what());
    }
    modules_.emplace(key, std::move(e));
    return {};
  }

  // Rows a batch of n runs with. On cuda, the next power of two: a few input shapes, each
  // warmed up at load, instead of a new cuDNN plan for every batch size. Padding costs little
  // on a GPU, whose time per batch grows slowly with its size; on cpu it would cost in full.
  int64_t padded(int64_t n) const {
    if (!device_.is_cuda()) return n;
    int64_t b = 1;
    while (b < n) b <<= 1;
    return b;
  }

  // The requests' first tensors stacked into one [padded(b), ...] batch on the device: each
  // request's bytes are copied once, from the frame they arrived in into the batch buffer. For a
  // GPU the rows are staged in pinned memory (LibTorch's caching host allocator keeps the block
  // until the copy is done) and uploaded at full PCIe speed; padding rows are zeroed on the GPU,
  // not uploaded. Images (models with preprocess) are decoded, resized and normalized straight
  // into their rows: on the CPU for cpu devices; for cuda, JPEGs are decoded on the CPU and the
  // resize and normalization run on the GPU. The rows are independent: a batch of images, or of
  // more than 4 MB, is stacked on row_threads() threads at once. A request whose image fails gets
  // its reason in `failed`; the others run.
  torch::Tensor stack(const model_spec& m, const std::vector<const std::vector<tensor>*>& inputs,
                      std::vector<std::string>& failed) {
    auto& spec = m.input;
    auto n = static_cast<int64_t>(inputs.size());
    std::vector<int64_t> shape{n};
    shape.insert(shape.end(), spec.shape.begin(), spec.shape.end());
    auto row_bytes = spec.byte_size().value_or(0);
    auto options = torch::TensorOptions().dtype(scalar_of(spec.type));
    auto host = torch::empty(shape, device_.is_cuda() ? options.pinned_memory(true) : options);
    auto* dst = static_cast<char*>(host.data_ptr());
    // Rows a GPU preprocesses: their pixels, decoded here, or their JPEG, decoded there (nvJPEG).
    struct image {
      std::vector<uint8_t> scratch;
      const uint8_t* rgb = nullptr;
      int h = 0, w = 0;
      jpeg_view jpeg;  // data set: decoded on the GPU
    };
    std::vector<image> images(device_.is_cuda() ? inputs.size() : 0);
    std::vector<std::string> why(inputs.size());
    bool any_image = m.preprocess.has_value();
    int threads = any_image || static_cast<size_t>(n) * row_bytes > (4u << 20) ? row_threads() : 1;
    for_each_row(inputs.size(), threads, [&](size_t i) {
      auto& t = (*inputs[i])[0];
      auto form = input_form_of(t, m);
      if (!form) {
        why[i] = form.error();
      } else if (*form == input_form::encoded_image && jpeg_) {
        auto& im = images[i];
        auto* p = reinterpret_cast<const uint8_t*>(t.data.data());
        if (auto ok = jpeg_size(p, t.data.size(), im.h, im.w); !ok)
          why[i] = ok.error();
        else
          im.jpeg = {p, t.data.size(), im.h, im.w};
      } else if (*form != input_form::tensor && device_.is_cuda()) {
        auto& im = images[i];
        if (auto ok = image_pixels(t, *form, im.scratch, im.rgb, im.h, im.w); !ok) {
          why[i] = ok.error();
          im.rgb = nullptr;
        }
      } else if (auto row = input_row(t, *form, m, reinterpret_cast<float*>(dst + i * row_bytes)); !row) {
        why[i] = row.error();
      }
    });
    for (size_t i = 0; i < inputs.size(); ++i)
      if (!why[i].empty()) {
        if (failed.empty()) failed.resize(inputs.size());
        failed[i] = std::move(why[i]);
        std::memset(dst + i * row_bytes, 0, row_bytes);
      }
    if (!device_.is_cuda()) return host;
    shape[0] = padded(n);
    auto batch = torch::empty(shape, options.device(device_));
    batch.narrow(0, 0, n).copy_(host, /*non_blocking=*/true);
    if (shape[0] > n) batch.narrow(0, n, shape[0] - n).zero_();
    decode_on_device(m, images, batch, failed);
    for (size_t i = 0; i < images.size(); ++i)
      if (images[i].rgb) {
        auto& im = images[i];
        if (auto err = preprocess_on_device(m, im.rgb, im.h, im.w, batch[static_cast<int64_t>(i)]); !err.empty()) {
          if (failed.empty()) failed.resize(inputs.size());
          failed[i] = err;
        }
      }
    return batch;
  }

  // The batch's JPEGs (rows with `jpeg` set) decoded by nvJPEG in one call into device buffers,
  // then resized and normalized into their rows there. If nvJPEG fails the batch, its JPEGs are
  // decoded on the CPU instead (said once), and a JPEG that fails there fails its row alone.
  template <class Image>
  void decode_on_device(const model_spec& m, std::vector<Image>& images, torch::Tensor& batch,
                        std::vector<std::string>& failed) {
    std::vector<jpeg_view> jpegs;
    std::vector<size_t> rows;
    for (size_t i = 0; i < images.size(); ++i)
      if (images[i].jpeg.data) jpegs.push_back(images[i].jpeg), rows.push_back(i);
    if (jpegs.empty()) return;
    std::vector<torch::Tensor> pixels;
    std::vector<uint8_t*> out;
    for (auto& j : jpegs) {
      pixels.push_back(torch::empty({j.h, j.w, 3}, torch::TensorOptions().dtype(torch::kUInt8).device(device_)));
      out.push_back(pixels.back().data_ptr<uint8_t>());
    }
    auto decoded = jpeg_->decode(jpegs, out, current_stream());
    auto s = preprocess_of(m);
    for (size_t k = 0; k < rows.size(); ++k) {
      auto i = rows[k];
      auto& im = images[i];
      std::string err;
      if (decoded) {
        err = preprocess_device_pixels(pixels[k], s, batch[static_cast<int64_t>(i)]);
      } else {
        if (!told_jpeg_fallback_) notes_.push_back(decoded.error() + "; this batch's JPEGs decoded on the CPU");
        told_jpeg_fallback_ = true;
        if (auto ok = decode_jpeg(im.jpeg.data, im.jpeg.size, im.scratch, im.h, im.w); !ok)
          err = ok.error();
        else
          im.rgb = im.scratch.data();  // preprocessed with the raw images
      }
      if (!err.empty()) {
        if (failed.empty()) failed.resize(images.size());
        failed[i] = err;
      }
    }
  }

  // The stream a batch's work goes on (a cudaStream_t): the current one.
  void* current_stream() const {
#ifdef SLOSERVE_WITH_CUDA
    return c10::cuda::getCurrentCUDAStream().stream();
#else
    return nullptr;
#endif
  }

  // The threads that stack a batch's rows: a cpu device's own (its intra-op threads, which
  // forward uses next); a cuda device's CPU work is this stacking alone: its threads, or up to 8
  // of the machine's cores when more.
  int row_threads() const {
    if (!device_.is_cuda()) return threads_;
    return std::max(threads_, static_cast<int>(std::min(8u, std::max(1u, std::thread::hardware_concurrency()))));
  }

  // An image row on the GPU: only its uint8 pixels (rgb, h x w x 3, decoded on the CPU when JPEG)
  // travel, then the bilinear resize and the normalization run on the device into `row`
  // (float32[3, H, W]).
  std::string preprocess_on_device(const model_spec& m, const uint8_t* rgb, int h, int w, torch::Tensor row) {
    auto pixels = torch::from_blob(const_cast<uint8_t*>(rgb), {h, w, 3}, torch::kUInt8).to(device_);
    return preprocess_device_pixels(pixels, preprocess_of(m), row);
  }

  // `pixels` (uint8[h, w, 3] on the device) resized and normalized into `row` there.
  std::string preprocess_device_pixels(const torch::Tensor& pixels, const preprocess_spec& s, torch::Tensor row) {
#ifdef SLOSERVE_WITH_CUDA
    return preprocess_cuda_device(pixels.data_ptr<uint8_t>(), static_cast<int>(pixels.size(0)),
                                  static_cast<int>(pixels.size(1)), s, row.data_ptr<float>(),
                                  c10::cuda::getCurrentCUDAStream().stream());
#else
    auto x = pixels.permute({2, 0, 1}).unsqueeze(0).to(torch::kFloat32);
    x = at::upsample_bilinear2d(x, {s.out_h, s.out_w}, /*align_corners=*/false);
    auto mean = torch::tensor({s.mean[0], s.mean[1], s.mean[2]}).view({1, 3, 1, 1}).to(device_);
    auto stddev = torch::tensor({s.stddev[0], s.stddev[1], s.stddev[2]}).view({1, 3, 1, 1}).to(device_);
    row.copy_(((x / 255.0) - mean).div_(stddev)[0]);
    return {};
#endif
  }

  // Model m on a batch: its module, or its range of a partitioned model's layers.
  torch::Tensor forward(const model_spec& m, const torch::Tensor& batch) {
    auto& e = modules_.at(m.name);
    if (e.layers.empty()) return forward(e.module, batch);
    auto x = batch;
    for (int k = e.from; k < e.to; ++k) x = forward(e.layers[static_cast<size_t>(k)], x);
    return x;
  }

  torch::Tensor forward(torch::jit::Module& module, const torch::Tensor& batch) {
    std::lock_guard<std::mutex> lock(intra_op_mutex);
    if (at::get_num_threads() != threads_) at::set_num_threads(threads_);
    c10::InferenceMode guard;
    auto v = module.forward({batch});
    if (v.isTuple()) v = v.toTuple()->elements().at(0);
    return v.toTensor();
  }

  // Appends rows [from, from + b) of `result` to `out` as per-request outputs of `m`.
  std::string split(const model_spec& m, torch::Tensor result, int64_t from, int64_t b, batch_outcome& out) {
    result = in_declared_type(m, result).to(torch::kCPU).contiguous();
    if (result.dim() < 1 || result.size(0) != b)
      return "model '" + m.name + "' returned " + std::to_string(result.dim() ? result.size(0) : 0) +
             " rows for a batch of " + std::to_string(b);
    auto t = dtype_of(result.scalar_type());
    std::vector<int64_t> row_shape(result.sizes().begin() + 1, result.sizes().end());
    if (!t || *t != m.output.type || row_shape != m.output.shape) {
      tensor_spec got{t.value_or(dtype::float32), row_shape};
      return "model '" + m.name + "' produced " + (t ? got.to_string() : std::string("an unsupported dtype")) +
             " per request, not the declared output " + m.output.to_string();
    }
    auto out_bytes = m.output.byte_size().value_or(0);
    auto* src = static_cast<const char*>(result.data_ptr());
    // Each request's output is a view of its row; the host tensor lives while any is held.
    std::shared_ptr<const void> owner = std::make_shared<torch::Tensor>(result);
    for (int64_t i = from; i < from + b; ++i) {
      tensor o;
      o.name = "output";
      o.type = m.output.type;
      o.shape = m.output.shape;
      o.data = bytes(src + i * out_bytes, out_bytes, owner);
      out.outputs.push_back({std::move(o)});
    }
    return {};
  }

#ifdef SLOSERVE_WITH_CUDA
  struct in_flight {
    const model_spec* model = nullptr;
    int64_t rows = 0;
    torch::Tensor result;  // on the host, filled when `done` has passed
    at::cuda::CUDAEvent done;
    batch_outcome out;
  };
  std::optional<c10::cuda::CUDAStream> upload_, compute_;
  std::deque<in_flight> flight_;
#endif
  torch::Device device_;
  int threads_;
  std::unique_ptr<gpu_jpeg_decoder> jpeg_;  // cuda: nvJPEG, when found
  bool told_jpeg_fallback_ = false;
  std::vector<std::string> notes_;               // take_notes()
  std::map<std::string, entry> modules_;         // by model name; prefixes as "prefix:NAME"
  std::set<std::string> ready_;                  // models loaded and warmed up
  std::map<std::string, std::set<int>> warmed_;  // cuda: batch sizes run at load, per module
  std::map<std::string, int> family_size_;       // cuda: variants loaded, per prefix
  std::set<std::string> lone_padded_;            // cpu: models that run a lone request as two rows
};

}  // namespace

expected<std::unique_ptr<device_executor>> make_torch_executor(device_kind kind, int threads) {
  if (kind == device_kind::cuda) {
    if (!torch::cuda::is_available())
      return fail("device kind 'cuda': this LibTorch has no CUDA or the machine has no GPU");
    return std::unique_ptr<device_executor>(std::make_unique<torch_executor>(torch::Device(torch::kCUDA, 0), threads));
  }
  return std::unique_ptr<device_executor>(std::make_unique<torch_executor>(torch::Device(torch::kCPU), threads));
}

}  // namespace sloserve
