#pragma once
// A model as the cluster file declares it: tensors, batch limit and latency profile.

#include <array>
#include <cmath>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "pipelines/expected.hpp"
#include "pipelines/tensor.hpp"

namespace sloserve {

// l(b) of one batch on one device, in milliseconds.
// Tabular: measured points, linear between them, so the planner may choose any size from the
// first listed to the last (below the first size: the first size's cost). With `step`, the
// device pads a batch to the next listed size (the cuda kind does: see gpu/torch_executor.cpp),
// so a partial batch costs what that size costs and the planner chooses only listed sizes.
// Linear: l(b) = alpha_ms * b + beta_ms for every b up to max_batch.
struct latency_profile {
  std::vector<int> batch;          // tabular, ascending
  std::vector<double> latency_ms;  // tabular, same length
  double alpha_ms = 0;             // linear
  double beta_ms = 0;              // linear
  bool step = false;               // tabular: partial batches cost the next listed size

  bool tabular() const { return !batch.empty(); }
  // Largest batch this profile can run (tabular: the last listed size).
  int max_batch(int model_max_batch) const;
  // l(b) in ms: between listed sizes linear (with `step`, the next listed size's cost); beyond
  // the table, the slope of its last two points continues.
  double latency_ms_at(int b) const;
  // Batch sizes the planner may choose, ascending, capped at `model_max_batch`.
  std::vector<int> plannable_batches(int model_max_batch) const;
};

// l(b, c) = γ·b/c + ε/c + δ·b + η in ms: batch b on c cores (Sponge, thesis 004 part II).
struct core_latency {
  core_latency() = default;
  core_latency(double g, double e, double d, double h) : gamma(g), epsilon(e), delta(d), eta(h) {}

  double gamma = 0, epsilon = 0, delta = 0, eta = 0;
  // A model without `cores:`: l(b) is its profile as written at any core count (a table
  // interpolated between its batches), and the coefficients are unused.
  std::shared_ptr<const latency_profile> table;
  double at(int batch, int cores) const;
  // Requests/s one instance sustains: b / l(b, c).
  double throughput(int batch, int cores) const;
};

// `preprocess: {from: image, mean, std}`: requests carry images, which the device turns into the
// model's float32[3, H, W] input (decode, bilinear resize, (x / 255 - mean) / std).
struct image_preprocess {
  std::array<float, 3> mean{0.485f, 0.456f, 0.406f};
  std::array<float, 3> stddev{0.229f, 0.224f, 0.225f};
};

// The largest image side a request may carry (raw or encoded), and the most pixels.
constexpr int64_t max_image_side = 16384;
constexpr int64_t max_image_pixels = int64_t{64} << 20;

// What a request's input to `m` is: the declared tensor itself, or (with preprocess) a raw
// uint8[H, W, 3] image of any size, or encoded image bytes (JPEG) as uint8[N].
enum class input_form { tensor, raw_image, encoded_image };

// `precision:` the arithmetic a real device runs a model in; inputs and outputs keep their
// declared dtypes (the device casts).
enum class precision { fp32, fp16, bf16 };
std::string_view precision_name(precision p);
std::optional<precision> parse_precision(std::string_view name);

// `models[].layers`: a model a client may split (Graft, seed 003). The client runs layers [0, p)
// and sends what they made; the server runs [p, end). Each layer (a block between the points where
// a client may cut) declares what enters it and what it costs alone; a range costs the sum.
struct layer_spec {
  std::string name;
  tensor_spec input;        // what enters the layer (the first layer's: the model's input)
  latency_profile profile;  // l(b) of this layer alone, on a whole device
};

struct model_spec {
  // How the rest of the system names it: the file's name, or NAME:vN for a version N above 1.
  std::string name;
  // Model versions (`models[].version`): one model of the file under several versions, each
  // served as a model of its own; stages split their traffic over them (stage::versions).
  int version = 1;
  std::string base;  // the name the file gives it; empty: `name`
  const std::string& family() const { return base.empty() ? name : base; }
  tensor_spec input;
  tensor_spec output;
  // What the KServe v2 ingress calls them (`models[].input.name`, `models[].output.name`).
  std::string input_name = "input";
  std::string output_name = "output";
  int max_batch = 1;
  latency_profile profile;
  // Per device type (`profiles: {TYPE: profile}`), beside `profile`, which the other types run.
  std::vector<std::pair<std::string, latency_profile>> profiles;
  const latency_profile& profile_for(std::string_view type) const;
  double jitter = 0;  // emulated devices: l(b) is scaled by a factor in [1 - jitter, 1 + jitter]
  // Emulated devices: the profile is a tail latency (its p99, as Jellyfish and Clockwork plan on),
  // the batches running in l(b) scaled by a factor in [1 - p99_spread, 1].
  double p99_spread = 0;
  // The factors emulated devices scale l(b) by, drawn uniformly between the two (equal: none).
  std::pair<double, double> run_factors() const {
    return p99_spread > 0 ? std::pair{1 - p99_spread, 1.0} : std::pair{1 - jitter, 1 + jitter};
  }
  // A fractional device instance with share s (nodes[].devices[].shares) runs l(b) / s^share_exponent:
  // 1, the default, when the model keeps a whole device busy; less when it leaves part idle.
  double share_exponent = 1;
  double share_slowdown(double share) const { return share >= 1 ? 1 : std::pow(share, -share_exponent); }
  // Emulated devices: a device that does not hold the model takes this long to load it (cold
  // start) before it acknowledges the schedule that brings it. Real devices take what loading
  // and warming up take.
  double load_ms = 0;
  double memory_mb = 0;  // resident size on a device; 0: not accounted
  // Accuracy as a knob: top-1 accuracy in percent (unset: not declared; a stage of one model
  // counts as 100 in IPA's product), and IPA's base allocation R of one replica in cores.
  std::optional<double> accuracy;
  double base_cores = 1;
  // The first model of a cascade: the fraction of requests it answers itself (emulated models,
  // whose outputs carry no confidence); unset: decided from its outputs.
  std::optional<double> pass_rate;
  // How l(b) scales with a device's cores (`cores:` in the file); emulated devices follow it
  // when resized. Without it, l(b) does not depend on cores.
  std::optional<core_latency> cores;
  // A NetNN model (JSON, tools/netnn.py's format) that switch devices run in their data plane;
  // its input is one packet (uint8 [76]: the first 68 bytes, then the arrival time in us as a
  // little-endian int64), its output float32 [classes + 3]: the logits, the packet's class, its
  // flow's majority, and which packet of the flow it was (0: no inference point; then the logits
  // are 0 and the class -1). Relative paths are resolved as `path`'s.
  std::string netnn;
  std::string path;  // TorchScript file (cpu and cuda devices); relative paths are resolved
                     // against the cluster file's folder. For a variant: its suffix module.
  // The classification extension's labels: a text file of one class label a line (`labels`,
  // resolved as `path`), read with the configuration into `label_names`.
  std::string labels;
  std::vector<std::string> label_names;
  // Triton's response cache: outputs kept by a hash of the inputs, so that an input seen before is
  // answered at the frontend without a device (`response_cache`; runtime.response_cache_mb).
  bool response_cache = false;
  // Prefix batching: this model is a variant made of the shared prefix model `prefix` followed
  // by its own suffix (`path`). Variants of one prefix run the prefix once over their combined
  // batch. Filled from the prefix model by the config loader:
  std::string prefix;
  std::string prefix_path;
  tensor_spec prefix_output;  // what the prefix emits per request: the suffix's input
  latency_profile prefix_profile;

