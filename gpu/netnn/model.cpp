#include "gpu/netnn/model.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>

namespace sloserve::netnn {

std::vector<shape> shapes_of(const model& m) {
  std::vector<shape> out{{m.input_channels, m.input_length}};
  for (auto& l : m.layers) {
    auto in = out.back();
    if (l.kind == layer_kind::dense) {
      out.push_back({l.outputs, 1});
      continue;
    }
    int positions = in.positions >= l.kernel && l.stride > 0 ? (in.positions - l.kernel) / l.stride + 1 : 0;
    out.push_back({l.outputs, l.pool > 0 ? positions / l.pool : 0});
  }
  return out;
}

std::string check(const model& m) {
  if (m.input_channels <= 0 || m.input_length <= 0) return "the input needs channels and positions";
  if (m.layers.empty()) return "a model needs a layer";
  auto s = shapes_of(m);
  for (size_t i = 0; i < m.layers.size(); ++i) {
    auto& l = m.layers[i];
    auto name = fmt::format("layer {}", i + 1);
    if (l.outputs <= 0) return name + ": no outputs";
    if (l.shift < 0 || l.shift > 31) return name + ": shift outside [0, 31]";
    if (l.bias.size() != static_cast<size_t>(l.outputs)) return name + ": one bias per output";
    if (l.kind == layer_kind::conv) {
      if (l.inputs != s[i].channels)
        return fmt::format("{}: {} input channels where the layer before makes {}", name, l.inputs, s[i].channels);
      if (l.kernel <= 0 || l.stride <= 0 || l.pool <= 0) return name + ": kernel, stride and pool must be positive";
      if (s[i + 1].positions <= 0) return fmt::format("{}: nothing left of {} positions", name, s[i].positions);
      if (l.weights.size() != static_cast<size_t>(l.outputs * l.inputs * l.kernel))
        return name + ": weights must be filters x channels x kernel";
    } else {
      if (l.inputs != s[i].size())
        return fmt::format("{}: fan-in {} where the layer before makes {} values", name, l.inputs, s[i].size());
      if (l.weights.size() != static_cast<size_t>(l.outputs * l.inputs))
        return name + ": weights must be neurons x fan-in";
    }
  }
  return {};
}

expected<model> parse_model(const std::string& text, const std::string& where) {
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return fail(where + ": not a JSON object");
  model m;
  try {
    m.input_channels = j.value("input_channels", 1);
    m.input_length = j.at("input_length").get<int>();
    for (auto& x : j.at("layers")) {
      layer l;
      auto kind = x.at("kind").get<std::string>();
      if (kind != "conv" && kind != "dense")
        return fail(where + ": a layer's kind is conv or dense, not '" + kind + "'");
      l.kind = kind == "conv" ? layer_kind::conv : layer_kind::dense;
      l.inputs = x.at("inputs").get<int>();
      l.outputs = x.at("outputs").get<int>();
      l.kernel = x.value("kernel", 1);
      l.stride = x.value("stride", 1);
      l.pool = x.value("pool", 1);
      l.shift = x.value("shift", 0);
      for (auto& w : x.at("weights")) {
        auto v = w.get<int>();
        if (v < -128 || v > 127) return fail(where + ": a weight outside [-128, 127]");
        l.weights.push_back(static_cast<int8_t>(v));
      }
      l.bias = x.at("bias").get<std::vector<int32_t>>();
      m.layers.push_back(std::move(l));
    }
  } catch (const std::exception& e) {
    return fail(where + ": " + e.what());
  }
  if (auto why = check(m); !why.empty()) return fail(where + ": " + why);
  return m;
}

std::string model_json(const model& m) {
  nlohmann::json j;
  j["input_channels"] = m.input_channels;
  j["input_length"] = m.input_length;
  j["layers"] = nlohmann::json::array();
  for (auto& l : m.layers) {
    nlohmann::json x;
    x["kind"] = l.kind == layer_kind::conv ? "conv" : "dense";
    x["inputs"] = l.inputs;
    x["outputs"] = l.outputs;
    if (l.kind == layer_kind::conv) x["kernel"] = l.kernel, x["stride"] = l.stride, x["pool"] = l.pool;
    x["shift"] = l.shift;
    std::vector<int> w(l.weights.begin(), l.weights.end());
    x["weights"] = w;
    x["bias"] = l.bias;
    j["layers"].push_back(std::move(x));
  }
  return j.dump();
}

std::vector<int32_t> reference(const model& m, std::span<const uint8_t> input) {
  auto shapes = shapes_of(m);
  std::vector<uint8_t> x(input.begin(), input.end());
  for (size_t i = 0; i < m.layers.size(); ++i) {
    auto& l = m.layers[i];
    bool last = i + 1 == m.layers.size();
    std::vector<int64_t> acc;
    int positions = 1;
    if (l.kind == layer_kind::dense) {
      acc.assign(static_cast<size_t>(l.outputs), 0);
      for (int n = 0; n < l.outputs; ++n) {
        int64_t a = l.bias[static_cast<size_t>(n)];
        for (int k = 0; k < l.inputs; ++k)
          a += static_cast<int64_t>(x[static_cast<size_t>(k)]) * l.weights[static_cast<size_t>(n * l.inputs + k)];
        acc[static_cast<size_t>(n)] = a;
      }
    } else {
      int in_pos = shapes[i].positions;
      positions = (in_pos - l.kernel) / l.stride + 1;
      acc.assign(static_cast<size_t>(l.outputs * positions), 0);
      for (int f = 0; f < l.outputs; ++f)
        for (int p = 0; p < positions; ++p) {
          int64_t a = l.bias[static_cast<size_t>(f)];
          for (int c = 0; c < l.inputs; ++c)
            for (int t = 0; t < l.kernel; ++t)
              a += static_cast<int64_t>(x[static_cast<size_t>(c * in_pos + p * l.stride + t)]) *
                   l.weights[static_cast<size_t>((f * l.inputs + c) * l.kernel + t)];
          acc[static_cast<size_t>(f * positions + p)] = a;
        }
    }
    if (last) return std::vector<int32_t>(acc.begin(), acc.end());
    if (l.kind == layer_kind::dense) {
      x.resize(acc.size());
      for (size_t k = 0; k < acc.size(); ++k) x[k] = requantize(acc[k], l.shift);
      continue;
    }
    // Requantize, then max pool over windows of `pool` positions.
    int pooled = positions / l.pool;
    x.assign(static_cast<size_t>(l.outputs * pooled), 0);
    for (int f = 0; f < l.outputs; ++f)
      for (int q = 0; q < pooled; ++q) {
        uint8_t best = 0;
        for (int k = 0; k < l.pool; ++k)
          best = std::max(best, requantize(acc[static_cast<size_t>(f * positions + q * l.pool + k)], l.shift));
        x[static_cast<size_t>(f * pooled + q)] = best;
      }
  }
  return {};
}

int argmax(std::span<const int32_t> logits) {
  int best = 0;
  for (size_t k = 1; k < logits.size(); ++k)
    if (logits[k] > logits[static_cast<size_t>(best)]) best = static_cast<int>(k);
  return best;
}

}  // namespace sloserve::netnn
