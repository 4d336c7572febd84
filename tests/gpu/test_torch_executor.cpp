// The LibTorch executors against PyTorch itself: tools/export_models.py --small writes tiny
// TorchScript models with a reference batch computed in Python. Every test runs on the cpu kind,
// and again on the cuda kind where the build has CUDA and the machine a GPU (skipped elsewhere).

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <sstream>

#include "gpu/executor.hpp"
#include "gpu/image.hpp"
#include "gpu/nvjpeg.hpp"
#include "tests/jpeg_writer.hpp"

namespace sloserve {
namespace {

const std::string dir = SLOSERVE_MODELS_DIR;

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

model_spec tiny_mlp() {
  model_spec m;
  m.name = "tiny_mlp";
  m.path = dir + "/tiny_mlp.pt";
  m.input = {dtype::float32, {16}};
  m.output = {dtype::float32, {4}};
  m.max_batch = 8;
  return m;
}

// A CNN of the test models: `name`.pt, float32[3, side, side] -> float32[classes].
model_spec cnn(const std::string& name, int64_t side, int64_t classes) {
  model_spec m;
  m.name = name;
  m.path = dir + "/" + name + ".pt";
  m.input = {dtype::float32, {3, side, side}};
  m.output = {dtype::float32, {classes}};
  m.max_batch = 8;
  return m;
}

model_spec tiny_cnn() {
  return cnn("tiny_cnn", 8, 5);
}

// Requests made of the reference input rows.
std::vector<std::vector<tensor>> reference_requests(const model_spec& m, const std::string& stem) {
  auto bytes = read_file(dir + "/" + stem + ".input.bin");
  auto row = m.input.byte_size().value();
  std::vector<std::vector<tensor>> out;
  for (size_t off = 0; off + row <= bytes.size(); off += row) {
    tensor t;
    t.type = m.input.type;
    t.shape = m.input.shape;
    t.data = bytes.substr(off, row);
    out.push_back({t});
  }
  return out;
}

std::vector<float> floats(std::string_view bytes) {
  std::vector<float> v(bytes.size() / 4);
  std::memcpy(v.data(), bytes.data(), v.size() * 4);
  return v;
}

// Float tolerance: cuDNN's convolutions may use TF32 on the GPU.
double tolerance(const device_executor& ex) {
  return ex.kind() == device_kind::cuda ? 2e-3 : 1e-5;
}

void expect_reference(device_executor& ex, const model_spec& m, const std::string& stem) {
  auto reqs = reference_requests(m, stem);
  ASSERT_FALSE(reqs.empty());
  std::vector<const std::vector<tensor>*> in;
  for (auto& r : reqs) in.push_back(&r);
  auto out = ex.execute(m, in);
  ASSERT_EQ(out.error, "");
  ASSERT_EQ(out.outputs.size(), reqs.size());  // one output per request, in order
  auto want = floats(read_file(dir + "/" + stem + ".output.bin"));
  auto per = want.size() / reqs.size();
  for (size_t i = 0; i < reqs.size(); ++i) {
    EXPECT_EQ(out.outputs[i][0].shape, m.output.shape);
    auto got = floats(out.outputs[i][0].data);
    ASSERT_EQ(got.size(), per);
    for (size_t k = 0; k < per; ++k)
      EXPECT_NEAR(got[k], want[i * per + k], tolerance(ex) * std::max(1.0f, std::abs(want[i * per + k])))
          << "request " << i << " value " << k;
  }
}

// `reqs` run as one batch.
batch_outcome execute_requests(device_executor& ex, const model_spec& m, const std::vector<std::vector<tensor>>& reqs) {
  std::vector<const std::vector<tensor>*> in;
  for (auto& r : reqs) in.push_back(&r);
  return ex.execute(m, in);
}

class torch_executor_kinds : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    std::string err;
    auto made = make_executor(*parse_knob<device_kind>(GetParam()), 0, 1);
    if (!made && GetParam() == "cuda") GTEST_SKIP() << made.error();
    ASSERT_TRUE(made) << made.error();
    ex = std::move(*made);
  }
  std::unique_ptr<device_executor> ex;
};

INSTANTIATE_TEST_SUITE_P(kinds, torch_executor_kinds, ::testing::Values("cpu", "cuda"),
                         [](const auto& info) { return info.param; });

