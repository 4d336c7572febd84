#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <random>

#include "gpu/executor.hpp"

namespace sloserve {

batch_outcome device_executor::execute_family(const std::vector<family_group>& groups) {
  batch_outcome all;
  for (auto& g : groups) {
    auto one = execute(*g.model, g.inputs);
    if (!one.error.empty()) return one;
    all.busy += one.busy;
    for (auto& o : one.outputs) all.outputs.push_back(std::move(o));
  }
  return all;
}

namespace {

class emulated_executor final : public device_executor {
 public:
  emulated_executor(uint64_t seed, int threads, std::string type, double share)
      : rng_(seed), threads_(std::max(1, threads)), type_(std::move(type)), share_(share) {
    // SLOSERVE_EMULATED_SLOWDOWN=AFTER_S:FACTOR: from AFTER_S seconds after it starts, every batch
    // takes FACTOR times what the profile says (a device that degrades: throttling, a noisy
    // neighbour), while latency_ms still answers the profile's time.
    if (auto* v = std::getenv("SLOSERVE_EMULATED_SLOWDOWN"); v && *v)
      if (auto slow = parse_slowdown(v)) {
        slow_from_ =
            std::chrono::steady_clock::now() + std::chrono::milliseconds(static_cast<int64_t>(slow->first * 1e3));
        slow_factor_ = slow->second;
      }
  }
  void set_threads(int threads) override { threads_ = std::max(1, threads); }

  device_kind kind() const override { return device_kind::emulated; }
  // With `cores:`, l(b, c) at the device's current cores; otherwise the profile of its type's l(b);
  // on a fractional instance, slowed by the model's rule for its share.
  double latency_ms(const model_spec& m, int b) const override {
    return (m.cores ? m.cores->at(b, threads_) : m.profile_for(type_).latency_ms_at(b)) * m.share_slowdown(share_);
  }
  double load_delay_ms(const model_spec& m) const override { return std::max(0.0, m.load_ms); }

  batch_outcome execute(const model_spec& m, const std::vector<const std::vector<tensor>*>& inputs) override {
    batch_outcome out;
    auto b = static_cast<int>(inputs.size());
    double ms = latency_ms(m, b);
    ms *= run_factor(m);
    ms *= slowdown();
    out.busy = std::chrono::nanoseconds(static_cast<int64_t>(ms * 1e6));
    out.outputs.reserve(inputs.size());
    for (auto* in : inputs) out.outputs.push_back({output_for(m, *in)});
    return out;
  }

  // The prefix once over every group's requests, then each suffix on its slice; outputs equal
  // what each variant gives alone.
  batch_outcome execute_family(const std::vector<family_group>& groups) override {
    batch_outcome out;
    if (groups.empty()) return out;
    int total = 0;
    double ms = 0;
    for (auto& g : groups) {
      int b = static_cast<int>(g.inputs.size());
      total += b;
      ms += g.model->suffix_ms_at(b);
      for (auto* in : g.inputs) out.outputs.push_back({output_for(*g.model, *in)});
    }
    ms += groups.front().model->prefix_profile.latency_ms_at(total);
    ms *= run_factor(*groups.front().model);
    ms *= slowdown();
    out.busy = std::chrono::nanoseconds(static_cast<int64_t>(ms * 1e6));
    return out;
  }

 private:
  static tensor output_for(const model_spec& m, const std::vector<tensor>& in) {
    auto seed = in.empty() ? 0 : sample_fingerprint(in.front().data);
    return make_tensor(m.output, seed ^ fingerprint(m.name), "output");
  }

 private:
  // What this batch's l(b) is scaled by (models[].jitter, models[].p99_spread).
  double run_factor(const model_spec& m) {
    auto [lo, hi] = m.run_factors();
    return lo < hi ? std::uniform_real_distribution<double>(lo, hi)(rng_) : 1;
  }
  double slowdown() const {
    return slow_factor_ != 1 && std::chrono::steady_clock::now() >= slow_from_ ? slow_factor_ : 1;
  }

  std::mt19937_64 rng_;
  int threads_;
  std::string type_;
  double share_ = 1;
  std::chrono::steady_clock::time_point slow_from_{};
  double slow_factor_ = 1;
};

}  // namespace

std::optional<std::pair<double, double>> parse_slowdown(const std::string& text) {
  char* end = nullptr;
  double after = std::strtod(text.c_str(), &end);
  if (!end || end == text.c_str() || *end != ':') return std::nullopt;
  char* rest = nullptr;
  double factor = std::strtod(end + 1, &rest);
  if (!rest || rest == end + 1 || *rest || !(after >= 0) || !(factor > 0)) return std::nullopt;
  return std::make_pair(after, factor);
}

std::unique_ptr<device_executor> make_emulated_executor(uint64_t seed, int threads, const std::string& type,
                                                        double share) {
  return std::make_unique<emulated_executor>(seed, threads, type, share);
}

#ifdef SLOSERVE_WITH_TORCH
expected<std::unique_ptr<device_executor>> make_torch_executor(device_kind kind, int threads);
bool torch_available() {
  return true;
}
#else
bool torch_available() {
  return false;
}
#endif

expected<std::unique_ptr<device_executor>> make_executor(device_kind kind, uint64_t seed, int threads,
                                                         const std::string& type, double share) {
  if (kind == device_kind::emulated) return make_emulated_executor(seed, threads, type, share);
  if (kind == device_kind::network_switch)
    return fail("a switch device is made from its device group's limits (make_switch_executor)");
#ifdef SLOSERVE_WITH_TORCH
  return make_torch_executor(kind, threads);
#else
  return fail("device kind '" + std::string(knob_name(kind)) +
              "' is not built into this sloserve (configure with LibTorch)");
#endif
}

}  // namespace sloserve
