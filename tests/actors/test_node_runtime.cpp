// One real node (ZeroMQ + Cap'n Proto + CAF) on an ephemeral loopback port, driven by a raw
// DEALER: malformed frames are answered with ERROR and the node keeps serving.

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>
#include <zmq.h>

#include <atomic>
#include <cstring>
#include <fstream>
#include <functional>
#include <random>
#include <set>
#include <thread>

#include "actors/node_runtime.hpp"
#include "gpu/executor.hpp"
#include "messages/codec.hpp"
#include "pipelines/query_walk.hpp"
#include "tests/jpeg_writer.hpp"

namespace sloserve {
namespace {

struct raw_client {
  explicit raw_client(const std::string& ep) {
    ctx = zmq_ctx_new();
    sock = zmq_socket(ctx, ZMQ_DEALER);
    int zero = 0;
    zmq_setsockopt(sock, ZMQ_LINGER, &zero, sizeof zero);
    zmq_connect(sock, ep.c_str());
  }
  ~raw_client() {
    zmq_close(sock);
    zmq_ctx_term(ctx);
  }
  void send(const std::string& f) { zmq_send(sock, f.data(), f.size(), 0); }
  std::optional<msg::envelope> recv(int timeout_ms = 5000) {
    zmq_pollitem_t it{sock, 0, ZMQ_POLLIN, 0};
    if (zmq_poll(&it, 1, timeout_ms) <= 0) return std::nullopt;
    zmq_msg_t m;
    zmq_msg_init(&m);
    zmq_msg_recv(&m, sock, 0);
    auto d = msg::decode({static_cast<char*>(zmq_msg_data(&m)), zmq_msg_size(&m)}, msg::decode_limits{});
    zmq_msg_close(&m);
    return d.value;
  }
  void* ctx;
  void* sock;
};

struct node_fixture : ::testing::Test {
  // The embedded default configuration on one node, `adjust`ed.
  explicit node_fixture(const std::function<void(cluster_config&)>& adjust = {}) {
    auto r = default_config();
    auto cfg = std::make_shared<cluster_config>(single_node(*r.config));
    cfg->nodes[0].address = "tcp://127.0.0.1:0";
    cfg->runtime.max_payload_bytes = 64 * 1024;
    if (adjust) adjust(*cfg);
    cfg_ = cfg;
    node = std::make_unique<node_runtime>(cfg_, "local");
    auto started = node->start();
    EXPECT_TRUE(started) << started.error();
    client = std::make_unique<raw_client>(node->endpoint());
    for (uint64_t t = 1; t < 200; ++t) {  // until the controller has published routing
      client->send(msg::encode({{}, msg::status_request{t}}));
      auto e = client->recv(200);
      if (e && std::get<msg::status_reply>(e->content).ready) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  msg::client_request valid(uint64_t id) {
    auto& m = *cfg_->find_model("detector");
    return {"traffic", id, {make_tensor(m.input, id, "image")}, -1};
  }
  msg::client_reply reply() {
    auto e = client->recv();
    EXPECT_TRUE(e);
    if (!e) return {};
    return std::get<msg::client_reply>(e->content);
  }
  std::shared_ptr<const cluster_config> cfg_;
  std::unique_ptr<node_runtime> node;
  std::unique_ptr<raw_client> client;
};

TEST_F(node_fixture, serves_a_valid_request) {
  client->send(msg::encode({{}, valid(1)}));
  auto r = reply();
  EXPECT_EQ(r.request_id, 1u);
  EXPECT_EQ(r.code, msg::status::ok) << r.reason;
  EXPECT_EQ(r.outputs.size(), 2u);  // fanout 2 of the default traffic pipeline
}

// The default pipeline with its classify stage fanning out on the detector's rows scoring above
// 0.75 (column 0 of its float32 [8, 6] output).
struct items_fixture : node_fixture {
  items_fixture()
      : node_fixture([](cluster_config& c) {
          auto& p = c.pipelines[0];
          p.stages[1].items = output_items{"output", 0.75, 0, 2.0};
          EXPECT_TRUE(resolve(p, c.models).empty());
        }) {}
};

// On emulated devices a detector's scores derive from its input: each request gets exactly as
// many classify results as its detector output has rows above the score, and the count varies
// from input to input.
TEST_F(items_fixture, an_emulated_detectors_rows_above_the_score_decide_each_requests_fan_out) {
  auto& det = *cfg_->find_model("detector");
  auto emulated = make_emulated_executor(1);
  std::set<size_t> counts;
  size_t total = 0;
  for (uint64_t id = 1; id <= 30; ++id) {
    auto request = valid(id);
    const std::vector<tensor>& in = request.inputs;
    auto ran = emulated->execute(det, {&in});
    ASSERT_EQ(ran.outputs.size(), 1u);
    auto& rows = ran.outputs[0].at(0);
    size_t above = 0;
    for (int64_t r = 0; r < 8; ++r) {
      float score = 0;
      std::memcpy(&score, rows.data.data() + r * 6 * sizeof(float), sizeof score);
      above += score > 0.75f;
    }
    client->send(msg::encode({{}, request}));
    auto reply_to = reply();
    ASSERT_EQ(reply_to.code, msg::status::ok) << reply_to.reason;
    EXPECT_EQ(reply_to.outputs.size(), above) << "request " << id;
    counts.insert(above);
    total += above;
  }
  EXPECT_GE(counts.size(), 3u) << "the count follows the input";
  EXPECT_NEAR(static_cast<double>(total) / 30, 2.0, 0.8) << "a quarter of 8 rows on average";
}

// A cascade under `skew` (Windowed ε-Greedy): an oracle of 100 classes and a compact model that
// answers nine in ten itself, replacing the default pipeline.
struct skew_fixture : node_fixture {
  skew_fixture()
      : node_fixture([](cluster_config& c) {
          auto r = parse_cluster_config(R"(nodes:
  - {name: local, address: tcp://127.0.0.1:0, roles: [controller, frontend, worker], devices: [{kind: emulated, count: 2}]}
models:
  - {name: compact, input: {dtype: float32, shape: [8]}, output: {dtype: float32, shape: [100]}, max_batch: 8,
     profile: {alpha_ms: 0.1, beta_ms: 0.5}, pass_rate: 0.9, accuracy: 60}
  - {name: oracle, input: {dtype: float32, shape: [8]}, output: {dtype: float32, shape: [100]}, max_batch: 8,
     profile: {alpha_ms: 0.5, beta_ms: 2}, accuracy: 70}
pipelines:
  - {name: frames, slo_ms: 200, stages: [{name: s, cascade: {models: [compact, oracle],
      skew: {window: 10, epsilon: 0, classes: [1, 10], a_in: [0.95, 0.9], e_in_out: [0.02, 0.05], a_out: [0.5, 0.5]}}}]}
)",
                                        "skew.yaml");
          ASSERT_TRUE(r) << r.error_text();
          c.models = r.config->models;
          c.pipelines = r.config->pipelines;
        }) {}
  // The models that answered request `id` on `input`, in order.
  std::vector<std::string> ran(uint64_t id, const tensor& input) {
    client->send(msg::encode({{}, msg::client_request{"frames", id, {input}, -1}}));
    auto r = reply();
    EXPECT_EQ(r.code, msg::status::ok) << r.reason;
    std::vector<std::string> out;
    for (auto& t : r.timings) out.push_back(t.model);
    return out;
  }
};

// The oracle alone answers while its classes are spread (random frames); a stream of two frames
// over and over (two classes) takes the stage to the cascade, whose compact model then answers
// first; random frames again bring the oracle back alone. (That a compact model answering the
// dominant classes keeps the cascade is scheduling/specialization's test.)
TEST_F(skew_fixture, a_cascade_under_skew_runs_only_while_a_few_classes_dominate) {
  tensor_spec spec{dtype::float32, {8}};
  uint64_t id = 1;
  using models = std::vector<std::string>;
  for (int k = 0; k < 12; ++k, ++id) EXPECT_EQ(ran(id, make_tensor(spec, 1000 + id, "x")), models{"oracle"}) << id;
  auto a = make_tensor(spec, 1, "x"), b = make_tensor(spec, 2, "x");
  int until = 0;
  for (; until < 30; ++until, ++id)
    if (ran(id, until % 2 ? a : b).front() == "compact") break;
  EXPECT_LT(until, 12) << "within a window's worth of skewed frames";
  // The emulated compact model's own answers are classes of its own, not the oracle's dominant
  // two: the skew the cascade measures falls, the epoch ends, a window of the oracle finds the
  // skew again, and so on.
  int compact_first = 0;
  for (int k = 0; k < 60; ++k, ++id) compact_first += ran(id, k % 2 ? a : b).front() == "compact";
  EXPECT_GT(compact_first, 10);
  EXPECT_LT(compact_first, 50);
  // Random frames lower the skew over the epoch's last w samples (w grows as windows fold
  // into an epoch) until the estimate falls below the oracle's.
  int back = 0;
  for (; back < 100; ++back, ++id)
    if (ran(id, make_tensor(spec, 5000 + id, "x")) == models{"oracle"}) break;
  EXPECT_LT(back, 60) << "random frames end the epoch";
  for (int k = 0; k < 5; ++k, ++id) EXPECT_EQ(ran(id, make_tensor(spec, 9000 + id, "x")), models{"oracle"});
}

TEST_F(node_fixture, malformed_frames_get_errors_and_the_node_keeps_serving) {
  client->send("garbage");  // not whole words
  auto a = reply();
  EXPECT_EQ(a.code, msg::status::error);
  EXPECT_NE(a.reason.find("malformed"), std::string::npos) << a.reason;

  auto frame = msg::encode({{}, valid(2)});
  client->send(frame.substr(0, 64));  // truncated
  auto b = reply();
  EXPECT_EQ(b.code, msg::status::error);

  auto wrong_bytes = valid(3);
  wrong_bytes.inputs[0].data.resize(100);
  client->send(msg::encode({{}, wrong_bytes}));
  auto c = reply();
  EXPECT_EQ(c.request_id, 3u);
  EXPECT_NE(c.reason.find("bytes but carries 100"), std::string::npos) << c.reason;

  auto oversize = valid(4);
  oversize.inputs[0] = make_tensor({dtype::uint8, {100 * 1024}}, 1);
  client->send(msg::encode({{}, oversize}));
  auto d = reply();
  EXPECT_EQ(d.request_id, 4u);
  EXPECT_NE(d.reason.find("max_payload_bytes"), std::string::npos) << d.reason;

  auto wrong_shape = valid(5);
  wrong_shape.inputs[0] = make_tensor({dtype::float32, {3, 32, 32}}, 1);
  client->send(msg::encode({{}, wrong_shape}));
  auto e = reply();
  EXPECT_EQ(e.request_id, 5u);
  EXPECT_NE(e.reason.find("does not match the model's declared input"), std::string::npos) << e.reason;

  // Well-formed Cap'n Proto whose root is a list of bytes, not an Envelope.
  std::string wrong_schema("\0\0\0\0\2\0\0\0", 8);
  uint64_t list_ptr = 1 | (uint64_t{2} << 32) | (uint64_t{8} << 35);
  wrong_schema.append(reinterpret_cast<const char*>(&list_ptr), 8).append("abcdefgh");
  client->send(wrong_schema);
  auto f = reply();
  EXPECT_EQ(f.code, msg::status::error);
  EXPECT_NE(f.reason.find("malformed"), std::string::npos) << f.reason;

  // A control message from a client (no cluster node by that name) is ignored, not applied:
  // this empty routing table would leave the frontend nowhere to send request 7.
  client->send(msg::encode({"mallory", msg::routing_table{1u << 30, {}, {}}}));

  auto unknown = valid(6);
  unknown.pipeline = "nope";
  client->send(msg::encode({{}, unknown}));
  EXPECT_NE(reply().reason.find("unknown pipeline"), std::string::npos);

  client->send(msg::encode({{}, valid(7)}));
  auto ok = reply();
  EXPECT_EQ(ok.request_id, 7u);
  EXPECT_EQ(ok.code, msg::status::ok) << ok.reason;
}

// A POSIX shared-memory object that holds `data` at `offset`, as a client on the node's host
// makes one; unlinked at the end.
struct client_object {
  std::string key;
  client_object(const std::string& data, size_t offset, const std::string& tag) {
    key = "/sloserve-node-test-" + std::to_string(getpid()) + "-" + tag;
    int fd = shm_open(key.c_str(), O_CREAT | O_RDWR | O_TRUNC, 0600);
    EXPECT_GE(fd, 0);
    EXPECT_EQ(ftruncate(fd, static_cast<off_t>(offset + data.size())), 0);
    EXPECT_EQ(pwrite(fd, data.data(), data.size(), static_cast<off_t>(offset)), static_cast<ssize_t>(data.size()));
    close(fd);
  }
  ~client_object() { shm_unlink(key.c_str()); }
};

// The default node with runtime.client_shared_memory on (or `on` false: off, as shipped).
struct shm_fixture : node_fixture {
  explicit shm_fixture(bool on = true)
      : node_fixture([on](cluster_config& c) { c.runtime.client_shared_memory = on; }) {}
  msg::shared_memory_reply call(msg::shared_memory_op op, std::string name, std::string key = {}, uint64_t offset = 0,
                                uint64_t size = 0) {
    msg::shared_memory_request rq;
    rq.token = ++token;
    rq.op = op;
    rq.name = std::move(name);
    rq.key = std::move(key);
    rq.offset = offset;
    rq.byte_size = size;
    rq.pid = static_cast<uint32_t>(getpid());
    client->send(msg::encode({{}, rq}));
    auto e = client->recv();
    EXPECT_TRUE(e);
    if (!e) return {};
    auto r = std::get<msg::shared_memory_reply>(e->content);
    EXPECT_EQ(r.token, token);
    return r;
  }
  // Request `id` whose detector input lies at `offset` of region `region` (`size` bytes).
  msg::client_request shared(uint64_t id, const std::string& region, uint64_t offset, uint64_t size) {
    auto& m = *cfg_->find_model("detector");
    msg::client_request r{"traffic", id, {}, -1};
    r.shm_inputs.push_back({"image", m.input.type, m.input.shape, region, offset, size});
    return r;
  }
  uint64_t token = 0;
};
struct shm_off_fixture : shm_fixture {
  shm_off_fixture() : shm_fixture(false) {}
};

// A client on the node's host registers a region and sends requests that name it: they are
// served from the region's bytes, as the same bytes sent over the socket are.
TEST_F(shm_fixture, a_request_whose_input_lies_in_a_registered_region_is_served_from_its_bytes) {
  auto by_socket = valid(5);
  auto& bytes_in = by_socket.inputs[0].data;
  client_object obj(bytes_in.str(), 4096 + 3, "served");
  auto added = call(msg::shared_memory_op::add, "frames", obj.key, 4096, bytes_in.size() + 3);
  ASSERT_TRUE(added.ok) << added.reason;
  auto listed = call(msg::shared_memory_op::status, "");
  ASSERT_TRUE(listed.ok);
  ASSERT_EQ(listed.regions.size(), 1u);
  EXPECT_EQ(listed.regions[0].name, "frames");
  EXPECT_EQ(listed.regions[0].key, obj.key);

  client->send(msg::encode({{}, by_socket}));
  auto a = reply();
  ASSERT_EQ(a.code, msg::status::ok) << a.reason;
  client->send(msg::encode({{}, shared(6, "frames", 3, bytes_in.size())}));
  auto b = reply();
  ASSERT_EQ(b.code, msg::status::ok) << b.reason;
  EXPECT_EQ(b.request_id, 6u);
  ASSERT_EQ(a.outputs.size(), b.outputs.size());
  for (size_t i = 0; i < a.outputs.size(); ++i)
    EXPECT_EQ(a.outputs[i].data, b.outputs[i].data) << "emulated outputs derive from the input's bytes";
  // Another region's bytes give other outputs: the node read the region, not a cached input.
  client->send(msg::encode({{}, shared(7, "frames", 0, bytes_in.size())}));
  auto c = reply();
  ASSERT_EQ(c.code, msg::status::ok) << c.reason;
  EXPECT_NE(a.outputs[0].data, c.outputs[0].data);
}

TEST_F(shm_fixture, bad_regions_offsets_and_sizes_get_errors_and_the_node_keeps_serving) {
  auto size = valid(1).inputs[0].data.size();
  client_object obj(std::string(size, 'x'), 0, "bad");
  EXPECT_NE(call(msg::shared_memory_op::add, "r", "/sloserve-none-such", 0, 10).reason.find("cannot open"),
            std::string::npos);
  EXPECT_NE(call(msg::shared_memory_op::add, "r", obj.key, 0, size + 1).reason.find("past the end"), std::string::npos);
  ASSERT_TRUE(call(msg::shared_memory_op::add, "r", obj.key, 0, size).ok);
  EXPECT_NE(call(msg::shared_memory_op::add, "r", obj.key, 0, size).reason.find("already registered"),
            std::string::npos);

  client->send(msg::encode({{}, shared(2, "nope", 0, size)}));
  auto a = reply();
  EXPECT_EQ(a.request_id, 2u);
  EXPECT_EQ(a.code, msg::status::error);
  EXPECT_NE(a.reason.find("no shared-memory region 'nope'"), std::string::npos) << a.reason;
  client->send(msg::encode({{}, shared(3, "r", 8, size)}));
  auto b = reply();
  EXPECT_NE(b.reason.find("past its"), std::string::npos) << b.reason;
  client->send(msg::encode({{}, shared(4, "r", 0, size - 4)}));
  auto c = reply();
  EXPECT_NE(c.reason.find("is not the " + std::to_string(size) + " bytes"), std::string::npos) << c.reason;

  ASSERT_TRUE(call(msg::shared_memory_op::remove, "r").ok);
  EXPECT_FALSE(call(msg::shared_memory_op::status, "r").ok);
  client->send(msg::encode({{}, shared(5, "r", 0, size)}));
  EXPECT_NE(reply().reason.find("no shared-memory region 'r'"), std::string::npos);

  client->send(msg::encode({{}, valid(6)}));
  auto ok = reply();
  EXPECT_EQ(ok.request_id, 6u);
  EXPECT_EQ(ok.code, msg::status::ok) << ok.reason;
}

TEST_F(shm_off_fixture, a_node_with_shared_memory_off_refuses_regions_and_requests_that_name_them) {
  auto size = valid(1).inputs[0].data.size();
  client_object obj(std::string(size, 'x'), 0, "off");
  auto added = call(msg::shared_memory_op::add, "r", obj.key, 0, size);
  EXPECT_FALSE(added.ok);
  EXPECT_NE(added.reason.find("runtime.client_shared_memory"), std::string::npos) << added.reason;
  client->send(msg::encode({{}, shared(2, "r", 0, size)}));
  auto a = reply();
  EXPECT_EQ(a.code, msg::status::error);
  EXPECT_NE(a.reason.find("runtime.client_shared_memory"), std::string::npos) << a.reason;
}

// A one-node cluster with a cpu device running tiny_mlp.pt, ready to serve.
struct cpu_node {
  std::string dir = SLOSERVE_MODELS_DIR;
  std::unique_ptr<node_runtime> node;
  std::unique_ptr<raw_client> client;

  void start(std::string profile = ", profile: {alpha_ms: 0.05, beta_ms: 0.5}") {
    start_with(
        "models:\n  - {name: mlp, path: " + dir +
        "/tiny_mlp.pt, input: {dtype: float32, shape: [16]}, output: {dtype: float32, shape: [4]}, max_batch: 8" +
        profile + "}\npipelines:\n  - {name: p, slo_ms: 100, stages: [{name: s, model: mlp}]}\n");
  }
  // `models_and_pipelines`: the file's models: and pipelines: sections.
  void start_with(const std::string& models_and_pipelines) {
    auto r = parse_cluster_config(
        R"(nodes:
  - {name: local, address: "tcp://127.0.0.1:0", roles: [controller, frontend, worker], devices: [{kind: cpu, count: 1, threads: 1}]}
)" + models_and_pipelines,
        "cpu.yaml");
    ASSERT_TRUE(r) << r.error_text();
    node = std::make_unique<node_runtime>(std::make_shared<const cluster_config>(std::move(*r.config)), "local");
    auto started = node->start();
    ASSERT_TRUE(started) << started.error();
    client = std::make_unique<raw_client>(node->endpoint());
    bool ready = false;
    // Ready once the worker has loaded and warmed the model: poll for up to about 10 s.
    for (uint64_t t = 1; t < 500 && !ready; ++t) {
      client->send(msg::encode({{}, msg::status_request{t}}));
      auto e = client->recv(200);
      ready = e && std::get<msg::status_reply>(e->content).ready;
      if (!ready) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    ASSERT_TRUE(ready);
  }
};

// A cascade of two real tiny classifiers (tiny_v0, then tiny_v1: float32[16] -> 3 classes): its
// answer is the second model's output exactly wherever the first one's top softmax probability
// was below the confidence, and the first's elsewhere; the reply names the model that answered.
TEST(node_runtime_cpu, a_cascade_answers_with_its_second_model_wherever_its_first_is_unsure) {
  if (!torch_available()) GTEST_SKIP() << "built without LibTorch";
  cpu_node n;
  auto model = [&](const char* name, const char* file) {
    return std::string("  - {name: ") + name + ", path: " + n.dir + "/" + file +
           ", input: {dtype: float32, shape: [16]}, output: {dtype: float32, shape: [3]}, max_batch: 8,"
           " profile: {alpha_ms: 0.05, beta_ms: 0.5}}\n";
  };
  ASSERT_NO_FATAL_FAILURE(
      n.start_with("models:\n" + model("small", "tiny_v0.pt") + model("big", "tiny_v1.pt") + R"(pipelines:
  - {name: cascade, slo_ms: 500, stages: [{name: s, cascade: {models: [small, big], confidence: 0.6}}]}
  - {name: small, slo_ms: 500, stages: [{name: s, model: small}]}
  - {name: big, slo_ms: 500, stages: [{name: s, model: big}]}
)"));
  std::mt19937_64 rng(3);
  std::normal_distribution<float> normal(0, 3);
  uint64_t id = 1;
  auto call = [&](const std::string& pipeline, const std::string& input) {
    n.client->send(
        msg::encode({{}, msg::client_request{pipeline, id++, {tensor{"x", dtype::float32, {16}, input}}, -1}}));
    auto e = n.client->recv();
    EXPECT_TRUE(e);
    auto reply = std::get<msg::client_reply>(e->content);
    EXPECT_EQ(reply.code, msg::status::ok) << reply.reason;
    return reply;
  };
  auto floats = [](const tensor& t) {
    std::vector<float> v(t.data.size() / 4);
    std::memcpy(v.data(), t.data.data(), t.data.size());
    return v;
  };
  int unsure = 0, total = 40;
  for (int k = 0; k < total; ++k) {
    std::vector<float> x(16);
    for (auto& v : x) v = normal(rng);
    std::string input(64, '\0');
    std::memcpy(input.data(), x.data(), 64);
    auto small = call("small", input), big = call("big", input), cascade = call("cascade", input);
    ASSERT_EQ(cascade.outputs.size(), 1u);
    bool falls = least_top_probability(small.outputs.at(0)) < 0.6;
    unsure += falls;
    ASSERT_FALSE(cascade.timings.empty());
    EXPECT_EQ(cascade.timings.back().model, falls ? "big" : "small");
    EXPECT_EQ(cascade.timings.size(), falls ? 2u : 1u);
    auto want = floats((falls ? big : small).outputs.at(0)), got = floats(cascade.outputs[0]);
    ASSERT_EQ(got.size(), 3u);
    for (size_t c = 0; c < 3; ++c) EXPECT_NEAR(got[c], want[c], 1e-5) << "input " << k;
  }
  EXPECT_GT(unsure, 0) << "inputs must make the first model unsure sometimes";
  EXPECT_LT(unsure, total) << "and sure sometimes";
}

// Jellyfish with real TorchScript variants: one small CNN traced at 32, 48 and 64 pixels. A client
// that names itself is mapped to a variant, told its image size, and answered by that variant's
// TorchScript module on the cpu device, whatever size of JPEG it sends (the device resizes).
TEST(node_runtime_cpu, jellyfish_maps_a_client_to_a_real_variant_and_tells_it_the_size) {
  if (!torch_available()) GTEST_SKIP() << "built without LibTorch";
  cpu_node n;
  auto model = [&](int side, const char* file, int accuracy) {
    auto s = std::to_string(side);
    return "  - {name: s" + s + ", path: " + n.dir + "/" + file + ", input: {dtype: float32, shape: [3, " + s + ", " +
           s + "]}, output: {dtype: float32, shape: [10]}, max_batch: 4, preprocess: {from: image}," +
           " accuracy: " + std::to_string(accuracy) + ", profile: {alpha_ms: 1, beta_ms: 1}}\n";
  };
  ASSERT_NO_FATAL_FAILURE(n.start_with("models:\n" + model(32, "small_cnn_32.pt", 50) +
                                       model(48, "small_cnn_48.pt", 60) + model(64, "small_cnn.pt", 70) +
                                       R"(pipelines:
  - {name: video, slo_ms: 1000, stages: [{name: d, variants: [s32, s48, s64]}]}
scheduler: {policy: jellyfish, jellyfish: {interval_ms: 50}}
)"));
  std::vector<uint8_t> rgb(40 * 40 * 3);
  for (size_t i = 0; i < rgb.size(); ++i) rgb[i] = static_cast<uint8_t>(i * 7);
  auto jpeg = testing::jpeg_of(rgb, 40, 40);
  msg::client_reply last;
  // Until the controller has mapped the client (it re-schedules every 50 ms on what the frontend
  // reports): at most 200 requests.
  for (uint64_t id = 1; id <= 200 && last.input_height == 0; ++id) {
    msg::client_request r{"video", id, {tensor{"image", dtype::uint8, {static_cast<int64_t>(jpeg.size())}, jpeg}}};
    r.client = "cam";
    r.rate_hz = 10;
    n.client->send(msg::encode({{}, std::move(r)}));
    auto e = n.client->recv();
    ASSERT_TRUE(e);
    last = std::get<msg::client_reply>(e->content);
    ASSERT_EQ(last.code, msg::status::ok) << last.reason;
    ASSERT_EQ(last.outputs.size(), 1u);
    EXPECT_EQ(last.outputs[0].shape, (std::vector<int64_t>{10}));
    if (last.input_height == 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  // Its uplink is not measured (no send time) and its SLO is loose: the most accurate variant.
  EXPECT_EQ(last.input_height, 64u);
  EXPECT_EQ(last.input_width, 64u);
  ASSERT_FALSE(last.timings.empty());
  EXPECT_EQ(last.timings[0].model, "s64");
}

// A cpu device running a TorchScript model behind the same transport.
TEST(node_runtime_cpu, serves_a_torchscript_model) {
  if (!torch_available()) GTEST_SKIP() << "built without LibTorch";
  cpu_node n;
  ASSERT_NO_FATAL_FAILURE(n.start());
  auto& dir = n.dir;
  auto& client = *n.client;
  std::ifstream in(dir + "/tiny_mlp.input.bin", std::ios::binary);
  std::string input(16 * 4, '\0'), want(4 * 4, '\0');
  in.read(input.data(), static_cast<std::streamsize>(input.size()));
  std::ifstream(dir + "/tiny_mlp.output.bin", std::ios::binary)
      .read(want.data(), static_cast<std::streamsize>(want.size()));
  client.send(msg::encode({{}, msg::client_request{"p", 1, {tensor{"x", dtype::float32, {16}, input}}, -1}}));
  auto e = client.recv();
  ASSERT_TRUE(e);
  auto& reply = std::get<msg::client_reply>(e->content);
  ASSERT_EQ(reply.code, msg::status::ok) << reply.reason;
  ASSERT_EQ(reply.outputs.size(), 1u);
  std::vector<float> got(4), ref(4);
  std::memcpy(got.data(), reply.outputs[0].data.data(), 16);
  std::memcpy(ref.data(), want.data(), 16);
  for (int k = 0; k < 4; ++k) EXPECT_NEAR(got[k], ref[k], 1e-5);
  client.send(msg::encode({{}, msg::client_request{"p", 2, {make_tensor({dtype::float32, {15}}, 1)}, -1}}));
  auto bad = client.recv();
  ASSERT_TRUE(bad);
  EXPECT_NE(
      std::get<msg::client_reply>(bad->content).reason.find("does not match the model's declared input float32[16]"),
      std::string::npos);
}

// A model entry without a profile is measured by the worker at start-up, before it serves.
TEST(node_runtime_cpu, a_model_without_a_profile_is_measured_at_start_up) {
  if (!torch_available()) GTEST_SKIP() << "built without LibTorch";
  cpu_node n;
  ASSERT_NO_FATAL_FAILURE(n.start(""));
  auto& m = *n.node->config().find_model("mlp");
  EXPECT_TRUE(m.measured);
  EXPECT_FALSE(m.needs_profile);
  ASSERT_EQ(m.profile.batch, (std::vector<int>{1, 2, 4, 8}));
  for (size_t i = 0; i < m.profile.batch.size(); ++i) {
    EXPECT_GT(m.profile.latency_ms[i], 0);
    if (i) {
      EXPECT_GE(m.profile.latency_ms[i], m.profile.latency_ms[i - 1]);
    }
  }
  n.client->send(msg::encode({{}, msg::client_request{"p", 1, {make_tensor({dtype::float32, {16}}, 1)}, -1}}));
  auto e = n.client->recv();
  ASSERT_TRUE(e);
  EXPECT_EQ(std::get<msg::client_reply>(e->content).code, msg::status::ok);
}

// Vertical scaling in place: resize messages that flip the device between 1 and 2 intra-op
// threads arrive while requests stream in; every request is answered OK.
TEST(node_runtime_cpu, changing_the_thread_count_while_serving_answers_every_request) {
  if (!torch_available()) GTEST_SKIP() << "built without LibTorch";
  cpu_node n;
  ASSERT_NO_FATAL_FAILURE(n.start());
  std::atomic<bool> done{false};
  std::atomic<int> changes{0};
  std::thread resizer([&] {
    for (uint32_t i = 0; !done; ++i, ++changes) {
      caf::anon_send(n.node->actors().worker, msg::resize{0, 1 + i % 2});
      std::this_thread::sleep_for(std::chrono::milliseconds(3));
    }
  });
  constexpr int requests = 400;
  for (int i = 1; i <= requests; ++i) {
    n.client->send(msg::encode(
        {{}, msg::client_request{"p", static_cast<uint64_t>(i), {make_tensor({dtype::float32, {16}}, i)}, -1}}));
    if (i % 8 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  std::set<uint64_t> answered;
  int ok = 0;
  for (int i = 0; i < requests; ++i) {
    auto e = n.client->recv();
    ASSERT_TRUE(e) << "only " << answered.size() << " of " << requests << " answered";
    auto& r = std::get<msg::client_reply>(e->content);
    EXPECT_TRUE(answered.insert(r.request_id).second) << "two replies to " << r.request_id;
    ok += r.code == msg::status::ok;
    if (r.code != msg::status::ok) ADD_FAILURE() << r.reason;
  }
  done = true;
  resizer.join();
  EXPECT_EQ(ok, requests);
  EXPECT_GT(changes.load(), 10);
}

}  // namespace
}  // namespace sloserve