TEST_P(torch_executor_kinds, batch_outputs_equal_pytorch_and_split_per_request) {
  ASSERT_TRUE(torch_available());
  EXPECT_TRUE(ex->load(tiny_mlp()));
  EXPECT_GT(ex->memory_mb("tiny_mlp"), 0);
  expect_reference(*ex, tiny_mlp(), "tiny_mlp");
  expect_reference(*ex, tiny_cnn(), "tiny_cnn");  // loads on first use
}

// An apply gave a model another file under its name: the new file serves from then on; a file
// that will not load leaves the one that served.
TEST_P(torch_executor_kinds, a_reloaded_model_serves_its_new_file_and_a_bad_file_keeps_the_old) {
  ASSERT_TRUE(torch_available());
  auto m = tiny_mlp();
  m.name = "m";
  ASSERT_TRUE(ex->load(m));
  expect_reference(*ex, m, "tiny_mlp");
  auto next = tiny_cnn();
  next.name = "m";
  auto reloaded = ex->reload(next);
  ASSERT_TRUE(reloaded) << reloaded.error();
  expect_reference(*ex, next, "tiny_cnn");
  auto broken = next;
  broken.path = dir + "/no-such-file.pt";
  auto failed = ex->reload(broken);
  ASSERT_FALSE(failed);
  EXPECT_NE(failed.error().find("no-such-file.pt"), std::string::npos) << failed.error();
  expect_reference(*ex, next, "tiny_cnn");
}

// Graft's fragments: ResNet-18 cut at each exported layer p, the server's part [p, end) run on
// what layers [0, p) made of two images, answers as the whole network does on the images.
TEST_P(torch_executor_kinds, a_resnet18_fragment_from_any_split_answers_as_the_whole_network) {
  for (int p : {0, 4, 5, 6, 7, 8}) {
    auto stem = "resnet18_from_" + std::to_string(p);
    model_spec m;
    m.name = stem;
    m.path = dir + "/" + stem + ".pt";
    std::ifstream shape(dir + "/" + stem + ".shape");
    for (int64_t d; shape >> d;) m.input.shape.push_back(d);
    ASSERT_EQ(m.input.shape.size(), 3u) << stem;
    m.input.type = dtype::float32;
    m.output = {dtype::float32, {1000}};
    m.max_batch = 4;
    SCOPED_TRACE(stem);
    expect_reference(*ex, m, stem);
  }
}

// The same network as one file of six blocks (a partitioned model): any range of blocks runs, from
// the one file, and a fragment [p, 6) or two ranges in turn answer as the whole network does.
model_spec resnet18_blocks() {
  model_spec m;
  m.name = "resnet18";
  m.path = dir + "/resnet18_blocks.pt";
  m.output = {dtype::float32, {1000}};
  m.max_batch = 4;
  std::ifstream shapes(dir + "/resnet18_blocks.shapes");
  for (std::string line; std::getline(shapes, line);) {
    layer_spec l;
    l.input.type = dtype::float32;
    std::istringstream in(line);
    for (int64_t d; in >> d;) l.input.shape.push_back(d);
    l.profile.alpha_ms = 1;
    m.layers.push_back(l);
  }
  if (!m.layers.empty()) m.input = m.layers.front().input;
  return m;
}

TEST_P(torch_executor_kinds, any_range_of_a_partitioned_model_runs_from_its_one_file) {
  auto base = resnet18_blocks();
  ASSERT_EQ(base.layers.size(), 6u);
  const int splits[] = {0, 4, 5, 6, 7, 8};
  for (int p = 0; p < 6; ++p) {
    SCOPED_TRACE(p);
    auto m = p == 0 ? base : make_fragment(base, p, 6);
    expect_reference(*ex, m, "resnet18_from_" + std::to_string(splits[p]));
  }
  // [1, 3) then [3, 6): what re-aligned fragments run in turn.
  auto first = make_fragment(base, 1, 3), second = make_fragment(base, 3, 6);
  EXPECT_EQ(first.name, "resnet18[1,3)");
  auto reqs = reference_requests(first, "resnet18_from_4");
  std::vector<const std::vector<tensor>*> in;
  for (auto& r : reqs) in.push_back(&r);
  auto mid = ex->execute(first, in);
  ASSERT_EQ(mid.error, "");
  EXPECT_EQ(mid.outputs[0][0].shape, base.layers[3].input.shape);
  std::vector<const std::vector<tensor>*> in2;
  for (auto& o : mid.outputs) in2.push_back(&o);
  auto out = ex->execute(second, in2);
  ASSERT_EQ(out.error, "");
  auto want = floats(read_file(dir + "/resnet18_from_4.output.bin"));
  auto got = floats(out.outputs[1][0].data);
  for (size_t k = 0; k < got.size(); ++k)
    EXPECT_NEAR(got[k], want[1000 + k], tolerance(*ex) * std::max(1.0f, std::abs(want[1000 + k])));
  // A file with another number of blocks than the model declares is refused with the counts.
  auto wrong = base;
  wrong.name = "resnet18_wrong";
  wrong.layers.pop_back();
  auto loaded = ex->load(wrong);
  ASSERT_FALSE(loaded);
  EXPECT_NE(loaded.error().find("declares 5 layers but"), std::string::npos) << loaded.error();
}

