#include <random>

#include "gpu/executor.hpp"

namespace sloserve {
namespace {

class emulated_executor final : public device_executor {
 public:
  explicit emulated_executor(uint64_t seed) : rng_(seed) {}

  std::string_view kind() const override { return "emulated"; }

  batch_outcome execute(const model_spec& m,
                        const std::vector<const std::vector<tensor>*>& inputs) override {
    batch_outcome out;
    auto b = static_cast<int>(inputs.size());
    double ms = m.profile.latency_ms_at(b);
    if (m.jitter > 0) ms *= std::uniform_real_distribution<double>(1 - m.jitter, 1 + m.jitter)(rng_);
    out.busy = std::chrono::nanoseconds(static_cast<int64_t>(ms * 1e6));
    out.outputs.reserve(inputs.size());
    for (auto* in : inputs) {
      auto seed = in->empty() ? 0 : fingerprint(in->front().data);
      out.outputs.push_back({make_tensor(m.output, seed ^ fingerprint(m.name), "output")});
    }
    return out;
  }

 private:
  std::mt19937_64 rng_;
};

}  // namespace

std::unique_ptr<device_executor> make_emulated_executor(uint64_t seed) {
  return std::make_unique<emulated_executor>(seed);
}

#ifdef SLOSERVE_WITH_TORCH
std::unique_ptr<device_executor> make_torch_executor(std::string_view kind, int threads, std::string& error);
bool torch_available() { return true; }
#else
bool torch_available() { return false; }
#endif

std::unique_ptr<device_executor> make_executor(std::string_view kind, uint64_t seed, int threads,
                                               std::string& error) {
  if (kind == "emulated") return make_emulated_executor(seed);
#ifdef SLOSERVE_WITH_TORCH
  if (kind == "cpu" || kind == "cuda") return make_torch_executor(kind, threads, error);
#endif
  error = "device kind '" + std::string(kind) + "' is not built into this sloserve (configure with LibTorch)";
  return nullptr;
}

}  // namespace sloserve
