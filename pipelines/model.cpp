#include "pipelines/model.hpp"

#include <algorithm>

namespace sloserve {

const latency_profile& model_spec::profile_for(std::string_view type) const {
  for (auto& [name, p] : profiles)
    if (name == type) return p;
  return profile;
}

int latency_profile::max_batch(int model_max_batch) const {
  if (tabular()) return std::min(batch.back(), model_max_batch);
  return model_max_batch;
}

double latency_profile::latency_ms_at(int b) const {
  if (!tabular()) return alpha_ms * b + beta_ms;
  auto it = std::lower_bound(batch.begin(), batch.end(), b);
  if (it != batch.end()) {
    auto i = static_cast<size_t>(it - batch.begin());
    if (step || i == 0 || batch[i] == b) return latency_ms[i];
    double f = static_cast<double>(b - batch[i - 1]) / (batch[i] - batch[i - 1]);
    return latency_ms[i - 1] + f * (latency_ms[i] - latency_ms[i - 1]);
  }
  // Beyond the table (a prefix family's combined batch): the slope of its last two points.
  size_t n = batch.size();
  if (n < 2 || batch[n - 1] == batch[n - 2]) return latency_ms.back();
  double slope = (latency_ms[n - 1] - latency_ms[n - 2]) / (batch[n - 1] - batch[n - 2]);
  return latency_ms.back() + std::max(0.0, slope) * (b - batch.back());
}

std::vector<int> latency_profile::plannable_batches(int model_max_batch) const {
  std::vector<int> out;
  if (tabular()) {
    if (step) {
      for (int b : batch)
        if (b <= model_max_batch) out.push_back(b);
    } else {
      for (int b = batch.front(); b <= std::min(model_max_batch, batch.back()); ++b) out.push_back(b);
    }
  } else {
    for (int b = 1; b <= model_max_batch; ++b) out.push_back(b);
  }
  return out;
}

double core_latency::at(int batch, int cores) const {
  if (table) return table->latency_ms_at(batch);
  double b = batch, c = cores;
  return gamma * b / c + epsilon / c + delta * b + eta;
}

double core_latency::throughput(int batch, int cores) const {
  double ms = at(batch, cores);
  return ms > 0 ? batch * 1000.0 / ms : 0;
}

namespace {

void scale_profile(latency_profile& p, double factor) {
  for (auto& l : p.latency_ms) l *= factor;
  p.alpha_ms *= factor;
  p.beta_ms *= factor;
}

}  // namespace

void scale_latency(model_spec& m, double factor) {
  scale_profile(m.profile, factor);
  for (auto& [type, p] : m.profiles) scale_profile(p, factor);
  for (auto& layer : m.layers) scale_profile(layer.profile, factor);
  scale_profile(m.prefix_profile, factor);
  if (m.cores) {
    auto& c = *m.cores;
    c.gamma *= factor, c.epsilon *= factor, c.delta *= factor, c.eta *= factor;
    if (c.table) {
      auto t = *c.table;
      scale_profile(t, factor);
      c.table = std::make_shared<const latency_profile>(std::move(t));
    }
  }
}

double model_spec::suffix_ms_at(int b) const {
  return std::max(0.0, profile.latency_ms_at(b) - (is_variant() ? prefix_profile.latency_ms_at(b) : 0.0));
}

expected<input_form> input_form_of(const tensor& t, const model_spec& m) {
  if (!m.preprocess || (t.type == m.input.type && t.shape == m.input.shape)) {
    if (auto ok = check_tensor(t, m.input); !ok) return fail(ok.error());
    return input_form::tensor;
  }
  auto neither = [&] {
    return "input " + t.spec().to_string() + " is neither the model's declared input " + m.input.to_string() +
           " nor an image (uint8[H,W,3], or JPEG bytes as uint8[N])";
  };
  if (t.type != dtype::uint8 || (t.shape.size() != 1 && t.shape.size() != 3)) return fail(neither());
  if (auto ok = check_tensor_bytes(t); !ok) return fail(ok.error());
  if (t.shape.size() == 1) {
    if (t.shape[0] < 4) return fail("image of " + std::to_string(t.shape[0]) + " bytes is too short to be a JPEG");
    return input_form::encoded_image;
  }
  if (t.shape[2] != 3) return fail(neither());
  if (t.shape[0] < 1 || t.shape[1] < 1 || t.shape[0] > max_image_side || t.shape[1] > max_image_side ||
      t.shape[0] * t.shape[1] > max_image_pixels)
    return fail("image " + t.spec().to_string() + " is empty or larger than " + std::to_string(max_image_side) +
                " pixels a side or " + std::to_string(max_image_pixels) + " pixels");
  return input_form::raw_image;
}

std::string_view precision_name(precision p) {
  switch (p) {
    case precision::fp32:
      return "fp32";
    case precision::fp16:
      return "fp16";
    case precision::bf16:
      return "bf16";
  }
  return "?";
}

std::optional<precision> parse_precision(std::string_view name) {
  for (auto p : {precision::fp32, precision::fp16, precision::bf16})
    if (precision_name(p) == name) return p;
  return std::nullopt;
}

std::string fragment_name(const model_spec& base, int from, int to) {
  if (from == 0 && to == static_cast<int>(base.layers.size())) return base.name;
  return base.name + "[" + std::to_string(from) + "," + std::to_string(to) + ")";
}

latency_profile sum_profiles(const std::vector<const latency_profile*>& parts) {
  latency_profile out;
  bool linear = std::none_of(parts.begin(), parts.end(), [](auto* p) { return p->tabular(); });
  if (linear) {
    for (auto* p : parts) out.alpha_ms += p->alpha_ms, out.beta_ms += p->beta_ms;
    return out;
  }
  std::vector<int> sizes;
  for (auto* p : parts)
    if (p->tabular()) sizes.insert(sizes.end(), p->batch.begin(), p->batch.end());
  std::sort(sizes.begin(), sizes.end());
  sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
  for (int b : sizes) {
    double ms = 0;
    for (auto* p : parts) ms += p->latency_ms_at(b);
    out.batch.push_back(b);
    out.latency_ms.push_back(ms);
  }
  return out;
}

model_spec make_fragment(const model_spec& base, int from, int to) {
  model_spec m;
  m.name = fragment_name(base, from, to);
  m.fragment_of = base.name;
  m.layer_from = from;
  m.layer_to = to;
  auto n = static_cast<int>(base.layers.size());
  m.input = base.layers[static_cast<size_t>(from)].input;
  m.input_name = base.input_name;
  m.output = to == n ? base.output : base.layers[static_cast<size_t>(to)].input;
  m.output_name = base.output_name;
  m.max_batch = base.max_batch;
  std::vector<const latency_profile*> parts;
  for (int k = from; k < to; ++k) parts.push_back(&base.layers[static_cast<size_t>(k)].profile);
  m.profile = sum_profiles(parts);
  m.jitter = base.jitter;
  m.p99_spread = base.p99_spread;
  m.share_exponent = base.share_exponent;
  m.load_ms = base.load_ms;
  m.memory_mb = base.memory_mb;
  m.path = base.path;
  m.precision = base.precision;
  return m;
}

}  // namespace sloserve