TEST_P(torch_executor_kinds, a_request_alone_gets_what_it_gets_in_a_batch) {
  auto m = tiny_mlp();
  auto reqs = reference_requests(m, "tiny_mlp");
  auto alone = ex->execute(m, {&reqs[1]});
  ASSERT_EQ(alone.error, "");
  std::vector<const std::vector<tensor>*> all;
  for (auto& r : reqs) all.push_back(&r);
  auto batched = ex->execute(m, all);
  auto a = floats(alone.outputs[0][0].data), b = floats(batched.outputs[1][0].data);
  for (size_t k = 0; k < a.size(); ++k) EXPECT_NEAR(a[k], b[k], tolerance(*ex));
}

// The small CNN at 32 px: LibTorch's cpu convolutions run one such input several times slower than
// two, so a cpu executor runs it alone padded to two rows. Alone or in a batch, the answer is
// the same.
TEST_P(torch_executor_kinds, a_lone_request_padded_to_two_rows_gets_what_it_gets_in_a_batch) {
  auto m = cnn("small_cnn_32", 32, 10);
  std::vector<std::vector<tensor>> reqs;
  for (uint64_t i = 0; i < 3; ++i) reqs.push_back({make_tensor(m.input, 7 + i)});
  auto alone = ex->execute(m, {&reqs[1]});
  ASSERT_EQ(alone.error, "");
  ASSERT_EQ(alone.outputs.size(), 1u);
  auto batched = ex->execute(m, {&reqs[0], &reqs[1], &reqs[2]});
  ASSERT_EQ(batched.error, "");
  auto a = floats(alone.outputs[0][0].data), b = floats(batched.outputs[1][0].data);
  ASSERT_EQ(a.size(), 10u);
  for (size_t k = 0; k < a.size(); ++k) EXPECT_NEAR(a[k], b[k], 1e-4);
}

TEST(torch_executor, pads_a_lone_request_only_where_two_rows_run_clearly_faster) {
  EXPECT_TRUE(pads_lone_request(3.7, 0.7));    // the small CNN at 32 px
  EXPECT_FALSE(pads_lone_request(1.4, 1.39));  // at 48 px: as fast, not faster
  EXPECT_FALSE(pads_lone_request(2.5, 2.6));   // at 64 px
  EXPECT_FALSE(pads_lone_request(10, 8.5));    // within the noise of a few runs
  EXPECT_FALSE(pads_lone_request(0, 0));
}

TEST_P(torch_executor_kinds, changing_threads_between_batches_keeps_results) {
  ex->set_threads(2);
  expect_reference(*ex, tiny_cnn(), "tiny_cnn");
  ex->set_threads(1);
  expect_reference(*ex, tiny_cnn(), "tiny_cnn");
}

TEST_P(torch_executor_kinds, errors_name_the_problem) {
  auto missing = tiny_mlp();
  missing.name = "missing";
  missing.path = dir + "/nope.pt";
  EXPECT_NE(ex->load(missing).error().find("cannot load model 'missing' from"), std::string::npos);
  auto wrong = tiny_mlp();
  wrong.name = "wrong_output";
  wrong.output = {dtype::float32, {7}};
  EXPECT_NE(ex->load(wrong).error().find("produced float32[4] per request, not the declared output float32[7]"),
            std::string::npos)
      << ex->load(wrong).error();
  auto nopath = tiny_mlp();
  nopath.name = "nopath";
  nopath.path.clear();
  EXPECT_NE(ex->load(nopath).error().find("has no TorchScript path"), std::string::npos);
  // LibTorch has no uint32 tensors: a model declaring one is refused, saying so.
  auto wide = tiny_mlp();
  wide.name = "wide";
  wide.output = {dtype::uint32, {4}};
  EXPECT_NE(ex->load(wide).error().find("its output is uint32, which LibTorch has no tensors of"), std::string::npos)
      << ex->load(wide).error();
}

