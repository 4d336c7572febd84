// The CPU path of preprocessing against torch.nn.functional.interpolate (reference written by
// tools/export_models.py --small), and the CUDA kernel against the CPU path where there is a GPU.

#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <mutex>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include "gpu/cuda_ipc.hpp"
#include "gpu/image.hpp"
#include "gpu/nvjpeg.hpp"
#include "gpu/preprocess.hpp"

namespace sloserve {
namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

// A batch's rows on several threads: each row once, in contiguous runs, the caller one of the
// threads; never more threads than rows.
TEST(for_each_row, runs_every_row_once_on_up_to_the_threads_given) {
  for (auto [n, threads] : {std::pair{10, 3}, std::pair{2, 8}, std::pair{5, 1}, std::pair{0, 4}}) {
    std::mutex mu;
    std::vector<int> seen(static_cast<size_t>(n), 0);
    std::vector<std::thread::id> by(static_cast<size_t>(n));
    for_each_row(static_cast<size_t>(n), threads, [&](size_t i) {
      std::lock_guard<std::mutex> lock(mu);
      ++seen[i];
      by[i] = std::this_thread::get_id();
    });
    std::set<std::thread::id> ids(by.begin(), by.end());
    for (int i = 0; i < n; ++i) EXPECT_EQ(seen[static_cast<size_t>(i)], 1) << n << " rows, row " << i;
    EXPECT_EQ(ids.size(), static_cast<size_t>(std::min(n, threads))) << n << " rows on " << threads;
    if (n > 0) {
      EXPECT_EQ(by[0], std::this_thread::get_id());
    }
    for (int i = 1; i < n; ++i) {  // contiguous: a thread's rows are one run
      if (by[static_cast<size_t>(i)] == by[static_cast<size_t>(i - 1)]) continue;
      for (int j = i; j < n; ++j) {
        EXPECT_NE(by[static_cast<size_t>(j)], by[static_cast<size_t>(i - 1)]);
      }
    }
  }
}

TEST(preprocess, cpu_path_matches_torch_bilinear_and_normalize) {
  std::string dir = SLOSERVE_MODELS_DIR;
  auto img = read_file(dir + "/preprocess.input.bin");
  auto ref = read_file(dir + "/preprocess.output.bin");
  ASSERT_EQ(img.size(), 5u * 7 * 3);
  ASSERT_EQ(ref.size(), 3u * 4 * 6 * 4);
  preprocess_spec s;
  s.out_h = 4;
  s.out_w = 6;
  std::vector<float> out(3 * 4 * 6);
  preprocess_cpu(reinterpret_cast<const uint8_t*>(img.data()), 5, 7, s, out.data());
  std::vector<float> want(out.size());
  std::memcpy(want.data(), ref.data(), ref.size());
  for (size_t i = 0; i < out.size(); ++i) EXPECT_NEAR(out[i], want[i], 1e-4) << "element " << i;
}

TEST(preprocess, same_size_is_pure_normalization) {
  std::vector<uint8_t> img{0, 128, 255, 10, 20, 30};  // 1 x 2 pixels
  preprocess_spec s;
  s.out_h = 1;
  s.out_w = 2;
  std::vector<float> out(6);
  preprocess_cpu(img.data(), 1, 2, s, out.data());
  EXPECT_NEAR(out[0], (0 / 255.0f - 0.485f) / 0.229f, 1e-6);    // c0, x0
  EXPECT_NEAR(out[1], (10 / 255.0f - 0.485f) / 0.229f, 1e-6);   // c0, x1
  EXPECT_NEAR(out[4], (255 / 255.0f - 0.406f) / 0.225f, 1e-6);  // c2, x0
}

TEST(preprocess, cuda_path_equals_cpu_path) {
  if (!cuda_preprocess_available()) GTEST_SKIP() << "no GPU (or built without SLOSERVE_WITH_CUDA)";
  std::mt19937 rng(7);
  // Downscaling, upscaling and same size, from odd-sized images.
  for (auto [h, w, oh, ow] :
       {std::array<int, 4>{37, 53, 224, 224}, {480, 640, 224, 224}, {224, 224, 224, 224}, {5, 7, 4, 6}}) {
    std::vector<uint8_t> img(static_cast<size_t>(h) * w * 3);
    for (auto& px : img) px = static_cast<uint8_t>(rng() & 0xff);
    preprocess_spec s;
    s.out_h = oh;
    s.out_w = ow;
    std::vector<float> cpu(3 * oh * ow), gpu(cpu.size(), std::nanf(""));
    preprocess_cpu(img.data(), h, w, s, cpu.data());
    ASSERT_EQ(preprocess_cuda(img.data(), h, w, s, gpu.data()), "");
    // nvcc contracts multiply-adds into FMAs; the CPU path rounds each step.
    for (size_t i = 0; i < cpu.size(); ++i) ASSERT_NEAR(gpu[i], cpu[i], 1e-4) << h << "x" << w << " element " << i;
  }
}

TEST(preprocess, cuda_path_reports_when_unavailable) {
  if (cuda_preprocess_available()) GTEST_SKIP() << "a GPU is present";
  std::vector<uint8_t> img(3);
  std::vector<float> out(3);
  preprocess_spec s;
  s.out_h = s.out_w = 1;
  EXPECT_FALSE(preprocess_cuda(img.data(), 1, 1, s, out.data()).empty());
}

// nvJPEG is loaded at run time. Where it is absent (this machine), opening it says where it
// looked, SLOSERVE_NVJPEG first; where it is present (a GPU machine), it describes what it runs on.
TEST(nvjpeg, opens_or_says_where_it_looked) {
  setenv("SLOSERVE_NVJPEG", "/nowhere/libnvjpeg.so.99", 1);
  auto places = nvjpeg_candidates();
  ASSERT_FALSE(places.empty());
  EXPECT_EQ(places.front(), "/nowhere/libnvjpeg.so.99");
  EXPECT_EQ(places.back(), "libnvjpeg.so");
  auto d = open_gpu_jpeg_decoder();
  unsetenv("SLOSERVE_NVJPEG");
  if (d) {
    EXPECT_NE((*d)->describe().find("nvJPEG"), std::string::npos) << (*d)->describe();
    GTEST_SKIP() << "nvJPEG is here: " << (*d)->describe();
  }
  EXPECT_NE(d.error().find("no nvJPEG library found (tried /nowhere/libnvjpeg.so.99, "), std::string::npos)
      << d.error();
  EXPECT_NE(d.error().find("libnvjpeg.so.12"), std::string::npos) << d.error();
}

// The CUDA runtime (clients' GPU memory) is loaded at run time too. Without a GPU it says why it
// cannot serve: no runtime where it looked, or a runtime that sees no device (this machine has
// /usr/local/cuda's runtime and no driver); with one, it describes what it runs on.
TEST(cuda_ipc, opens_the_runtime_or_says_why_it_cannot) {
  setenv("SLOSERVE_CUDART", "/nowhere/libcudart.so.99", 1);
  auto places = cudart_candidates();
  ASSERT_FALSE(places.empty());
  EXPECT_EQ(places.front(), "/nowhere/libcudart.so.99");
  EXPECT_EQ(places.back(), "libcudart.so");
  auto gpu = open_cuda_ipc();
  unsetenv("SLOSERVE_CUDART");
  if (gpu->unavailable().empty()) {
    EXPECT_NE(gpu->describe().find("CUDA runtime"), std::string::npos) << gpu->describe();
    auto bad = gpu->open(std::string(64, '\0'), 0);
    EXPECT_FALSE(bad) << "a handle of zeros opens nothing";
    GTEST_SKIP() << "a GPU is here: " << gpu->describe();
  }
  auto why = gpu->unavailable();
  EXPECT_TRUE(why.find("no CUDA runtime found (tried /nowhere/libcudart.so.99, ") == 0 ||
              why.find("no CUDA device (") == 0)
      << why;
  EXPECT_EQ(gpu->describe(), why);
  auto opened = gpu->open(std::string(64, '\0'), 0);
  ASSERT_FALSE(opened);
  EXPECT_EQ(opened.error(), why);
}

}  // namespace
}  // namespace sloserve
