// How many times a request's tensor is copied between the socket it arrives on and the device,
// on each way in: ZeroMQ, HTTP with the binary extension, gRPC raw contents, and shared memory.
// One real node with every role (frontend and worker in one process) serves a ResNet-shaped
// input (602,112 bytes); the process's copy tally (pipelines/copy_tally.hpp) is read before and
// after each request. None of the four copies the input: the frontend hands the bytes it
// received to the worker by reference. A worker on another node gets none either: the
// invocation goes as a multipart message whose tensor part is the bytes the frontend received.

#include <arpa/inet.h>
#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>
#include <zmq.h>

#include <cstring>
#include <nlohmann/json.hpp>
#include <thread>

#include "actors/node_runtime.hpp"
#include "kserve/grpc_service.grpc.pb.h"
#include "messages/codec.hpp"
#include "pipelines/copy_tally.hpp"

namespace sloserve {
namespace {

using json = nlohmann::json;

constexpr size_t input_bytes = 3 * 224 * 224 * 4;

struct zmq_client {
  explicit zmq_client(const std::string& ep) {
    ctx = zmq_ctx_new();
    sock = zmq_socket(ctx, ZMQ_DEALER);
    int zero = 0;
    zmq_setsockopt(sock, ZMQ_LINGER, &zero, sizeof zero);
    zmq_connect(sock, ep.c_str());
  }
  ~zmq_client() {
    zmq_close(sock);
    zmq_ctx_term(ctx);
  }
  // Sends `frame` and waits for one envelope back (decoded without a copy of the frame).
  std::optional<msg::envelope> ask(const bytes& frame) {
    zmq_send(sock, frame.data(), frame.size(), 0);
    zmq_pollitem_t it{sock, 0, ZMQ_POLLIN, 0};
    if (zmq_poll(&it, 1, 5000) <= 0) return std::nullopt;
    auto* m = new zmq_msg_t;
    zmq_msg_init(m);
    zmq_msg_recv(m, sock, 0);
    bytes got(static_cast<const char*>(zmq_msg_data(m)), zmq_msg_size(m),
              std::shared_ptr<const void>(m, [](zmq_msg_t* x) {
                zmq_msg_close(x);
                delete x;
              }));
    return msg::decode_frame(got, msg::decode_limits{}).value;
  }
  void* ctx;
  void* sock;
};

struct copies : ::testing::Test {
  std::vector<std::unique_ptr<node_runtime>> nodes_;
  node_runtime* node = nullptr;  // the frontend's
  std::unique_ptr<zmq_client> client;
  tensor input = make_tensor({dtype::float32, {3, 224, 224}}, 3, "input");

  void SetUp() override { start(""); }

  // The node "n" with every role, or (with `worker` set) a frontend node "n" and a worker node
  // `worker` on fixed loopback ports, each a node_runtime of this process.
  void start(const std::string& worker) {
    std::string nodes = worker.empty()
                            ? R"(  - {name: n, address: "tcp://127.0.0.1:0", http: "127.0.0.1:0", grpc: "127.0.0.1:0",
     roles: [controller, frontend, worker], devices: [{kind: emulated, count: 1}]}
)"
                            : "  - {name: n, address: \"tcp://127.0.0.1:" + std::to_string(free_port()) +
                                  "\", roles: [controller, frontend]}\n  - {name: " + worker +
                                  ", address: \"tcp://127.0.0.1:" + std::to_string(free_port()) +
                                  "\", roles: [worker], devices: [{kind: emulated, count: 1}]}\n";
    auto r = parse_cluster_config("nodes:\n" + nodes + R"(models:
  - {name: m, input: {dtype: float32, shape: [3, 224, 224]}, output: {dtype: float32, shape: [10]}, max_batch: 8,
     profile: {alpha_ms: 0, beta_ms: 0.1}}
pipelines:
  - {name: p, slo_ms: 5000, stages: [{name: s, model: m}]}
runtime: {client_shared_memory: true, max_payload_bytes: 2097152}
)",
                                  "copies.yaml");
    ASSERT_TRUE(r) << r.error_text();
    auto cfg = std::make_shared<const cluster_config>(std::move(*r.config));
    for (auto& n : cfg->nodes) {
      nodes_.push_back(std::make_unique<node_runtime>(cfg, n.name));
      auto started = nodes_.back()->start();
      ASSERT_TRUE(started) << started.error();
    }
    node = nodes_.front().get();
    client = std::make_unique<zmq_client>(node->endpoint());
    bool ready = false;
    for (uint64_t t = 1; t < 300 && !ready; ++t) {
      auto e = client->ask(msg::encode_frame({{}, msg::status_request{t}}));
      ready = e && std::get<msg::status_reply>(e->content).ready;
      if (!ready) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    ASSERT_TRUE(ready);
  }
  void TearDown() override {
    if (!shm_key.empty()) shm_unlink(shm_key.c_str());
    client.reset();
    for (auto& n : nodes_) n->stop();
  }
  static int free_port() {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    ::close(fd);
    return ntohs(a.sin_port);
  }
  // Sends the input by ZeroMQ as request `id`; its reply is OK.
  void send_by_zeromq(uint64_t id, uint64_t& made) {
    auto before = copy_tally::total();
    auto frame = msg::encode_frame({{}, msg::client_request{"p", id, {input}, -1}});
    made = copy_tally::total() - before;
    auto e = client->ask(frame);
    ASSERT_TRUE(e);
    auto& r = std::get<msg::client_reply>(e->content);
    EXPECT_EQ(r.code, msg::status::ok) << r.reason;
  }