model_spec tiny_variant(int v, bool as_suffix) {
  model_spec m;
  m.name = "tiny_v" + std::to_string(v) + (as_suffix ? "" : "_full");
  m.path = dir + "/tiny_v" + std::to_string(v) + (as_suffix ? "_suffix.pt" : ".pt");
  m.input = {dtype::float32, {16}};
  m.output = {dtype::float32, {3}};
  m.max_batch = 8;
  if (as_suffix) {
    m.prefix = "tiny_prefix";
    m.prefix_path = dir + "/tiny_prefix.pt";
    m.prefix_output = {dtype::float32, {8}};
  }
  return m;
}

TEST_P(torch_executor_kinds, prefix_batched_outputs_equal_each_full_variant_alone) {
  auto v0 = tiny_variant(0, true), v1 = tiny_variant(1, true);
  auto f0 = tiny_variant(0, false), f1 = tiny_variant(1, false);
  std::vector<std::vector<tensor>> reqs;
  for (uint64_t i = 0; i < 5; ++i) reqs.push_back({make_tensor({dtype::float32, {16}}, 100 + i)});
  // Three requests of v0 and two of v1 share one pass of the prefix.
  std::vector<family_group> groups{{&v0, {&reqs[0], &reqs[1], &reqs[2]}}, {&v1, {&reqs[3], &reqs[4]}}};
  auto fam = ex->execute_family(groups);
  ASSERT_EQ(fam.error, "");
  ASSERT_EQ(fam.outputs.size(), 5u);
  for (size_t i = 0; i < 5; ++i) {
    auto& full = i < 3 ? f0 : f1;
    auto alone = ex->execute(full, {&reqs[i]});
    ASSERT_EQ(alone.error, "");
    auto a = floats(fam.outputs[i][0].data), b = floats(alone.outputs[0][0].data);
    ASSERT_EQ(a.size(), 3u);
    for (size_t k = 0; k < 3; ++k) EXPECT_NEAR(a[k], b[k], tolerance(*ex)) << "request " << i;
  }
  // A variant on its own runs prefix then suffix too.
  auto solo = ex->execute(v1, {&reqs[4]});
  ASSERT_EQ(solo.error, "");
  auto s = floats(solo.outputs[0][0].data), f = floats(fam.outputs[4][0].data);
  ASSERT_EQ(s.size(), f.size());
  for (size_t k = 0; k < s.size(); ++k) EXPECT_NEAR(s[k], f[k], tolerance(*ex));
  // One copy of the prefix, however many variants use it.
  EXPECT_GT(ex->memory_mb("tiny_prefix"), 0);
}

tensor uint8_tensor(std::string bytes, std::vector<int64_t> shape) {
  tensor t;
  t.name = "image";
  t.type = dtype::uint8;
  t.shape = std::move(shape);
  t.data = std::move(bytes);
  return t;
}