  // No `profile:` in the config: the worker that serves it on a real device measures l(b) at
  // start-up (`measured` is then set on that node) and reports it to the controller.
  bool needs_profile = false;
  bool measured = false;
  std::optional<image_preprocess> preprocess;
  sloserve::precision precision = sloserve::precision::fp32;

  // Partitioned models (above); empty: whole models only.
  std::vector<layer_spec> layers{};
  // A fragment (cluster_config::fragments): layers [layer_from, layer_to) of the partitioned
  // model `fragment_of`, which the config derives for every range; empty: a model of the file.
  std::string fragment_of{};
  int layer_from = 0, layer_to = 0;
  bool partitioned() const { return !layers.empty(); }
  bool is_fragment() const { return !fragment_of.empty(); }

  bool is_variant() const { return !prefix.empty(); }
  // Cost of this variant's suffix on b requests: its full l(b) less the prefix's l(b).
  double suffix_ms_at(int b) const;

  int batch_limit() const { return profile.max_batch(max_batch); }
};

// `m` running `factor` times as long as profiled: every latency it has (profiles, per-type
// profiles, layers, prefix, l(b, c)) scaled. The online profile refresh plans with it.
void scale_latency(model_spec& m, double factor);

// The name of layers [from, to) of partitioned model `base` as a model: "BASE[from,to)"; the
// whole range is `base` itself.
std::string fragment_name(const model_spec& base, int from, int to);
// Layers [from, to) of partitioned `base` (0 <= from < to <= layers) as a model: the input of
// layer `from`, the output of the last, the summed profile (linear when every layer's is), and
// the base's batch limit, share exponent, memory, load time and TorchScript file.
model_spec make_fragment(const model_spec& base, int from, int to);
// The sum of profiles: linear when all are, else tabular over every listed size.
latency_profile sum_profiles(const std::vector<const latency_profile*>& parts);

// The form of `t` as an input of `m`, or why it is not one (`error` set). Checks the declared
// tensor exactly; images only by shape and size (the device decodes them).
expected<input_form> input_form_of(const tensor& t, const model_spec& m);

}  // namespace sloserve
