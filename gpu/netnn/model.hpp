#pragma once
// NetNN's quantized DNN (seed 004, chapter P6): 1-D convolutions with max pooling and dense
// layers over 8-bit activations and 8-bit weights, and its integer reference on the CPU (the
// function the switch chain must reproduce bit for bit).
//
// Arithmetic: a layer's activations are uint8 (0-255). Each output accumulates
// sum(x * w) + bias in int32, is shifted right by the layer's `shift` (arithmetic) and clamped to
// [0, 255] (ReLU and saturation) — except the last layer, whose int32 accumulators are the logits.
// A convolution's input is channels x positions; its output (filters x positions) is max pooled
// over non-overlapping windows of `pool` positions (a tail shorter than the window is dropped).
// Flattening for a dense layer is channel-major: index = channel * positions + position.

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "pipelines/expected.hpp"

namespace sloserve::netnn {

enum class layer_kind : uint8_t { conv, dense };

struct layer {
  layer_kind kind = layer_kind::dense;
  int inputs = 0;               // conv: input channels; dense: fan-in
  int outputs = 0;              // conv: filters; dense: neurons
  int kernel = 1;               // conv only
  int stride = 1;               // conv only
  int pool = 1;                 // conv only: max pooling window after it (1: none)
  int shift = 0;                // requantization: (acc + bias) >> shift
  std::vector<int8_t> weights;  // conv: [filter][channel][tap]; dense: [neuron][input]
  std::vector<int32_t> bias;    // per output
};

struct model {
  int input_channels = 1;
  int input_length = 0;  // positions per channel
  std::vector<layer> layers;
};

// The shape a layer sees and makes, in order: (channels, positions) of each layer's input; a
// dense layer's input is (fan-in, 1). shapes.back() is the output (classes, 1).
struct shape {
  int channels = 0, positions = 0;
  int size() const { return channels * positions; }
};
std::vector<shape> shapes_of(const model& m);

// What is wrong with `m` (shapes that do not chain, sizes of weights and biases, shifts out of
// [0, 31]); empty when nothing.
std::string check(const model& m);

// The model in a JSON document: {"input_channels", "input_length", "layers": [{"kind": "conv" |
// "dense", "inputs", "outputs", "kernel", "stride", "pool", "shift", "weights": [...], "bias":
// [...]}]}; `where` names it in errors.
expected<model> parse_model(const std::string& json, const std::string& where);
std::string model_json(const model& m);

// The logits of `input` (input_channels x input_length values, channel-major) by integer
// arithmetic on the CPU.
std::vector<int32_t> reference(const model& m, std::span<const uint8_t> input);

// The class of logits: the largest, the lowest index on ties.
int argmax(std::span<const int32_t> logits);

// Requantization of an accumulator: (acc >> shift) clamped to [0, 255].
inline uint8_t requantize(int64_t acc, int shift) {
  auto v = acc >> shift;
  return static_cast<uint8_t>(v < 0 ? 0 : v > 255 ? 255 : v);
}

}  // namespace sloserve::netnn