// Images in, the model's float32[3, 8, 8] made on the device: a raw uint8 image of another size
// gives what the model gives on its preprocessed tensor (the CPU reference path), a JPEG what it
// gives on the decoded pixels, and a damaged image fails alone while the others in its batch run.
TEST_P(torch_executor_kinds, images_are_preprocessed_on_the_device_and_a_bad_one_fails_alone) {
  auto m = tiny_cnn();
  m.preprocess = image_preprocess{};
  int h = 13, w = 17;
  auto pixels = make_tensor({dtype::uint8, {h, w, 3}}, 5, "image");
  std::vector<uint8_t> rgb(pixels.data.begin(), pixels.data.end());
  // What the model should see, made on the host.
  auto by_hand = [&](const std::vector<uint8_t>& img) {
    std::string row(m.input.byte_size().value(), '\0');
    preprocess_cpu(img.data(), h, w, preprocess_of(m), reinterpret_cast<float*>(row.data()));
    tensor t;
    t.type = m.input.type;
    t.shape = m.input.shape;
    t.data = std::move(row);
    return t;
  };
  auto jpeg = testing::jpeg_of(rgb, h, w, 95);
  std::vector<uint8_t> decoded;
  int dh = 0, dw = 0;
  auto ok = decode_jpeg(reinterpret_cast<const uint8_t*>(jpeg.data()), jpeg.size(), decoded, dh, dw);
  ASSERT_TRUE(ok) << ok.error();
  ASSERT_EQ(dh, h);
  ASSERT_EQ(dw, w);
  auto damaged = jpeg.substr(0, 40) + std::string(200, '\x11');
  std::vector<std::vector<tensor>> reqs{{pixels},
                                        {uint8_tensor(jpeg, {static_cast<int64_t>(jpeg.size())})},
                                        {uint8_tensor(damaged, {static_cast<int64_t>(damaged.size())})},
                                        {by_hand(rgb)}};
  std::vector<std::vector<tensor>> want_reqs{{by_hand(rgb)}, {by_hand(decoded)}};
  auto out = execute_requests(*ex, m, reqs);
  auto want = execute_requests(*ex, m, want_reqs);
  ASSERT_EQ(out.error, "");
  ASSERT_EQ(want.error, "");
  ASSERT_EQ(out.failed.size(), 4u);
  EXPECT_EQ(out.failed[0], "");
  EXPECT_EQ(out.failed[1], "");
  EXPECT_NE(out.failed[2].find("JPEG"), std::string::npos) << out.failed[2];
  EXPECT_EQ(out.failed[3], "");
  for (auto [got, ref] : {std::pair{0, 0}, std::pair{1, 1}, std::pair{3, 0}}) {
    auto a = floats(out.outputs[static_cast<size_t>(got)][0].data),
         b = floats(want.outputs[static_cast<size_t>(ref)][0].data);
    ASSERT_EQ(a.size(), b.size());
    for (size_t k = 0; k < a.size(); ++k)
      EXPECT_NEAR(a[k], b[k], 1e-3 * std::max(1.0f, std::abs(b[k]))) << got << " " << k;
  }
}

// On a cuda device with nvJPEG, a batch of JPEGs of several sizes is decoded on the GPU in one
// call: each row gives what the same JPEG decoded by libjpeg-turbo gives, within what two JPEG
// decoders differ by (their IDCT and chroma upsampling round differently), and a damaged JPEG
// among them fails alone.
TEST_P(torch_executor_kinds, jpegs_decoded_on_the_gpu_give_what_the_cpu_decoder_gives) {
  if (GetParam() != "cuda") GTEST_SKIP() << "nvJPEG serves cuda devices";
  auto nvjpeg = open_gpu_jpeg_decoder();
  if (!nvjpeg) GTEST_SKIP() << nvjpeg.error();
  auto m = tiny_cnn();
  m.preprocess = image_preprocess{};
  std::vector<std::vector<tensor>> reqs, want_reqs;
  std::vector<std::pair<int, int>> sizes{{13, 17}, {64, 48}, {120, 160}, {8, 8}, {480, 640}, {33, 31}};
  for (size_t i = 0; i < sizes.size(); ++i) {
    auto [h, w] = sizes[i];
    auto pixels = make_tensor({dtype::uint8, {h, w, 3}}, static_cast<int>(i) + 3, "image");
    auto jpeg = testing::jpeg_of(std::vector<uint8_t>(pixels.data.begin(), pixels.data.end()), h, w, 90);
    std::vector<uint8_t> decoded;
    int dh = 0, dw = 0;
    ASSERT_TRUE(decode_jpeg(reinterpret_cast<const uint8_t*>(jpeg.data()), jpeg.size(), decoded, dh, dw));
    reqs.push_back({uint8_tensor(jpeg, {static_cast<int64_t>(jpeg.size())})});
    want_reqs.push_back({uint8_tensor(std::string(decoded.begin(), decoded.end()), {dh, dw, 3})});
  }
  auto good = reqs[1][0].data.str();
  auto damaged = good.substr(0, 40) + std::string(200, '\x11');
  reqs.push_back({uint8_tensor(damaged, {static_cast<int64_t>(damaged.size())})});
  auto out = execute_requests(*ex, m, reqs);
  auto want = execute_requests(*ex, m, want_reqs);
  ASSERT_EQ(out.error, "");
  ASSERT_EQ(want.error, "");
  ASSERT_EQ(out.failed.size(), reqs.size());
  EXPECT_FALSE(out.failed.back().empty()) << "the damaged JPEG fails";
  for (size_t i = 0; i < sizes.size(); ++i) {
    EXPECT_EQ(out.failed[i], "") << i;
    auto a = floats(out.outputs[i][0].data), b = floats(want.outputs[i][0].data);
    ASSERT_EQ(a.size(), b.size());
    for (size_t k = 0; k < a.size(); ++k)
      EXPECT_NEAR(a[k], b[k], 0.05 * std::max(1.0f, std::abs(b[k]))) << i << " " << k;
  }
  for (auto& note : ex->take_notes()) std::cout << "cuda device: " << note << "\n";
}

