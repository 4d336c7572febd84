// Clients' GPU memory as regions (Triton's CUDA shared-memory extension), on a stand-in for the
// CUDA runtime whose "device memory" is host buffers: a handle is opened on its device, an input
// is copied out once (counted), an output copied in, regions share one namespace with system ones
// but are listed and unregistered by kind, and a handle is closed only once no request holds it.

#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <string>

#include "ingress/shm_regions.hpp"
#include "pipelines/copy_tally.hpp"
#include "tests/ingress/fake_gpu.hpp"

namespace sloserve::shm {
namespace {

std::string why(const status& s) {
  return s ? std::string("accepted") : s.error();
}

TEST(cuda_regions, an_input_is_copied_out_of_the_gpu_once_and_an_output_into_it) {
  auto gpu = std::make_shared<fake_gpu>();
  auto& buf = gpu->buffers[1];
  buf.resize(4096);
  for (size_t i = 0; i < buf.size(); ++i) buf[i] = static_cast<char>(i % 251);
  std::map<std::string, int> seen;
  registry r(true, 8, [&](std::string_view what) { seen[std::string(what)]++; });
  r.set_device_memory(gpu);
  EXPECT_EQ(r.cuda_unavailable(), "");
  ASSERT_TRUE(r.add_cuda("", "gpu-in", gpu->handle_of(1), 1, 4096));
  EXPECT_EQ(gpu->opened, 1);

  auto before = copy_tally::total();
  auto t = r.read_tensor("", "x", dtype::float32, {2, 4}, {"gpu-in", 100, 32});
  ASSERT_TRUE(t) << t.error();
  EXPECT_EQ(copy_tally::total() - before, 32u) << "one copy, from the device into the tensor's own bytes";
  for (size_t i = 0; i < 32; ++i) EXPECT_EQ(t->data[i], static_cast<char>((100 + i) % 251));
  buf[100] = 'z';
  EXPECT_NE(t->data[0], 'z') << "the tensor holds its copy, not the client's memory";

  auto w = r.write("", {"gpu-in", 2000, 8});
  ASSERT_TRUE(w) << w.error();
  EXPECT_EQ(w->data, nullptr);
  ASSERT_TRUE(w->put("abcdefgh"));
  EXPECT_EQ(std::string(buf.data() + 2000, 8), "abcdefgh");
  EXPECT_NE(why(w->put("123456789")).find("more than the window's 8"), std::string::npos);

  auto listed = r.list("", "", kind::cuda);
  ASSERT_TRUE(listed);
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ((*listed)[0].name, "gpu-in");
  EXPECT_EQ((*listed)[0].device, 1);
  EXPECT_EQ((*listed)[0].byte_size, 4096u);
  EXPECT_TRUE(r.list("", "", kind::system)->empty()) << "system status lists no cuda region";
  EXPECT_EQ(seen["registered"], 1);
  EXPECT_EQ(seen["read"], 1);
  EXPECT_EQ(seen["written"], 1);
}

TEST(cuda_regions, both_kinds_share_one_namespace_and_are_unregistered_by_kind) {
  auto gpu = std::make_shared<fake_gpu>();
  gpu->buffers[1].resize(64);
  gpu->buffers[2].resize(64);
  registry r(true, 8);
  r.set_device_memory(gpu);
  ASSERT_TRUE(r.add_cuda("", "a", gpu->handle_of(1), 0, 64));
  EXPECT_NE(why(r.add_cuda("", "a", gpu->handle_of(2), 0, 64)).find("already registered"), std::string::npos);
  EXPECT_NE(why(r.add("", "a", "/sloserve-none", 0, 8)).find("already registered"), std::string::npos);
  EXPECT_NE(why(r.remove("", "a", kind::system)).find("no region 'a' is registered"), std::string::npos);
  EXPECT_FALSE(r.list("", "a", kind::system));
  ASSERT_TRUE(r.add_cuda("", "b", gpu->handle_of(2), 0, 64));
  ASSERT_TRUE(r.remove("", "", kind::system));
  EXPECT_EQ(r.size(), 2u) << "unregistering every system region leaves the cuda ones";
  ASSERT_TRUE(r.remove("", "a", kind::cuda));
  EXPECT_EQ(gpu->closed, 1);
  ASSERT_TRUE(r.remove("", "", kind::cuda));
  EXPECT_EQ(r.size(), 0u);
  EXPECT_EQ(gpu->closed, 2);
}

TEST(cuda_regions, bad_handles_devices_sizes_and_owners_are_refused_with_the_reason) {
  auto gpu = std::make_shared<fake_gpu>();
  gpu->buffers[1].resize(64);
  std::map<std::string, int> seen;
  registry r(true, 8, [&](std::string_view what) { seen[std::string(what)]++; });
  r.set_device_memory(gpu);
  EXPECT_NE(why(r.add_cuda("", "x", "short", 0, 64)).find("raw_handle has 5 bytes"), std::string::npos);
  EXPECT_NE(why(r.add_cuda("", "x", gpu->handle_of(9), 0, 64)).find("region 'x': cudaIpcOpenMemHandle"),
            std::string::npos);
  EXPECT_NE(why(r.add_cuda("", "x", gpu->handle_of(1), 5, 64)).find("no device 5"), std::string::npos);
  EXPECT_NE(why(r.add_cuda("", "x", gpu->handle_of(1), -1, 64)).find("device_id -1"), std::string::npos);
  EXPECT_NE(why(r.add_cuda("", "x", gpu->handle_of(1), 0, 0)).find("more than 0"), std::string::npos);
  EXPECT_NE(why(r.add_cuda("", "", gpu->handle_of(1), 0, 8)).find("1 to 256"), std::string::npos);
  EXPECT_EQ(seen["refused"], 6);
  EXPECT_EQ(gpu->opened, 0);
  ASSERT_TRUE(r.add_cuda("key:A", "x", gpu->handle_of(1), 0, 64));
  EXPECT_FALSE(r.read("key:B", {"x", 0, 8})) << "another client sees no region of A's";
  EXPECT_FALSE(r.remove("key:B", "x", kind::cuda));
  auto past = r.read("key:A", {"x", 60, 8});
  ASSERT_FALSE(past);
  EXPECT_NE(past.error().find("past its 64 bytes"), std::string::npos) << past.error();
  gpu->fail_copies = true;
  auto broken = r.read("key:A", {"x", 0, 8});
  ASSERT_FALSE(broken);
  EXPECT_NE(broken.error().find("CUDA shared-memory region 'x': cudaMemcpy"), std::string::npos) << broken.error();
}

TEST(cuda_regions, a_handle_is_closed_once_no_request_holds_its_region) {
  auto gpu = std::make_shared<fake_gpu>();
  gpu->buffers[1].resize(64);
  registry r(true, 8);
  r.set_device_memory(gpu);
  ASSERT_TRUE(r.add_cuda("", "out", gpu->handle_of(1), 0, 64));
  auto w = r.write("", {"out", 0, 4});
  ASSERT_TRUE(w);
  ASSERT_TRUE(r.remove("", "out", kind::cuda));
  EXPECT_EQ(gpu->closed, 0) << "a request's output window keeps the handle open";
  ASSERT_TRUE(w->put("done"));
  EXPECT_EQ(std::string(gpu->buffers[1].data(), 4), "done");
  *w = window{};
  EXPECT_EQ(gpu->closed, 1);
}

TEST(cuda_regions, a_node_that_cannot_map_gpu_memory_says_why) {
  registry off(false, 8);
  EXPECT_EQ(off.cuda_unavailable(), off_reason);
  registry none(true, 8);
  EXPECT_NE(none.cuda_unavailable().find("no CUDA runtime"), std::string::npos) << none.cuda_unavailable();
  auto gpu = std::make_shared<fake_gpu>();
  gpu->why_not = "no CUDA device (libcudart.so.12 sees none)";
  none.set_device_memory(gpu);
  auto why_not = none.cuda_unavailable();
  EXPECT_EQ(
      why_not.rfind("CUDA shared memory is unavailable on this node: no CUDA device (libcudart.so.12 sees none)", 0),
      0u)
      << why_not;
  EXPECT_NE(why_not.find("/v2/systemsharedmemory"), std::string::npos) << why_not;
  EXPECT_EQ(why(none.add_cuda("", "x", std::string(64, '\0'), 0, 8)), why_not);
  EXPECT_EQ(none.size(), 0u);
}

}  // namespace
}  // namespace sloserve::shm
