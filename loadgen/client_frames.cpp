// What the camera clients of `sloserve load --clients` send: synthetic frames as JPEGs, the image
// sizes a pipeline's variants take, and the size an uplink carries within a budget.

#include <turbojpeg.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "loadgen/clients.hpp"

namespace sloserve {

std::string camera_frame_jpeg(int h, int w, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> noise(-28, 28);
  std::uniform_real_distribution<double> u(0, 1);
  std::vector<uint8_t> rgb(static_cast<size_t>(h) * w * 3);
  // Smooth shading, a few flat objects, a little sensor noise.
  struct box {
    double y0, x0, y1, x1, level;
  };
  std::vector<box> boxes;
  for (int k = 0; k < 12; ++k) {
    double y = u(rng), x = u(rng);
    boxes.push_back({y, x, y + 0.05 + 0.2 * u(rng), x + 0.05 + 0.2 * u(rng), 255 * u(rng)});
  }
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) {
      double fy = static_cast<double>(y) / h, fx = static_cast<double>(x) / w;
      for (int c = 0; c < 3; ++c) {
        double v = 128 + 80 * std::sin(6 * fx + 2 * c + 9 * fy * (c + 1));
        for (auto& b : boxes)
          if (fy >= b.y0 && fy < b.y1 && fx >= b.x0 && fx < b.x1) v = b.level + 20 * c;
        v += noise(rng);
        rgb[(static_cast<size_t>(y) * w + x) * 3 + c] = static_cast<uint8_t>(std::clamp(v, 0.0, 255.0));
      }
    }
  tjhandle tj = tjInitCompress();
  unsigned char* buf = nullptr;
  unsigned long size = 0;
  tjCompress2(tj, rgb.data(), w, 0, h, TJPF_RGB, &buf, &size, TJSAMP_420, 80, 0);
  std::string out(reinterpret_cast<char*>(buf), size);
  tjFree(buf);
  tjDestroy(tj);
  return out;
}

status set_image_sizes(const cluster_config& cfg, const pipeline& p, client_options& co) {
  co.sizes.clear();
  auto& variants = p.stages[p.roots().front()].variant_indices;
  for (auto m : variants) {
    auto& model = cfg.models[m];
    if (!model.preprocess || model.input.shape.size() != 3)
      return fail("--clients sends images: model '" + model.name + "' of pipeline '" + p.name +
                  "' needs preprocess: {from: image}");
    image_size s{static_cast<int>(model.input.shape[1]), static_cast<int>(model.input.shape[2])};
    if (std::find(co.sizes.begin(), co.sizes.end(), s) == co.sizes.end()) co.sizes.push_back(s);
  }
  std::sort(co.sizes.begin(), co.sizes.end(),
            [](auto& a, auto& b) { return int64_t{a.height} * a.width < int64_t{b.height} * b.width; });
  co.size_accuracy.assign(co.sizes.size(), 0);
  for (auto m : variants) {
    auto& model = cfg.models[m];
    image_size s{static_cast<int>(model.input.shape[1]), static_cast<int>(model.input.shape[2])};
    auto i = static_cast<size_t>(std::find(co.sizes.begin(), co.sizes.end(), s) - co.sizes.begin());
    co.model_size[model.name] = i;
    co.size_accuracy[i] = std::max(co.size_accuracy[i], model.accuracy.value_or(100));
  }
  co.fixed = co.sizes[co.sizes.size() / 2];
  return {};
}

size_t within_share(const std::vector<size_t>& bytes, size_t carried, double mbps, double budget_ms) {
  size_t best = 0;
  for (size_t i = 0; i <= carried && i < bytes.size() && mbps > 0; ++i)
    if (static_cast<double>(bytes[i]) * 8 / (mbps * 1e3) <= budget_ms) best = i;
  return best;
}

size_t largest_carried(const std::vector<size_t>& bytes, double mbps, double fps) {
  size_t best = 0;
  for (size_t i = 0; i < bytes.size(); ++i)
    if (static_cast<double>(bytes[i]) * 8 * fps < mbps * 1e6) best = i;
  return best;
}

size_t jellyfish_size(const std::vector<size_t>& bytes, size_t advised, size_t carried, double mbps, double server_ms,
                      double slo_ms) {
  if (bytes.empty()) return 0;
  auto size = std::min({advised, carried, bytes.size() - 1});
  while (size > 0 && mbps > 0 && static_cast<double>(bytes[size]) * 8 / (mbps * 1e3) + server_ms > slo_ms) --size;
  return size;
}

}  // namespace sloserve