  // Registers region "in" (the input at offset 0 of a fresh POSIX object) once, then sends
  // request `id` naming it; its reply is OK.
  void send_by_shared_memory(uint64_t id) {
    if (shm_key.empty()) {
      shm_key = "/sloserve-copies-" + std::to_string(getpid());
      int fd = shm_open(shm_key.c_str(), O_CREAT | O_RDWR | O_TRUNC, 0600);
      ASSERT_GE(fd, 0);
      ASSERT_EQ(pwrite(fd, input.data.data(), input_bytes, 0), static_cast<ssize_t>(input_bytes));
      close(fd);
      msg::shared_memory_request add;
      add.token = 1;
      add.op = msg::shared_memory_op::add;
      add.name = "in";
      add.key = shm_key;
      add.byte_size = input_bytes;
      auto added = client->ask(msg::encode_frame({{}, add}));
      ASSERT_TRUE(added);
      EXPECT_TRUE(std::get<msg::shared_memory_reply>(added->content).ok);
    }
    msg::client_request rq{"p", id, {}, -1};
    rq.shm_inputs.push_back({"input", dtype::float32, {3, 224, 224}, "in", 0, input_bytes});
    auto e = client->ask(msg::encode_frame({{}, rq}));
    ASSERT_TRUE(e);
    auto& r = std::get<msg::client_reply>(e->content);
    EXPECT_EQ(r.code, msg::status::ok) << r.reason;
  }
  std::string shm_key;

  // Copies of the input that serving `send` made: the bytes the tally counted beyond what the
  // client itself counted in `made` (building its frame), in inputs' worth, rounded down (the
  // small output's flattening stays below one).
  template <class Send>
  uint64_t copies_of(Send send) {
    uint64_t made = 0;
    auto before = copy_tally::total();
    send(made);
    return (copy_tally::total() - before - made) / input_bytes;
  }
};

TEST_F(copies, zeromq_http_grpc_and_shared_memory_pass_the_input_to_the_device_uncopied) {
  // ZeroMQ: the frame stays the ZeroMQ message it arrived in.
  EXPECT_EQ(copies_of([&](uint64_t& made) { send_by_zeromq(1, made); }), 0u);

  // HTTP, the binary extension: the input is a view of the body.
  httplib::Client http("127.0.0.1", node->http_port());
  auto header = json{{"inputs",
                      {{{"name", "input"},
                        {"shape", {3, 224, 224}},
                        {"datatype", "FP32"},
                        {"parameters", {{"binary_data_size", input_bytes}}}}}}}
                    .dump();
  auto body = header + input.data.str();
  EXPECT_EQ(copies_of([&](uint64_t&) {
              auto res =
                  http.Post("/v2/models/p/infer", {{"Inference-Header-Content-Length", std::to_string(header.size())}},
                            body, "application/octet-stream");
              ASSERT_TRUE(res);
              EXPECT_EQ(res->status, 200) << res->body;
            }),
            0u);

  // gRPC, raw contents: the tensor takes the request message's buffer.
  auto stub = inference::GRPCInferenceService::NewStub(
      grpc::CreateChannel("127.0.0.1:" + std::to_string(node->grpc_port()), grpc::InsecureChannelCredentials()));
  EXPECT_EQ(copies_of([&](uint64_t&) {
              inference::ModelInferRequest rq;
              rq.set_model_name("p");
              auto* in = rq.add_inputs();
              in->set_name("input");
              in->set_datatype("FP32");
              for (auto d : {3, 224, 224}) in->add_shape(d);
              rq.add_raw_input_contents(input.data.str());
              inference::ModelInferResponse res;
              grpc::ClientContext ctx;
              auto s = stub->ModelInfer(&ctx, rq, &res);
              EXPECT_TRUE(s.ok()) << s.error_message();
            }),
            0u);

  // Shared memory: read in place from the client's region.
  EXPECT_EQ(copies_of([&](uint64_t&) { send_by_shared_memory(2); }), 0u);
}

// A worker on another node gets the input as a part of the invocation's message that is the
// bytes the frontend received (ZeroMQ sends them by reference), and reads it in place.
struct copies_to_a_worker : copies {
  void SetUp() override { start("w"); }
};

TEST_F(copies_to_a_worker, a_worker_on_another_node_gets_the_input_uncopied) {
  EXPECT_EQ(copies_of([&](uint64_t& made) { send_by_zeromq(1, made); }), 0u);
  // Over shared memory too: the region's bytes go to the worker's socket as they are.
  EXPECT_EQ(copies_of([&](uint64_t&) { send_by_shared_memory(2); }), 0u);
}

}  // namespace
}  // namespace sloserve
