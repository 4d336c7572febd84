#include "gpu/preprocess.hpp"

#include "gpu/preprocess_math.hpp"

namespace sloserve {

void preprocess_cpu(const uint8_t* hwc, int h, int w, const preprocess_spec& s, float* chw) {
  for (int c = 0; c < 3; ++c)
    for (int y = 0; y < s.out_h; ++y)
      for (int x = 0; x < s.out_w; ++x)
        chw[(c * s.out_h + y) * s.out_w + x] =
            detail::normalize(detail::bilinear(hwc, h, w, s.out_h, s.out_w, c, y, x), s.mean[c], s.stddev[c]);
}

#ifndef SLOSERVE_WITH_CUDA
std::string preprocess_cuda(const uint8_t*, int, int, const preprocess_spec&, float*) {
  return "this sloserve was built without CUDA (configure with -DSLOSERVE_WITH_CUDA=ON)";
}
bool cuda_preprocess_available() {
  return false;
}
std::string preprocess_cuda_device(const uint8_t*, int, int, const preprocess_spec&, float*, void*) {
  return "this sloserve was built without CUDA (configure with -DSLOSERVE_WITH_CUDA=ON)";
}
#endif

}  // namespace sloserve
