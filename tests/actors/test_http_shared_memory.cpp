// Triton's shared-memory calls over HTTP (actors/http_shared_memory): the routes, and the CUDA
// register, status and unregister bodies as Triton's clients send and read them, on a stand-in
// for the CUDA runtime.

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "actors/http_shared_memory.hpp"
#include "ingress/shm_regions.hpp"
#include "tests/ingress/fake_gpu.hpp"

namespace sloserve::http {
namespace {

using json = nlohmann::json;

request post(const std::string& path, const std::string& body = "") {
  return {"POST", path, body, "127.0.0.1", {}};
}
response call(shm::registry* r, const request& q) {
  auto route = shared_memory_path(q.path);
  EXPECT_TRUE(route) << q.path;
  return route ? shared_memory_call(r, "", q, *route) : response{404, "", "text/plain", {}};
}

TEST(http_shared_memory, routes_name_the_kind_the_region_and_the_call) {
  auto r = shared_memory_path("/v2/cudasharedmemory/region/a b/register");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->kind, "cuda");
  EXPECT_EQ(r->region, "a b");
  EXPECT_EQ(r->what, "register");
  EXPECT_TRUE(shared_memory_path("/v2/systemsharedmemory/status"));
  EXPECT_FALSE(shared_memory_path("/v2/cudasharedmemory/register")) << "register needs a region";
  EXPECT_FALSE(shared_memory_path("/v2/cudasharedmemory/region/a/delete"));
}

TEST(http_shared_memory, cuda_regions_are_registered_listed_and_unregistered_as_tritons_clients_do) {
  auto gpu = std::make_shared<fake_gpu>();
  gpu->buffers[3].resize(1024);
  shm::registry regions(true, 8);
  regions.set_device_memory(gpu);
  // tritonclient.utils.cuda_shared_memory: {"raw_handle": {"b64": ...}, "device_id", "byte_size"}.
  // The handle of buffer 3: byte 0 is 3, the other 63 are 0: "Aw" then 84 'A's and "==".
  std::string b64 = "Aw" + std::string(84, 'A') + "==";
  json body = {{"raw_handle", {{"b64", b64}}}, {"device_id", 1}, {"byte_size", 1024}};
  auto added = call(&regions, post("/v2/cudasharedmemory/region/frames/register", body.dump()));
  EXPECT_EQ(added.status, 200) << added.body;
  EXPECT_EQ(gpu->opened, 1);
  auto listed = call(&regions, {"GET", "/v2/cudasharedmemory/status", "", "", {}});
  ASSERT_EQ(listed.status, 200);
  EXPECT_EQ(json::parse(listed.body), json::parse(R"([{"name":"frames","device_id":1,"byte_size":1024}])"));
  EXPECT_EQ(json::parse(call(&regions, {"GET", "/v2/systemsharedmemory/status", "", "", {}}).body), json::array());

  auto refused = [&](const std::string& path, const json& b, const std::string& why) {
    auto res = call(&regions, post(path, b.is_null() ? "{" : b.dump()));
    EXPECT_EQ(res.status, 400) << b;
    EXPECT_NE(res.body.find(why), std::string::npos) << res.body;
  };
  refused("/v2/cudasharedmemory/region/x/register", nullptr, "must be a JSON object");
  refused("/v2/cudasharedmemory/region/x/register", {{"raw_handle", b64}, {"device_id", 0}, {"byte_size", 8}},
          "needs \\\"raw_handle\\\": {\\\"b64\\\"");
  refused("/v2/cudasharedmemory/region/x/register",
          {{"raw_handle", {{"b64", "not base64!"}}}, {"device_id", 0}, {"byte_size", 8}}, "is not base64");
  refused("/v2/cudasharedmemory/region/x/register", {{"raw_handle", {{"b64", b64}}}, {"byte_size", 8}},
          "needs \\\"device_id\\\"");
  refused("/v2/cudasharedmemory/region/x/register",
          {{"raw_handle", {{"b64", "AAAA"}}}, {"device_id", 0}, {"byte_size", 8}}, "raw_handle has 3 bytes");
  refused("/v2/cudasharedmemory/region/frames/register", body, "already registered");
  refused("/v2/systemsharedmemory/region/frames/unregister", json::object(), "no region 'frames'");

  EXPECT_EQ(call(&regions, post("/v2/cudasharedmemory/region/frames/unregister")).status, 200);
  EXPECT_EQ(gpu->closed, 1);
  EXPECT_EQ(json::parse(call(&regions, {"GET", "/v2/cudasharedmemory/status", "", "", {}}).body), json::array());
}

TEST(http_shared_memory, every_cuda_call_says_why_where_gpu_memory_cannot_be_mapped) {
  shm::registry regions(true, 8);
  auto gpu = std::make_shared<fake_gpu>();
  gpu->why_not = "no CUDA device (libcudart.so.13: cudaGetDeviceCount: no CUDA-capable device is detected (100))";
  regions.set_device_memory(gpu);
  for (auto* path :
       {"/v2/cudasharedmemory/status", "/v2/cudasharedmemory/region/x/register", "/v2/cudasharedmemory/unregister"}) {
    auto res = call(&regions, post(path, "{}"));
    EXPECT_EQ(res.status, 400);
    EXPECT_NE(res.body.find("CUDA shared memory is unavailable on this node: no CUDA device"), std::string::npos)
        << res.body;
  }
  auto off = call(nullptr, post("/v2/cudasharedmemory/status"));
  EXPECT_NE(off.body.find("runtime.client_shared_memory"), std::string::npos) << off.body;
}

}  // namespace
}  // namespace sloserve::http