// A batch of images stacked on several threads (a cpu device of 3 threads) gives what one thread
// gives, row for row, a damaged image failing alone among them.
TEST(torch_executor, images_stacked_on_several_threads_give_what_one_thread_gives) {
  auto m = tiny_cnn();
  m.preprocess = image_preprocess{};
  auto one = make_executor(device_kind::cpu, 0, 1);
  auto three = make_executor(device_kind::cpu, 0, 3);
  ASSERT_TRUE(one && three);
  std::vector<std::vector<tensor>> reqs;
  for (uint64_t i = 0; i < 11; ++i) {
    int h = 9 + static_cast<int>(i), w = 12;
    auto pixels = make_tensor({dtype::uint8, {h, w, 3}}, i, "image");
    if (i % 3 == 0) {
      reqs.push_back({pixels});
      continue;
    }
    auto jpeg = testing::jpeg_of(std::vector<uint8_t>(pixels.data.begin(), pixels.data.end()), h, w, 90);
    if (i == 7) jpeg = jpeg.substr(0, 40) + std::string(200, '\x11');
    reqs.push_back({uint8_tensor(jpeg, {static_cast<int64_t>(jpeg.size())})});
  }
  std::vector<const std::vector<tensor>*> in;
  for (auto& r : reqs) in.push_back(&r);
  auto a = (*one)->execute(m, in);
  auto b = (*three)->execute(m, in);
  ASSERT_EQ(a.error, "");
  ASSERT_EQ(b.error, "");
  ASSERT_EQ(b.failed.size(), reqs.size());
  EXPECT_EQ(b.failed, a.failed);
  EXPECT_NE(b.failed[7].find("JPEG"), std::string::npos) << b.failed[7];
  ASSERT_EQ(b.outputs.size(), a.outputs.size());
  for (size_t i = 0; i < reqs.size(); ++i) {
    if (i == 7) continue;
    auto x = floats(a.outputs[i][0].data), y = floats(b.outputs[i][0].data);
    ASSERT_EQ(x.size(), y.size());
    for (size_t k = 0; k < x.size(); ++k)
      EXPECT_NEAR(y[k], x[k], 1e-5 * std::max(1.0f, std::abs(x[k]))) << i << " " << k;
  }
}

// Reduced precision: the module runs in bfloat16 (half on cuda), inputs are cast on the device
// and outputs come back in the declared float32, close to PyTorch's float32 reference.
TEST_P(torch_executor_kinds, reduced_precision_keeps_the_declared_dtypes) {
  auto m = tiny_mlp();
  m.precision = ex->kind() == device_kind::cuda ? precision::fp16 : precision::bf16;
  auto reqs = reference_requests(m, "tiny_mlp");
  std::vector<const std::vector<tensor>*> in;
  for (auto& r : reqs) in.push_back(&r);
  auto out = ex->execute(m, in);
  ASSERT_EQ(out.error, "");
  auto want = floats(read_file(dir + "/tiny_mlp.output.bin"));
  auto per = want.size() / reqs.size();
  for (size_t i = 0; i < reqs.size(); ++i) {
    EXPECT_EQ(out.outputs[i][0].type, dtype::float32);
    auto got = floats(out.outputs[i][0].data);
    ASSERT_EQ(got.size(), per);
    for (size_t k = 0; k < per; ++k)
      EXPECT_NEAR(got[k], want[i * per + k], 0.05 * std::max(1.0f, std::abs(want[i * per + k])));
  }
  if (ex->kind() == device_kind::cpu) {
    auto half = tiny_mlp();
    half.name = "tiny_mlp_fp16";
    half.precision = precision::fp16;
    EXPECT_NE(ex->load(half).error().find("precision fp16 needs a cuda device"), std::string::npos);
  }
}

TEST(torch_executor, cuda_kind_says_why_it_is_unavailable_here) {
  std::string err;
  auto ex = make_executor(device_kind::cuda, 0, 1);
  if (ex) GTEST_SKIP() << "this machine has a GPU";
  EXPECT_NE(ex.error().find("cuda"), std::string::npos) << ex.error();
}

}  // namespace
}  // namespace sloserve
