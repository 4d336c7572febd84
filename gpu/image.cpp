#include "gpu/image.hpp"

#include <turbojpeg.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <thread>

namespace sloserve {
namespace {

// One decompressor per thread: devices decode on their own threads.
tjhandle decompressor() {
  struct holder {
    tjhandle h = tjInitDecompress();
    ~holder() {
      if (h) tjDestroy(h);
    }
  };
  thread_local holder one;
  return one.h;
}

std::string jpeg_error(tjhandle h) {
  return std::string("bad JPEG image: ") + tjGetErrorStr2(h);
}

}  // namespace

status jpeg_size(const uint8_t* data, size_t n, int& h, int& w) {
  auto* tj = decompressor();
  if (!tj) return fail("cannot start the JPEG decoder");
  int subsamp = 0, colorspace = 0;
  if (n > static_cast<size_t>(INT32_MAX) ||
      tjDecompressHeader3(tj, data, static_cast<unsigned long>(n), &w, &h, &subsamp, &colorspace) != 0)
    return fail(jpeg_error(tj));
  if (h < 1 || w < 1 || h > max_image_side || w > max_image_side || int64_t{h} * w > max_image_pixels)
    return fail("JPEG image of " + std::to_string(w) + "x" + std::to_string(h) + " pixels is larger than " +
                std::to_string(max_image_side) + " a side or " + std::to_string(max_image_pixels) + " pixels");
  return {};
}

int64_t image_pixels_of(const tensor& t) {
  if (t.type == dtype::uint8 && t.shape.size() == 1) {
    int h = 0, w = 0;
    auto* data = reinterpret_cast<const uint8_t*>(t.data.data());
    return jpeg_size(data, t.data.size(), h, w) ? int64_t{h} * w : 0;
  }
  if (t.type == dtype::uint8 && t.shape.size() == 3) return t.shape[0] * t.shape[1];
  if (t.shape.size() >= 2) return t.shape[t.shape.size() - 2] * t.shape.back();
  return 0;
}

status decode_jpeg(const uint8_t* data, size_t n, std::vector<uint8_t>& rgb, int& h, int& w) {
  if (auto ok = jpeg_size(data, n, h, w); !ok) return ok;
  auto* tj = decompressor();
  rgb.resize(static_cast<size_t>(h) * static_cast<size_t>(w) * 3);
  if (tjDecompress2(tj, data, static_cast<unsigned long>(n), rgb.data(), w, 0, h, TJPF_RGB, TJFLAG_ACCURATEDCT) != 0 &&
      tjGetErrorCode(tj) != TJERR_WARNING)
    return fail(jpeg_error(tj));
  return {};
}

status check_input(const tensor& t, const model_spec& m) {
  auto form = input_form_of(t, m);
  if (!form) return fail(form.error());
  if (*form != input_form::encoded_image) return {};
  // A damaged or oversize image is refused before it queues; its header is enough to tell.
  int h = 0, w = 0;
  return jpeg_size(reinterpret_cast<const uint8_t*>(t.data.data()), t.data.size(), h, w);
}

preprocess_spec preprocess_of(const model_spec& m) {
  preprocess_spec s;
  s.out_h = static_cast<int>(m.input.shape.at(1));
  s.out_w = static_cast<int>(m.input.shape.at(2));
  if (m.preprocess)
    for (int c = 0; c < 3; ++c) {
      s.mean[c] = m.preprocess->mean[static_cast<size_t>(c)];
      s.stddev[c] = m.preprocess->stddev[static_cast<size_t>(c)];
    }
  return s;
}

status image_pixels(const tensor& t, input_form form, std::vector<uint8_t>& scratch, const uint8_t*& rgb, int& h,
                    int& w) {
  if (form == input_form::raw_image) {
    h = static_cast<int>(t.shape[0]);
    w = static_cast<int>(t.shape[1]);
    rgb = reinterpret_cast<const uint8_t*>(t.data.data());
    return {};
  }
  auto decoded = decode_jpeg(reinterpret_cast<const uint8_t*>(t.data.data()), t.data.size(), scratch, h, w);
  rgb = scratch.data();
  return decoded;
}

status input_row(const tensor& t, input_form form, const model_spec& m, float* row) {
  if (form == input_form::tensor) {
    std::memcpy(row, t.data.data(), t.data.size());
    return {};
  }
  thread_local std::vector<uint8_t> scratch;
  const uint8_t* rgb = nullptr;
  int h = 0, w = 0;
  if (auto ok = image_pixels(t, form, scratch, rgb, h, w); !ok) return ok;
  preprocess_cpu(rgb, h, w, preprocess_of(m), row);
  return {};
}

void for_each_row(size_t n, int threads, const std::function<void(size_t)>& f) {
  size_t k = std::min(n, static_cast<size_t>(std::max(1, threads)));
  auto run = [&](size_t part) {
    for (size_t i = n * part / k; i < n * (part + 1) / k; ++i) f(i);
  };
  std::vector<std::thread> helpers;
  for (size_t part = 1; part < k; ++part) helpers.emplace_back(run, part);
  if (k > 0) run(0);
  for (auto& t : helpers) t.join();
}

}  // namespace sloserve
