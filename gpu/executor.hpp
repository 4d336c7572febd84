#pragma once
// A device executor runs one batch of one model. Implementations: emulated (here), LibTorch.

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "config/knobs.hpp"
#include "pipelines/expected.hpp"
#include "pipelines/model.hpp"

namespace sloserve {

struct device_group;

struct batch_outcome {
  std::vector<std::vector<tensor>> outputs;  // per request, in batch order
  // How long the device stays busy after execute() returns: the emulated device runs in zero
  // wall time and reports l(b) here; a real device reports 0 after running for real.
  std::chrono::nanoseconds busy{0};
  std::string error;  // non-empty: the whole batch failed with this reason
  // Per request when some failed alone (a bad image): non-empty is why, and that request's
  // output is to be dropped. Empty when every request ran.
  std::vector<std::string> failed;
};

// One variant's share of a prefix-batched execution.
struct family_group {
  const model_spec* model = nullptr;  // a variant (model_spec::is_variant)
  std::vector<const std::vector<tensor>*> inputs;
};

class device_executor {
 public:
  virtual ~device_executor() = default;
  virtual device_kind kind() const = 0;

  // The cost model the device actor plans its batches with. l(b) of `m` here: the profile's by
  // default; an executor whose speed follows its intra-op threads says so.
  virtual double latency_ms(const model_spec& m, int b) const { return m.profile.latency_ms_at(b); }
  // How long `m` takes to become ready after load() returns: 0 for a real device, whose load()
  // itself loads and warms the model; an emulated cold start otherwise.
  virtual double load_delay_ms(const model_spec& m) const { return 0; }
  // What the executor has to tell the operator, once each, taken by the device to log: how a cuda
  // device decodes JPEGs, a fallback it took. Empty most of the time.
  virtual std::vector<std::string> take_notes() { return {}; }
  // Whether execute() holds its thread for the batch's duration (a real device in forward()):
  // its actor then gets a thread of its own instead of a scheduler worker.
  virtual bool blocks() const { return false; }
  // Makes `m` ready to run (a real device loads and warms it up). execute() loads on first use
  // when this was not called.
  virtual status load(const model_spec& m) { return {}; }
  // Frees what load() holds of `model` (an apply removed it and its last batch has run).
  virtual void unload(const std::string& model) {}
  // An apply gave `m` another file under the same name: loads and warms it in place of the one
  // held (the device runs nothing meanwhile). On failure the one held stays, with the reason.
  virtual status reload(const model_spec& m) {
    unload(m.name);
    return load(m);
  }
  // Intra-op threads for the batches that follow (vertical scaling on cpu devices).
  virtual void set_threads(int threads) {}
  // Prefix batching: variants of one prefix run the prefix once over all groups' requests, then
  // each suffix on its contiguous slice. Outputs are flattened: group by group, request by
  // request. By default each group runs on its own (no sharing).
  virtual batch_outcome execute_family(const std::vector<family_group>& groups);
  // Resident size of a loaded model; 0 when unknown or not loaded.
  virtual double memory_mb(const std::string& model) const { return 0; }
  // inputs[i] holds request i's tensors; each was checked against m.input beforehand.
  virtual batch_outcome execute(const model_spec& m, const std::vector<const std::vector<tensor>*>& inputs) = 0;

  // Pipelining (the device actor's interface). start() begins a batch: an executor that runs it
  // at once returns its outcome (the default: execute()); a pipelined one (depth() > 1) copies
  // the inputs in, queues the work on the device, returns nothing, and hands the outcome over in
  // finish(), which waits for the oldest batch started. Up to depth() batches may be started
  // and not yet finished: the next batch's upload then overlaps the running one's compute.
  virtual int depth() const { return 1; }
  virtual std::optional<batch_outcome> start(const model_spec& m,
                                             const std::vector<const std::vector<tensor>*>& inputs) {
    return execute(m, inputs);
  }
  virtual std::optional<batch_outcome> start_family(const std::vector<family_group>& groups) {
    return execute_family(groups);
  }
  virtual batch_outcome finish() { return {{}, {}, "no batch was started on this device", {}}; }
};

// Waits l(b) from the model's profile (scaled by the model's jitter or p99_spread, drawn from `seed`) and
// returns outputs of the declared shape derived deterministically from each request's input.
// With `threads`, models that declare `cores:` take l(b, threads) instead (set_threads changes it).
// `type`: the device type, whose profile (`profiles: {TYPE: ...}`) it runs where a model has one.
// `share`: a fractional instance's share of its device, which slows it by each model's
// share_slowdown (instances of one device run side by side, each an executor of its own).
// "AFTER_S:FACTOR" (SLOSERVE_EMULATED_SLOWDOWN, `sloserve sim --slowdown`): batches take FACTOR
// times their profile from AFTER_S seconds on; nullopt when it is not that.
std::optional<std::pair<double, double>> parse_slowdown(const std::string& text);

std::unique_ptr<device_executor> make_emulated_executor(uint64_t seed, int threads = 1, const std::string& type = {},
                                                        double share = 1);

// A switch device (`kind: switch`): a chain of programmable switches within the group's limits
// that runs NetNN models (models[].netnn) in its data plane (gpu/switch_executor.cpp).
std::unique_ptr<device_executor> make_switch_executor(const device_group& group);

// The executor for a device kind; an error when the kind is not available in this build or on
// this machine. `threads`: intra-op threads (cpu); `type` and `share`: the device type and the
// instance's share (emulated devices).
expected<std::unique_ptr<device_executor>> make_executor(device_kind kind, uint64_t seed, int threads,
                                                         const std::string& type = {}, double share = 1);

// Whether this build has the LibTorch executors.
bool torch_available();

// Whether a cpu device runs a lone request padded to two rows: when, warm, a batch of two took
// under 0.8 of a batch of one (`one_ms`, `two_ms`: the faster of two runs each). LibTorch's cpu
// convolutions take their native path for a single small input and oneDNN's for two or more, so
// on small images a request alone can take several times as long as two.
inline bool pads_lone_request(double one_ms, double two_ms) {
  return one_ms > 0 && two_ms < 0.8 * one_ms;
}

}  // namespace sloserve
