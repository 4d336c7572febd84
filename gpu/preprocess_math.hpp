#pragma once
// The per-pixel arithmetic of preprocessing, compiled for both host and device.

#include <cstdint>

#ifdef __CUDACC__
#define SLOSERVE_HD __host__ __device__
#else
#define SLOSERVE_HD
#endif

namespace sloserve::detail {

// Bilinear sample of channel c at output pixel (y, x), align_corners=False semantics.
SLOSERVE_HD inline float bilinear(const uint8_t* hwc, int h, int w, int out_h, int out_w, int c, int y, int x) {
  float sy = (y + 0.5f) * (static_cast<float>(h) / out_h) - 0.5f;
  float sx = (x + 0.5f) * (static_cast<float>(w) / out_w) - 0.5f;
  if (sy < 0) sy = 0;
  if (sx < 0) sx = 0;
  int y0 = static_cast<int>(sy), x0 = static_cast<int>(sx);
  int y1 = y0 + 1 < h ? y0 + 1 : h - 1, x1 = x0 + 1 < w ? x0 + 1 : w - 1;
  float ly = sy - y0, lx = sx - x0;
  auto at = [&](int yy, int xx) { return static_cast<float>(hwc[(yy * w + xx) * 3 + c]); };
  return (1 - ly) * ((1 - lx) * at(y0, x0) + lx * at(y0, x1)) + ly * ((1 - lx) * at(y1, x0) + lx * at(y1, x1));
}

SLOSERVE_HD inline float normalize(float v, float mean, float stddev) {
  return (v / 255.0f - mean) / stddev;
}

}  // namespace sloserve::detail
