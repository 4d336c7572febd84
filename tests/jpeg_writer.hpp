#pragma once
// Test helper: a JPEG of an RGB image, written with libjpeg-turbo (the library the device
// decodes with), for tests that send or decode images.

#include <gtest/gtest.h>
#include <turbojpeg.h>

#include <cstdint>
#include <string>
#include <vector>

namespace sloserve::testing {

// `rgb`: h x w x 3 bytes.
inline std::string jpeg_of(const std::vector<uint8_t>& rgb, int h, int w, int quality = 90) {
  tjhandle tj = tjInitCompress();
  unsigned char* buf = nullptr;
  unsigned long size = 0;
  EXPECT_EQ(tjCompress2(tj, rgb.data(), w, 0, h, TJPF_RGB, &buf, &size, TJSAMP_444, quality, TJFLAG_ACCURATEDCT), 0);
  std::string out(reinterpret_cast<char*>(buf), size);
  tjFree(buf);
  tjDestroy(tj);
  return out;
}

}  // namespace sloserve::testing
