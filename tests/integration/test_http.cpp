// The KServe v2 HTTP ingress of a real multi-process cluster (`sloserve up`, ephemeral ports),
// spoken to by an HTTP client as curl or a KServe client would.

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <sstream>
#include <thread>

#include "apps/child_process.hpp"
#include "config/cluster_config.hpp"
#include "tests/partitioned_model.hpp"
#include "tests/text_file.hpp"

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace std::chrono_literals;

using sloserve::testing::read_text;

// The two-stage workload with an HTTP ingress on the controller-and-frontend node, and a
// payload limit small enough to test.
const std::string cluster_yaml = R"(cluster: {name: http}
nodes:
  - {name: ctl, address: tcp://127.0.0.1:0, roles: [controller, frontend], http: "127.0.0.1:0"}
  - {name: w1, address: tcp://127.0.0.1:0, roles: [worker], devices: [{kind: emulated, count: 1}]}
)" + read_text(SLOSERVE_TWO_STAGE_YAML);

struct http_cluster : ::testing::Test {
  fs::path dir;
  sloserve::child_process up;
  std::unique_ptr<httplib::Client> client;
  std::string base;  // http://HOST:PORT

  void SetUp() override {
    std::signal(SIGPIPE, SIG_IGN);  // a refused request's connection closes under TLS writes
    dir = fs::temp_directory_path() / ("sloserve-http-" + std::to_string(getpid()) + "-" +
                                       ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir);
    auto yaml = cluster_yaml;
    // A 1 MiB payload limit, for the oversize test.
    yaml.replace(yaml.find("runtime: {"), 10, "runtime: {max_payload_bytes: 1048576, ");
    std::ofstream(dir / "cluster.yaml") << yaml;
  }

  int run(std::vector<std::string> args, const char* log) {
    auto p = sloserve::spawn_child(args.front() == "sloserve" ? SLOSERVE_BIN : args.front(), args, dir / log);
    int status = 0;
    EXPECT_TRUE(p.wait_for(60s, status)) << p.output();
    EXPECT_TRUE(WIFEXITED(status)) << p.output();
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

  // The cluster file with the first `find` in it replaced by `with`.
  void edit_config(const std::string& find, const std::string& with) {
    auto text = read_text(dir / "cluster.yaml");
    text.replace(text.find(find), find.size(), with);
    std::ofstream(dir / "cluster.yaml") << text;
  }

  // Starts the cluster (`extra` appended to its file) and a client of its http ingress.
  void start(const std::string& extra = "", bool tls = false) {
    if (!extra.empty()) std::ofstream(dir / "cluster.yaml", std::ios::app) << extra;
    up = sloserve::spawn_child(
        SLOSERVE_BIN,
        {"sloserve", "up", "-c", (dir / "cluster.yaml").string(), "--write-config", (dir / "resolved.yaml").string()},
        dir / "up.log");
    for (int i = 0; i < 300 && up.output().find("cluster up") == std::string::npos; ++i)
      std::this_thread::sleep_for(50ms);
    ASSERT_NE(up.output().find("cluster up"), std::string::npos) << up.output();
    auto resolved = sloserve::load_cluster_config(dir / "resolved.yaml");
    ASSERT_TRUE(resolved) << resolved.error_text();
    auto http = resolved.config->find_node("ctl")->http;
    ASSERT_NE(http.substr(http.rfind(':')), ":0") << "up resolves the http port";
    base = (tls ? "https://" : "http://") + http;
    client = std::make_unique<httplib::Client>(base);
    if (tls) client->set_ca_cert_path((dir / "cert.pem").string());
    client->set_read_timeout(10s);
  }
  void TearDown() override {
    up.stop();
    fs::remove_all(dir);
  }

  // `sloserve load` of `pipeline` at 100/s for 2 s over HTTP, `extra` appended; its summary, after
  // checking that nothing was lost or failed and 99% were within the SLO.
  json load_over_http(const std::string& pipeline, const std::vector<std::string>& extra = {}) {
    std::vector<std::string> args{"sloserve",   "load",
                                  "-c",         (dir / "resolved.yaml").string(),
                                  "--pipeline", pipeline,
                                  "--rate",     "100",
                                  "--duration", "2",
                                  "--protocol", "http",
                                  "--json",     (dir / "load.json").string()};
    args.insert(args.end(), extra.begin(), extra.end());
    EXPECT_EQ(run(args, "load.log"), 0);
    auto s = json::parse(std::ifstream(dir / "load.json"));
    EXPECT_EQ(s["lost"].get<int>(), 0);
    EXPECT_EQ(s["errors"].get<int>(), 0) << s.dump(2);
    EXPECT_GE(s["attainment"].get<double>(), 0.99) << s.dump(2);
    return s;
  }

  // Waits for /v2/health/ready.
  void wait_ready() {
    for (int i = 0; i < 200; ++i) {
      if (auto r = client->Get("/v2/health/ready"); r && r->status == 200) return;
      std::this_thread::sleep_for(50ms);
    }
    FAIL() << "never ready: " << up.output();
  }

  static json image_request(std::string id = "") {
    std::vector<float> data(3 * 32 * 32);
    for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<float>(i % 17) / 17;
    json j{{"inputs", {{{"name", "input"}, {"shape", {3, 32, 32}}, {"datatype", "FP32"}, {"data", data}}}}};
    if (!id.empty()) j["id"] = id;
    return j;
  }
};

TEST_F(http_cluster, health_metadata_and_inference_over_json_and_the_binary_extension) {
  start();
  auto live = client->Get("/v2/health/live");
  ASSERT_TRUE(live);
  EXPECT_EQ(live->status, 200);
  wait_ready();
  auto server = client->Get("/v2");
  ASSERT_TRUE(server);
  EXPECT_EQ(json::parse(server->body)["name"], "sloserve");
  auto meta = client->Get("/v2/models/traffic");
  ASSERT_TRUE(meta && meta->status == 200);
  auto m = json::parse(meta->body);
  EXPECT_EQ(m["inputs"][0], json({{"name", "input"}, {"datatype", "FP32"}, {"shape", {3, 32, 32}}}));
  EXPECT_EQ(m["outputs"][0]["name"], "output");
  EXPECT_EQ(m["outputs"][0]["shape"], json({-1, 10})) << "one row per classify invocation";
  // Beside it the rows of each item a batched reply carries, declared; the platform as the
  // configuration's.
  ASSERT_EQ(m["outputs"].size(), 2u) << meta->body;
  EXPECT_EQ(m["outputs"][1], json({{"name", "output_rows"}, {"datatype", "INT64"}, {"shape", json::array()}}));
  EXPECT_EQ(m["platform"], "ensemble");
  auto ready = client->Get("/v2/models/traffic/ready");
  ASSERT_TRUE(ready);
  EXPECT_EQ(ready->status, 200);
  // The version metadata lists reaches the same paths.
  EXPECT_EQ(m["versions"], json({"1"}));
  EXPECT_EQ(client->Get("/v2/models/traffic/versions/1")->status, 200);
  EXPECT_EQ(client->Get("/v2/models/traffic/versions/1/ready")->status, 200);
  EXPECT_EQ(client->Get("/v2/models/traffic/versions/7/ready")->status, 404);
  auto named = image_request("q0");
  named["outputs"] = json::array({{{"name", "output"}}});
  auto by_version = client->Post("/v2/models/traffic/versions/1/infer", named.dump(), "application/json");
  ASSERT_TRUE(by_version);
  EXPECT_EQ(by_version->status, 200) << by_version->body;
  EXPECT_EQ(client->Get("/v2/models/nope/ready")->status, 404);

  // JSON data in and out.
  auto r = client->Post("/v2/models/traffic/infer", image_request("q1").dump(), "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  auto out = json::parse(r->body);
  EXPECT_EQ(out["model_name"], "traffic");
  EXPECT_EQ(out["id"], "q1");
  // The server's timing, in all and per stage: detect ran, so its compute time is there.
  auto& params = out["parameters"];
  EXPECT_GT(params["sloserve_total_us"].get<int64_t>(), 0) << r->body;
  EXPECT_GT(params["sloserve_stage_detect_compute_us"].get<int64_t>(), 0) << r->body;
  EXPECT_LE(params["sloserve_stage_detect_compute_us"].get<int64_t>(), params["sloserve_compute_us"].get<int64_t>());
  EXPECT_TRUE(params.contains("sloserve_stage_detect_queue_us")) << r->body;
  // One output, the classify invocations (fan-out 1.5) stacked: [k, 10].
  ASSERT_EQ(out["outputs"].size(), 1u) << r->body;
  EXPECT_EQ(out["outputs"][0]["datatype"], "FP32");
  auto& shape = out["outputs"][0]["shape"];
  ASSERT_EQ(shape.size(), 2u);
  EXPECT_EQ(shape[1], 10);
  EXPECT_EQ(out["outputs"][0]["data"].size(), 10 * shape[0].get<size_t>());

  // A client that batches says [1, 3, 32, 32] and gets [1, k, 10] back; the binary extension both ways.
  std::vector<float> data(3 * 32 * 32, 0.5f);
  std::string raw(reinterpret_cast<const char*>(data.data()), data.size() * sizeof(float));
  auto header = json{{"inputs",
                      {{{"name", "input"},
                        {"shape", {1, 3, 32, 32}},
                        {"datatype", "FP32"},
                        {"parameters", {{"binary_data_size", raw.size()}}}}}},
                     {"parameters", {{"binary_data_output", true}}}}
                    .dump();
  httplib::Headers h{{"Inference-Header-Content-Length", std::to_string(header.size())}};
  auto b = client->Post("/v2/models/traffic/infer", h, header + raw, "application/octet-stream");
  ASSERT_TRUE(b);
  ASSERT_EQ(b->status, 200) << b->body;
  auto length = std::stoul(b->get_header_value("Inference-Header-Content-Length"));
  auto bh = json::parse(b->body.substr(0, length));
  ASSERT_EQ(bh["outputs"].size(), 1u);
  EXPECT_EQ(bh["outputs"][0]["shape"][0], 1);
  EXPECT_EQ(bh["outputs"][0]["shape"][2], 10);
  size_t sum = 0;
  for (auto& o : bh["outputs"]) sum += o["parameters"]["binary_data_size"].get<size_t>();
  EXPECT_EQ(b->body.size() - length, sum);

  // A batch of three: three queries, answered as one, in order; the classify rows of each item
  // padded to the most any has, and each item's count beside them.
  auto three = image_request("q3");
  auto& in = three["inputs"][0];
  in["shape"] = {3, 3, 32, 32};
  auto one = in["data"];
  for (int i = 0; i < 2; ++i)
    for (auto& v : one) in["data"].push_back(v);
  auto t = client->Post("/v2/models/traffic/infer", three.dump(), "application/json");
  ASSERT_TRUE(t);
  ASSERT_EQ(t->status, 200) << t->body;
  auto tj = json::parse(t->body);
  ASSERT_EQ(tj["outputs"].size(), 2u) << t->body;
  EXPECT_EQ(tj["outputs"][0]["name"], "output");
  auto& ts = tj["outputs"][0]["shape"];
  ASSERT_EQ(ts.size(), 3u);
  EXPECT_EQ(ts[0], 3);
  EXPECT_EQ(ts[2], 10);
  EXPECT_EQ(tj["outputs"][1]["name"], "output_rows");
  EXPECT_EQ(tj["outputs"][1]["datatype"], "INT64");
  EXPECT_EQ(tj["outputs"][1]["shape"], json({3}));
  int64_t most = 0;
  for (auto& k : tj["outputs"][1]["data"]) most = std::max(most, k.get<int64_t>());
  EXPECT_EQ(ts[1], most);

  // The classification extension: each classify row's top 3 of 10 as "value:index" strings, the
  // highest first; the output's own binary_data (false) over the request's binary_data_output.
  auto server_extensions = json::parse(server->body)["extensions"];
  EXPECT_NE(std::find(server_extensions.begin(), server_extensions.end(), "classification"), server_extensions.end());
  auto classes = image_request("q4");
  classes["outputs"] =
      json::array({{{"name", "output"}, {"parameters", {{"classification", 3}, {"binary_data", false}}}}});
  classes["parameters"] = {{"binary_data_output", true}};
  auto c = client->Post("/v2/models/traffic/infer", classes.dump(), "application/json");
  ASSERT_TRUE(c);
  ASSERT_EQ(c->status, 200) << c->body;
  EXPECT_FALSE(c->has_header("Inference-Header-Content-Length")) << "every output as JSON";
  auto cj = json::parse(c->body);
  auto& co = cj["outputs"][0];
  EXPECT_EQ(co["datatype"], "BYTES");
  ASSERT_EQ(co["shape"].size(), 2u);
  EXPECT_EQ(co["shape"][1], 3);
  ASSERT_EQ(co["data"].size(), 3 * co["shape"][0].get<size_t>());
  for (size_t row = 0; row < co["shape"][0].get<size_t>(); ++row) {
    double last = std::numeric_limits<double>::infinity();
    for (size_t k = 0; k < 3; ++k) {
      auto text = co["data"][row * 3 + k].get<std::string>();
      std::smatch parts;
      ASSERT_TRUE(std::regex_match(text, parts, std::regex("(-?[0-9]+\\.[0-9]+):([0-9])"))) << text;
      EXPECT_LE(std::stod(parts[1]), last) << "the highest first: " << co["data"];
      last = std::stod(parts[1]);
    }
  }
  classes["outputs"][0]["parameters"]["classification"] = 0;
  auto refused = client->Post("/v2/models/traffic/infer", classes.dump(), "application/json");
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 400);
  EXPECT_NE(refused->body.find("parameter classification must be the number of classes"), std::string::npos)
      << refused->body;
}

// A real detector's candidates above the score each get one classifier invocation: the response
// holds what PyTorch computes for the detections of that image, in their row order, and a batch
// of two images says how many rows each had.
// Model versions over KServe: the pipeline lists them, /versions/{v}/infer runs that version (here
// version 2 carries no weight: it runs only when asked for), the metrics count each version.
TEST_F(http_cluster, a_model_version_is_reached_by_its_versions_path) {
  auto yaml = read_text(dir / "cluster.yaml");
  yaml.insert(
      yaml.find("  - name: cls"),
      "  - {name: det, version: 2, input: {dtype: float32, shape: [3, 32, 32]}, output: {dtype: float32, shape: "
      "[8, 6]},\n     max_batch: 8, profile: {batch: [1, 2, 4, 8], latency_ms: [8, 10, 14, 22]}}\n");
  yaml.replace(yaml.find("{name: detect, model: det}"), 26,
               "{name: detect, model: det, versions: [{version: 1, weight: 100}, {version: 2, weight: 0}]}");
  std::ofstream(dir / "cluster.yaml") << yaml << "scheduler: {policy: static}\n";
  start();
  wait_ready();
  auto meta = client->Get("/v2/models/traffic");
  ASSERT_TRUE(meta && meta->status == 200);
  EXPECT_EQ(json::parse(meta->body)["versions"], json({"1", "2"}));
  for (int i = 0; i < 5; ++i) {
    auto two = client->Post("/v2/models/traffic/versions/2/infer", image_request().dump(), "application/json");
    ASSERT_TRUE(two);
    EXPECT_EQ(two->status, 200) << two->body;
    auto plain = client->Post("/v2/models/traffic/infer", image_request().dump(), "application/json");
    ASSERT_TRUE(plain);
    EXPECT_EQ(plain->status, 200) << plain->body;
  }
  auto three = client->Post("/v2/models/traffic/versions/3/infer", image_request().dump(), "application/json");
  ASSERT_TRUE(three);
  EXPECT_EQ(three->status, 404);
  EXPECT_NE(three->body.find("pipeline 'traffic' has no version '3'; its versions: 1, 2"), std::string::npos)
      << three->body;
  auto metrics = client->Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_NE(metrics->body.find("sloserve_model_requests_total{model=\"det\",version=\"2\",outcome=\"ok\"} 5"),
            std::string::npos)
      << metrics->body;
  EXPECT_NE(metrics->body.find("sloserve_model_requests_total{model=\"det\",version=\"1\",outcome=\"ok\"} 5"),
            std::string::npos);
}

TEST_F(http_cluster, a_detectors_boxes_above_the_score_are_classified_each_in_row_order) {
  if (std::string(SLOSERVE_MODELS_DIR).empty()) GTEST_SKIP() << "built without LibTorch";
  fs::path models(SLOSERVE_MODELS_DIR);
  std::ofstream(dir / "cluster.yaml") << R"(cluster: {name: detect}
nodes:
  - {name: ctl, address: tcp://127.0.0.1:0, roles: [controller, frontend], http: "127.0.0.1:0"}
  - {name: w, address: tcp://127.0.0.1:0, roles: [worker], devices: [{kind: cpu, count: 1}]}
models:
  - {name: detector, path: )" + (models / "tiny_detector.pt").string() +
                                             R"(, max_batch: 4,
     input: {dtype: float32, shape: [3, 32, 32]}, output: {dtype: float32, shape: [16, 193], name: boxes},
     profile: {alpha_ms: 1, beta_ms: 2}}
  - {name: cnn, path: )" + (models / "tiny_cnn.pt").string() +
                                             R"(, max_batch: 16,
     input: {dtype: float32, shape: [3, 8, 8]}, output: {dtype: float32, shape: [5]}, profile: {alpha_ms: 1, beta_ms: 2}}
pipelines:
  - name: detect
    slo_ms: 1000
    stages:
      - {name: detect, model: detector}
      - {name: classify, model: cnn, after: [detect], fanout: {from_output: boxes, score_above: 0.5, expect: 4}}
)";
  start();
  wait_ready();
  auto floats = [](const std::string& bytes) {
    std::vector<float> v(bytes.size() / sizeof(float));
    std::memcpy(v.data(), bytes.data(), v.size() * sizeof(float));
    return v;
  };
  auto images = floats(read_text(models / "tiny_detector.input.bin"));
  auto boxes = floats(read_text(models / "tiny_detector.output.bin"));
  auto expected = floats(read_text(models / "tiny_detector.pipeline.bin"));
  ASSERT_EQ(images.size(), 2u * 3 * 32 * 32);
  ASSERT_EQ(boxes.size(), 2u * 16 * 193);
  std::vector<size_t> above(2);
  for (size_t i = 0; i < 2; ++i)
    for (size_t r = 0; r < 16; ++r) above[i] += boxes[(i * 16 + r) * 193] > 0.5f;
  ASSERT_EQ(expected.size(), above[0] * 5);
  ASSERT_NE(above[0], above[1]) << "the reference images differ in detections";

  auto meta = client->Get("/v2/models/detect");
  ASSERT_TRUE(meta && meta->status == 200);
  EXPECT_EQ(json::parse(meta->body)["outputs"][0]["shape"], json({-1, 5}));
  std::vector<float> first(images.begin(), images.begin() + 3 * 32 * 32);
  json one{{"inputs", {{{"name", "input"}, {"shape", {3, 32, 32}}, {"datatype", "FP32"}, {"data", first}}}}};
  auto r = client->Post("/v2/models/detect/infer", one.dump(), "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  auto out = json::parse(r->body)["outputs"][0];
  EXPECT_EQ(out["shape"], json({above[0], 5}));
  ASSERT_EQ(out["data"].size(), expected.size());
  for (size_t k = 0; k < expected.size(); ++k) EXPECT_NEAR(out["data"][k].get<float>(), expected[k], 1e-4) << k;

  json both{{"inputs", {{{"name", "input"}, {"shape", {2, 3, 32, 32}}, {"datatype", "FP32"}, {"data", images}}}}};
  auto b = client->Post("/v2/models/detect/infer", both.dump(), "application/json");
  ASSERT_TRUE(b);
  ASSERT_EQ(b->status, 200) << b->body;
  auto bj = json::parse(b->body);
  ASSERT_EQ(bj["outputs"].size(), 2u) << b->body;
  EXPECT_EQ(bj["outputs"][0]["shape"], json({2, std::max(above[0], above[1]), 5}));
  EXPECT_EQ(bj["outputs"][1]["data"], json({above[0], above[1]}));
  // A request that names its outputs gets those alone; output_rows is one it may name.
  auto named = [&](json outputs) {
    auto req = both;
    req["outputs"] = outputs;
    auto r = client->Post("/v2/models/detect/infer", req.dump(), "application/json");
    EXPECT_TRUE(r);
    return r ? std::make_pair(r->status, json::parse(r->body)) : std::make_pair(0, json());
  };
  auto [s1, only] = named(json::array({{{"name", "output"}}}));
  ASSERT_EQ(s1, 200) << only.dump();
  ASSERT_EQ(only["outputs"].size(), 1u) << only.dump();
  EXPECT_EQ(only["outputs"][0]["name"], "output");
  auto [s2, rows] = named(json::array({{{"name", "output_rows"}}}));
  ASSERT_EQ(s2, 200) << rows.dump();
  ASSERT_EQ(rows["outputs"].size(), 1u) << rows.dump();
  EXPECT_EQ(rows["outputs"][0]["data"], json({above[0], above[1]}));
  one["outputs"] = json::array({{{"name", "output_rows"}}});
  auto lone = client->Post("/v2/models/detect/infer", one.dump(), "application/json");
  ASSERT_TRUE(lone);
  EXPECT_EQ(lone->status, 400);
  EXPECT_NE(lone->body.find("'output_rows' comes with a batched request"), std::string::npos) << lone->body;
}

// A pipeline with a response cache: the same request twice, the second answered from the cache
// with the same outputs; Triton's statistics count a hit and a miss, /metrics the lookups; the
// load client's stream of half repeated inputs is half answered there.
TEST_F(http_cluster, a_repeated_request_is_answered_from_the_response_cache) {
  edit_config("    slo_ms: 200\n", "    slo_ms: 200\n    response_cache: true\n");
  start();
  wait_ready();
  auto body = image_request("same").dump();
  auto first = client->Post("/v2/models/traffic/infer", body, "application/json");
  auto second = client->Post("/v2/models/traffic/infer", body, "application/json");
  ASSERT_TRUE(first && first->status == 200) << (first ? first->body : "no reply");
  ASSERT_TRUE(second && second->status == 200) << (second ? second->body : "no reply");
  EXPECT_EQ(json::parse(second->body)["outputs"], json::parse(first->body)["outputs"]) << first->body << "\n"
                                                                                       << second->body;
  auto stats = client->Get("/v2/models/traffic/stats");
  ASSERT_TRUE(stats && stats->status == 200);
  auto st = json::parse(stats->body)["model_stats"][0]["inference_stats"];
  EXPECT_EQ(st["cache_hit"]["count"], 1) << stats->body;
  EXPECT_EQ(st["cache_miss"]["count"], 1) << stats->body;
  EXPECT_EQ(st["success"]["count"], 2) << stats->body;
  auto metrics = client->Get("/metrics");
  ASSERT_TRUE(metrics && metrics->status == 200);
  EXPECT_NE(
      metrics->body.find("sloserve_response_cache_lookups_total{of=\"traffic\",kind=\"pipeline\",result=\"hit\"} 1"),
      std::string::npos)
      << metrics->body;
  auto log = dir / "load.log";
  auto load = sloserve::spawn_child(
      SLOSERVE_BIN,
      {"sloserve", "load", "-c", (dir / "resolved.yaml").string(), "--pipeline", "traffic", "--rate", "100",
       "--duration", "2", "--repeat", "0.5", "--json", (dir / "load.json").string()},
      log);
  int status = 0;
  ASSERT_TRUE(load.wait_for(60s, status)) << load.output();
  ASSERT_EQ(status, 0) << load.output();
  auto summary = json::parse(read_text(dir / "load.json"));
  EXPECT_EQ(summary["lost"], 0) << summary.dump();
  auto after = json::parse(client->Get("/v2/models/traffic/stats")->body)["model_stats"][0]["inference_stats"];
  auto hits = after["cache_hit"]["count"].get<double>() - 1, misses = after["cache_miss"]["count"].get<double>() - 1;
  EXPECT_NEAR(hits / (hits + misses), 0.5, 0.15) << after.dump();
}

// Triton's extensions a Triton client calls: each pipeline's statistics (what it answered, and the
// time queued and computing) and the repository index with each pipeline's state.
TEST_F(http_cluster, triton_statistics_and_the_repository_index_tell_what_was_served) {
  start();
  wait_ready();
  for (int i = 0; i < 5; ++i) {
    auto r = client->Post("/v2/models/traffic/infer", image_request().dump(), "application/json");
    ASSERT_TRUE(r && r->status == 200) << (r ? r->body : "no reply");
  }
  auto one = client->Get("/v2/models/traffic/versions/1/stats");
  ASSERT_TRUE(one && one->status == 200);
  auto s = json::parse(one->body)["model_stats"];
  ASSERT_EQ(s.size(), 1u) << one->body;
  EXPECT_EQ(s[0]["name"], "traffic");
  EXPECT_EQ(s[0]["version"], "1");
  EXPECT_EQ(s[0]["inference_count"], 5) << one->body;
  EXPECT_GE(s[0]["execution_count"].get<int>(), 1);
  auto& st = s[0]["inference_stats"];
  EXPECT_EQ(st["success"]["count"], 5);
  EXPECT_GT(st["success"]["ns"].get<uint64_t>(), 0u);
  EXPECT_EQ(st["fail"]["count"], 0);
  EXPECT_GT(st["compute_infer"]["ns"].get<uint64_t>(), 0u);
  EXPECT_LE(st["compute_infer"]["ns"].get<uint64_t>(), st["success"]["ns"].get<uint64_t>() * 4) << one->body;
  EXPECT_GT(s[0]["last_inference"].get<uint64_t>(), 1'700'000'000'000u) << "ms since the epoch";
  auto all = client->Get("/v2/models/stats");
  ASSERT_TRUE(all && all->status == 200);
  EXPECT_FALSE(json::parse(all->body)["model_stats"].empty());
  EXPECT_EQ(client->Get("/v2/models/nope/stats")->status, 404);
  EXPECT_EQ(client->Get("/v2/models/traffic/versions/7/stats")->status, 404);
  EXPECT_NE(json::parse(client->Get("/v2")->body)["extensions"].dump().find("statistics"), std::string::npos);

  auto index = client->Post("/v2/repository/index", "{}", "application/json");
  ASSERT_TRUE(index && index->status == 200);
  auto entries = json::parse(index->body);
  ASSERT_FALSE(entries.empty());
  for (auto& e : entries) {
    EXPECT_EQ(e["version"], "1");
    EXPECT_TRUE(e["state"] == "READY" || e["state"] == "UNAVAILABLE") << e.dump();
    if (e["name"] == "traffic") {
      EXPECT_EQ(e["state"], "READY");
    }
  }
  auto ready = client->Post("/v2/repository/index", R"({"ready": true})", "application/json");
  ASSERT_TRUE(ready && ready->status == 200);
  for (auto& e : json::parse(ready->body)) EXPECT_EQ(e["state"], "READY");
  EXPECT_EQ(client->Post("/v2/repository/index", R"({"ready": 3})", "application/json")->status, 400);

  // Triton's model configuration: the pipeline as an ensemble of its stages' models.
  auto config = client->Get("/v2/models/traffic/config");
  ASSERT_TRUE(config && config->status == 200);
  auto c = json::parse(config->body);
  EXPECT_EQ(c["name"], "traffic");
  EXPECT_EQ(c["platform"], "ensemble");
  EXPECT_EQ(c["max_batch_size"], 1024);
  EXPECT_EQ(c["input"][0]["name"], "input");
  EXPECT_EQ(c["input"][0]["data_type"], "TYPE_FP32");
  EXPECT_EQ(c["input"][0]["dims"], json::array({3, 32, 32}));
  EXPECT_EQ(c["output"][0]["dims"], json::array({-1, 10})) << "classify runs once per detected row";
  ASSERT_EQ(c["output"].size(), 2u) << config->body;
  EXPECT_EQ(c["output"][1]["name"], "output_rows");
  EXPECT_EQ(c["output"][1]["data_type"], "TYPE_INT64");
  auto& steps = c["ensemble_scheduling"]["step"];
  ASSERT_EQ(steps.size(), 2u) << config->body;
  EXPECT_EQ(steps[0]["model_name"], "det");
  EXPECT_EQ(steps[1]["model_name"], "cls");
  EXPECT_EQ(steps[1]["input_map"].begin().value(), "detect") << "classify reads what detect makes";
  EXPECT_EQ(c["parameters"]["slo_ms"]["string_value"], "200");
  EXPECT_EQ(client->Get("/v2/models/nope/config")->status, 404);

  // The models the pipeline ran, each with its outcomes and durations.
  auto metrics = client->Get("/metrics");
  ASSERT_TRUE(metrics && metrics->status == 200);
  EXPECT_NE(metrics->body.find("sloserve_model_requests_total{model="), std::string::npos);
  EXPECT_NE(metrics->body.find("sloserve_model_compute_duration_seconds_bucket{model="), std::string::npos);

  // Triton's logging extension: the node's settings, read and changed; a change one level cannot
  // express is refused whole.
  EXPECT_NE(json::parse(client->Get("/v2")->body)["extensions"].dump().find("logging"), std::string::npos);
  auto logging = client->Get("/v2/logging");
  ASSERT_TRUE(logging && logging->status == 200);
  EXPECT_EQ(json::parse(logging->body)["log_verbose_level"], 0) << logging->body;
  auto verbose =
      client->Post("/v2/logging", R"({"log_verbose_level": 1, "log_format": "ISO8601"})", "application/json");
  ASSERT_TRUE(verbose && verbose->status == 200) << (verbose ? verbose->body : "");
  EXPECT_EQ(json::parse(verbose->body)["log_format"], "ISO8601");
  auto refused = client->Post("/v2/logging", R"({"log_format": "default", "log_warning": false})", "application/json");
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 400);
  EXPECT_NE(refused->body.find("at or above one level"), std::string::npos) << refused->body;
  EXPECT_EQ(json::parse(client->Get("/v2/logging")->body)["log_format"], "ISO8601") << "nothing of it applied";
  ASSERT_EQ(
      client->Post("/v2/logging", R"({"log_verbose_level": 0, "log_format": "default"})", "application/json")->status,
      200);
}

// Triton's trace extension: one request of every 2 traced into the file, with its pipeline's own
// rate set apart and cleared again, each trace a JSON line of the request's timeline whose stages
// ran inside it (sent, queued and computed, result back), whatever protocol it came by.
TEST_F(http_cluster, sampled_requests_timelines_go_to_the_trace_file) {
  start();
  wait_ready();
  EXPECT_NE(json::parse(client->Get("/v2")->body)["extensions"].dump().find("trace"), std::string::npos);
  auto file = (dir / "traces" / "frontend.jsonl").string();
  auto post_json = [&](const std::string& path, const json& body) {
    return client->Post(path.c_str(), body.dump(), "application/json");
  };
  auto refused = post_json("/v2/trace/setting", {{"trace_level", {"TIMESTAMPS"}}});
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 400);
  EXPECT_NE(refused->body.find("needs a trace_file"), std::string::npos) << refused->body;
  auto on =
      post_json("/v2/trace/setting", {{"trace_level", {"TIMESTAMPS"}}, {"trace_rate", "2"}, {"trace_file", file}});
  ASSERT_TRUE(on && on->status == 200) << (on ? on->body : "");
  EXPECT_EQ(json::parse(on->body)["trace_rate"], "2");
  auto own = post_json("/v2/models/traffic/trace/setting", {{"trace_rate", "1"}});
  ASSERT_TRUE(own && own->status == 200) << (own ? own->body : "");
  EXPECT_EQ(json::parse(client->Get("/v2/models/traffic/trace/setting")->body)["trace_rate"], "1");
  EXPECT_EQ(client->Get("/v2/models/nope/trace/setting")->status, 404);
  for (int i = 0; i < 4; ++i)
    ASSERT_EQ(client->Post("/v2/models/traffic/infer", image_request().dump(), "application/json")->status, 200);
  ASSERT_EQ(post_json("/v2/models/traffic/trace/setting", {{"trace_rate", nullptr}})->status, 200);
  EXPECT_EQ(json::parse(client->Get("/v2/models/traffic/trace/setting")->body)["trace_rate"], "2");
  for (int i = 0; i < 4; ++i)
    ASSERT_EQ(client->Post("/v2/models/traffic/infer", image_request().dump(), "application/json")->status, 200);
  // Over ZeroMQ too: `sloserve load` at 50/s for 2 s, about half of it traced.
  std::vector<std::string> args{"sloserve",   "load",    "-c",     (dir / "resolved.yaml").string(),
                                "--pipeline", "traffic", "--rate", "50",
                                "--duration", "2"};
  ASSERT_EQ(run(args, "load.log"), 0);
  ASSERT_EQ(post_json("/v2/trace/setting", {{"trace_level", {"OFF"}}})->status, 200);

  std::ifstream in(file);
  std::vector<json> traces;
  for (std::string line; std::getline(in, line);) traces.push_back(json::parse(line));
  ASSERT_GE(traces.size(), 4u + 2u + 25u) << "4 at rate 1, 2 of 4 at rate 2, about half of ~100 loaded";
  EXPECT_LE(traces.size(), 4u + 2u + 60u);
  for (auto& t : traces) {
    EXPECT_EQ(t["pipeline"], "traffic");
    EXPECT_EQ(t["status"], "OK") << t.dump();
    auto start_ns = t["timestamps"][0]["ns"].get<int64_t>(), end_ns = t["timestamps"][1]["ns"].get<int64_t>();
    EXPECT_EQ(t["timestamps"][0]["name"], "REQUEST_START");
    EXPECT_LE(start_ns, end_ns);
    EXPECT_GT(start_ns, int64_t{1'700'000'000} * 1'000'000'000) << "ns since the epoch";
    ASSERT_GE(t["stages"].size(), 1u) << t.dump();
    EXPECT_EQ(t["stages"][0]["stage"], "detect");
    for (auto& st : t["stages"]) {
      auto sent = st["sent_ns"].get<int64_t>(), back = st["result_ns"].get<int64_t>();
      EXPECT_LE(start_ns, sent) << t.dump();
      EXPECT_LE(sent, back) << t.dump();
      EXPECT_LE(back, end_ns) << t.dump();
      EXPECT_LE(st["queue_ns"].get<int64_t>() + st["compute_ns"].get<int64_t>(), back - sent + 1'000'000) << t.dump();
      EXPECT_GE(st["batch"].get<int>(), 1);
    }
  }
}

// A partitioned model over KServe v2: `start_layer` in the request's parameters sends what the
// client's own first blocks made, with that block's shape; a start beyond the blocks is a 400.
TEST_F(http_cluster, a_partitioned_models_request_starts_where_its_parameters_say) {
  std::ofstream(dir / "cluster.yaml") << R"(cluster: {name: http}
nodes:
  - {name: ctl, address: tcp://127.0.0.1:0, roles: [controller, frontend], http: "127.0.0.1:0"}
  - {name: w1, address: tcp://127.0.0.1:0, roles: [worker], devices: [{kind: emulated, count: 1}]}
)" << sloserve::testing::partitioned_model_yaml;
  start();
  wait_ready();
  auto body = [](int start, std::vector<float> data) {
    json j{{"inputs", {{{"name", "input"}, {"shape", {data.size()}}, {"datatype", "FP32"}, {"data", data}}}}};
    j["parameters"] = {{"start_layer", start}, {"slo_ms", 150}};
    return j.dump();
  };
  auto r = client->Post("/v2/models/ph/infer", body(1, {1, 2, 3, 4, 5, 6}), "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(json::parse(r->body)["outputs"][0]["shape"], json({3}));
  r = client->Post("/v2/models/ph/infer", body(2, {1, 2}), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
  r = client->Post("/v2/models/ph/infer", body(1, {1, 2, 3, 4}), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_NE(r->body.find("float32[6]"), std::string::npos) << r->body;
  r = client->Post("/v2/models/ph/infer", body(3, {1, 2}), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_NE(r->body.find("start_layer 3 is not below the 3 layers"), std::string::npos) << r->body;
  // The load client's partitioned clients say where they start and their SLO over HTTP too.
  auto s = load_over_http("ph", {"--fragments", "1:150,2:100"});
  EXPECT_GT(s["ok"].get<int>(), 100) << s.dump(2);
}

TEST_F(http_cluster, the_clients_mistakes_get_a_4xx_with_the_reason_and_the_node_keeps_serving) {
  start();
  wait_ready();
  struct bad {
    std::string path, body;
    int status;
    std::string says;
  };
  auto wrong_shape = image_request();
  wrong_shape["inputs"][0]["shape"] = {3, 16, 64};
  auto wrong_name = image_request();
  wrong_name["inputs"][0]["name"] = "pixels";
  auto wrong_type = image_request();
  wrong_type["inputs"][0]["datatype"] = "INT32";
  auto unknown_output = image_request();
  unknown_output["outputs"] = json::array({{{"name", "plate"}}});
  std::vector<bad> cases{
      {"/v2/models/traffic/infer", "{\"inputs\": [", 400, "bad JSON"},
      {"/v2/models/traffic/infer", wrong_shape.dump(), 400, "float32[3,32,32]"},
      {"/v2/models/traffic/infer", wrong_name.dump(), 400, "no input 'pixels'"},
      {"/v2/models/traffic/infer", wrong_type.dump(), 400, "integer"},
      {"/v2/models/nope/infer", image_request().dump(), 400, "unknown pipeline 'nope'"},
      {"/v2/models/traffic/infer", unknown_output.dump(), 400, "no output 'plate'"},
      {"/v2/models/traffic/versions/2/infer", image_request().dump(), 404, "no version '2'"},
      {"/v2/models/traffic/infer", std::string(2 << 20, ' '), 413, "Payload Too Large"},
  };
  for (auto& c : cases) {
    auto r = client->Post(c.path, c.body, "application/json");
    ASSERT_TRUE(r) << c.path;
    EXPECT_EQ(r->status, c.status) << c.body.substr(0, 80) << " -> " << r->body;
    EXPECT_NE(json::parse(r->body)["error"].get<std::string>().find(c.says), std::string::npos) << r->body;
  }
  // A client that sends half a request and stalls does not stop the others.
  httplib::Client slow(base);
  std::thread stall([&] {
    httplib::Headers h{{"Content-Length", "100000"}};
    slow.set_write_timeout(1s);
    slow.Post("/v2/models/traffic/infer", h, std::string(10, '{'), "application/json");
  });
  auto r = client->Post("/v2/models/traffic/infer", image_request().dump(), "application/json");
  stall.join();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
}

// A connection from `source` (an address of the loopback net, 127.0.0.0/8) to HOST:PORT that
// sends `text` and stays open; -1 when it cannot connect.
int open_from(const std::string& source, const std::string& host_port, const std::string& text) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in from{}, to{};
  from.sin_family = to.sin_family = AF_INET;
  inet_pton(AF_INET, source.c_str(), &from.sin_addr);
  auto colon = host_port.rfind(':');
  inet_pton(AF_INET, host_port.substr(0, colon).c_str(), &to.sin_addr);
  to.sin_port = htons(static_cast<uint16_t>(std::stoi(host_port.substr(colon + 1))));
  if (bind(fd, reinterpret_cast<sockaddr*>(&from), sizeof from) != 0 ||
      connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to) != 0) {
    close(fd);
    return -1;
  }
  if (send(fd, text.data(), text.size(), MSG_NOSIGNAL) < 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// What the server sent on `fd` before closing it, waiting up to `wait`; nullopt if it is still open.
std::optional<std::string> closed_with(int fd, std::chrono::milliseconds wait) {
  std::string got;
  auto until = std::chrono::steady_clock::now() + wait;
  while (std::chrono::steady_clock::now() < until) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 50) <= 0) continue;
    char buf[4096];
    auto n = recv(fd, buf, sizeof buf, 0);
    if (n <= 0) return got;
    got.append(buf, static_cast<size_t>(n));
  }
  return std::nullopt;
}

// What arrives on `fd` until `text` is among it, waiting up to `wait`.
std::string read_until(int fd, const std::string& text, std::chrono::milliseconds wait) {
  std::string got;
  auto until = std::chrono::steady_clock::now() + wait;
  while (got.find(text) == std::string::npos && std::chrono::steady_clock::now() < until) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 50) <= 0) continue;
    char buf[4096];
    auto n = recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    got.append(buf, static_cast<size_t>(n));
  }
  return got;
}

size_t count_of(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// A request's body as a client may send it: in pieces, after the server's "100 Continue", with
// the next request right behind it on the same connection, or cut short.
TEST_F(http_cluster, a_body_arrives_in_pieces_after_100_continue_or_behind_another_and_a_short_one_gets_nothing) {
  start();
  wait_ready();
  auto ingress = base.substr(7);
  auto body = image_request().dump();
  auto head = [&](const std::string& extra) {
    return "POST /v2/models/traffic/infer HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: " +
           std::to_string(body.size()) + "\r\n" + extra + "\r\n";
  };
  // Expect: 100-continue: the body goes once the server says so, in four pieces.
  int fd = open_from("127.0.0.1", ingress, head("Expect: 100-continue\r\nConnection: close\r\n"));
  ASSERT_GE(fd, 0);
  EXPECT_EQ(read_until(fd, "\r\n\r\n", 5s), "HTTP/1.1 100 Continue\r\n\r\n");
  for (size_t at = 0, piece = body.size() / 4 + 1; at < body.size(); at += piece) {
    ASSERT_GT(send(fd, body.data() + at, std::min(piece, body.size() - at), MSG_NOSIGNAL), 0);
    std::this_thread::sleep_for(20ms);
  }
  auto answered = closed_with(fd, 5s);
  close(fd);
  ASSERT_TRUE(answered);
  EXPECT_EQ(answered->rfind("HTTP/1.1 200", 0), 0u) << *answered;
  EXPECT_NE(answered->find("\"outputs\""), std::string::npos) << *answered;
  // Two requests in one write: the second is read from what followed the first's body.
  fd = open_from("127.0.0.1", ingress, head("") + body + head("Connection: close\r\n") + body);
  ASSERT_GE(fd, 0);
  auto both = closed_with(fd, 5s);
  close(fd);
  ASSERT_TRUE(both);
  EXPECT_EQ(count_of(*both, "HTTP/1.1 200 OK"), 2u) << *both;
  // A body cut short by the client's close is answered by nothing, and the node serves on.
  fd = open_from("127.0.0.1", ingress, head("") + body.substr(0, 10));
  ASSERT_GE(fd, 0);
  shutdown(fd, SHUT_WR);
  auto cut = closed_with(fd, 5s);
  close(fd);
  ASSERT_TRUE(cut);
  EXPECT_EQ(*cut, "");
  auto r = client->Post("/v2/models/traffic/infer", body, "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
}

// BYTES tensors: a text pipeline of emulated models whose first input and last output are strings
// of bytes, over JSON (strings) and the binary extension (each a 4-byte length and its bytes), one
// request at a time and as a batch, and the load client's binary requests.
TEST_F(http_cluster, bytes_tensors_travel_as_json_strings_and_length_prefixed_binary) {
  std::ofstream(dir / "cluster.yaml") << R"(cluster: {name: text}
nodes:
  - {name: ctl, address: tcp://127.0.0.1:0, roles: [controller, frontend], http: "127.0.0.1:0"}
  - {name: w1, address: tcp://127.0.0.1:0, roles: [worker], devices: [{kind: emulated, count: 1}]}
models:
  - {name: tok, input: {dtype: bytes, shape: [2]}, output: {dtype: int64, shape: [8]}, max_batch: 8,
     profile: {alpha_ms: 0.1, beta_ms: 1}}
  - {name: label, input: {dtype: int64, shape: [8]}, output: {dtype: bytes, shape: [1]}, max_batch: 8,
     profile: {alpha_ms: 0.1, beta_ms: 1}}
pipelines:
  - name: text
    slo_ms: 200
    stages: [{name: tokenize, model: tok}, {name: classify, model: label, after: [tokenize]}]
runtime: {heartbeat_ms: 100, peer_timeout_ms: 500}
)";
  start();
  wait_ready();
  auto meta = json::parse(client->Get("/v2/models/text")->body);
  EXPECT_EQ(meta["inputs"][0]["datatype"], "BYTES");
  EXPECT_EQ(meta["outputs"][0]["datatype"], "BYTES");
  auto ask = [&](json shape, json data) {
    json req{{"inputs", {{{"name", "input"}, {"shape", shape}, {"datatype", "BYTES"}, {"data", data}}}}};
    return client->Post("/v2/models/text/infer", req.dump(), "application/json");
  };
  auto one = ask({2}, {"hello", "w\u00f6rld"});
  ASSERT_TRUE(one);
  ASSERT_EQ(one->status, 200) << one->body;
  auto out = json::parse(one->body)["outputs"][0];
  EXPECT_EQ(out["datatype"], "BYTES");
  EXPECT_EQ(out["shape"], json({1}));
  ASSERT_TRUE(out["data"].is_array() && out["data"].size() == 1 && out["data"][0].is_string()) << out.dump();
  std::string label = out["data"][0];
  EXPECT_FALSE(label.empty());
  // A batch of two: each row answered as it is alone, in order.
  auto two = ask({2, 2}, json::array({json::array({"other", "text"}), json::array({"hello", "w\u00f6rld"})}));
  ASSERT_TRUE(two);
  ASSERT_EQ(two->status, 200) << two->body;
  auto rows = json::parse(two->body)["outputs"][0];
  EXPECT_EQ(rows["shape"], json({2, 1}));
  ASSERT_EQ(rows["data"].size(), 2u) << rows.dump();
  EXPECT_EQ(rows["data"][1], label);
  // The binary extension: the same strings length-prefixed, the output asked for as binary.
  std::string binary;
  for (std::string x : {"hello", "w\xc3\xb6rld"}) {
    uint32_t n = static_cast<uint32_t>(x.size());
    binary.append(reinterpret_cast<const char*>(&n), 4);
    binary += x;
  }
  auto header = json{{"inputs",
                      {{{"name", "input"},
                        {"shape", {2}},
                        {"datatype", "BYTES"},
                        {"parameters", {{"binary_data_size", binary.size()}}}}}},
                     {"parameters", {{"binary_data_output", true}}}}
                    .dump();
  httplib::Headers h{{"Inference-Header-Content-Length", std::to_string(header.size())}};
  auto bin = client->Post("/v2/models/text/infer", h, header + binary, "application/octet-stream");
  ASSERT_TRUE(bin);
  ASSERT_EQ(bin->status, 200) << bin->body;
  auto length = std::stoul(bin->get_header_value("Inference-Header-Content-Length"));
  auto bout = json::parse(bin->body.substr(0, length))["outputs"][0];
  auto payload = bin->body.substr(length);
  EXPECT_EQ(bout["parameters"]["binary_data_size"], payload.size());
  ASSERT_GE(payload.size(), 4u);
  uint32_t n = 0;
  std::memcpy(&n, payload.data(), 4);
  EXPECT_EQ(payload.substr(4), label) << "the same answer as over JSON";
  EXPECT_EQ(n, label.size());
  // Bytes that are not whole elements, and numbers where strings belong, are the client's fault.
  auto cut_header = json::parse(header);
  cut_header["inputs"][0]["parameters"]["binary_data_size"] = binary.size() - 2;
  auto cut = cut_header.dump();
  httplib::Headers ch{{"Inference-Header-Content-Length", std::to_string(cut.size())}};
  auto torn =
      client->Post("/v2/models/text/infer", ch, cut + binary.substr(0, binary.size() - 2), "application/octet-stream");
  ASSERT_TRUE(torn);
  EXPECT_EQ(torn->status, 400);
  EXPECT_NE(torn->body.find("4-byte little-endian length"), std::string::npos) << torn->body;
  auto numbers = ask({2}, {1, 2});
  ASSERT_TRUE(numbers);
  EXPECT_EQ(numbers->status, 400);
  EXPECT_NE(numbers->body.find("2 strings"), std::string::npos) << numbers->body;
  // The load client's binary requests of generated words.
  load_over_http("text");
}

// A slowloris: 300 connections from one address that each send half a request header. Past the
// address's limit they are answered 429 and closed; the rest are closed once their request is
// late; clients at other addresses are served meanwhile; the metrics count both refusals.
TEST_F(http_cluster, slow_clients_at_one_address_stall_nobody_else_and_are_cut_off) {
  auto yaml = read_text(dir / "cluster.yaml");
  yaml.replace(yaml.find("runtime: {"), 10,
               "runtime: {http_request_timeout_ms: 2000, http_connections_per_address: 100, ");
  std::ofstream(dir / "cluster.yaml") << yaml;
  start();
  wait_ready();
  auto ingress = base.substr(7);
  std::vector<int> slow;
  for (int i = 0; i < 300; ++i) {
    int fd = open_from("127.0.0.2", ingress, "POST /v2/models/traffic/infer HTTP/1.1\r\nHost: x\r\nContent-Le");
    ASSERT_GE(fd, 0) << "connection " << i;
    slow.push_back(fd);
  }
  // Every request of a client at another address is served while they hang.
  for (int i = 0; i < 20; ++i) {
    auto r = client->Post("/v2/models/traffic/infer", image_request().dump(), "application/json");
    ASSERT_TRUE(r) << i;
    EXPECT_EQ(r->status, 200) << r->body;
  }
  // 200 of them were refused at once, with the reason; the 100 held are cut off at the deadline.
  int refused = 0, cut = 0;
  for (int fd : slow) {
    auto got = closed_with(fd, 6s);
    ASSERT_TRUE(got) << "a slow connection was never closed";
    if (got->rfind("HTTP/1.1 429", 0) == 0) {
      EXPECT_NE(got->find("too many connections from 127.0.0.2"), std::string::npos) << *got;
      ++refused;
    } else {
      EXPECT_EQ(*got, "") << "a request never sent whole gets no answer";
      ++cut;
    }
    close(fd);
  }
  EXPECT_EQ(refused, 200);
  EXPECT_EQ(cut, 100);
  auto metrics = client->Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_NE(metrics->body.find("sloserve_http_refused_total{why=\"connections_per_address\"} 200"), std::string::npos)
      << metrics->body;
  EXPECT_NE(metrics->body.find("sloserve_http_refused_total{why=\"request_timeout\"} 100"), std::string::npos)
      << metrics->body;
  // The address may connect again once its connections are gone.
  int again = open_from("127.0.0.2", ingress, "GET /v2/health/live HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  ASSERT_GE(again, 0);
  auto live = closed_with(again, 5s);
  close(again);
  ASSERT_TRUE(live);
  EXPECT_EQ(live->rfind("HTTP/1.1 200", 0), 0u) << *live;
  // A keep-alive client idle past the deadline finds its connection closed by the server, and the
  // load client sends its next request on a fresh one: a request every 2.5 s, nothing failed.
  ASSERT_EQ(
      run({"sloserve", "load", "-c", (dir / "resolved.yaml").string(), "--pipeline", "traffic", "--rate", "0.4",
           "--arrival", "constant", "--duration", "6", "--protocol", "http", "--json", (dir / "idle.json").string()},
          "idle.log"),
      0);
  auto idle = json::parse(std::ifstream(dir / "idle.json"));
  EXPECT_GE(idle["sent"].get<int>(), 2) << idle.dump(2);
  EXPECT_EQ(idle["errors"].get<int>(), 0) << idle.dump(2);
  EXPECT_EQ(idle["lost"].get<int>(), 0) << idle.dump(2);
}

// Under security: TLS with the file's certificate, and a bearer token from the list for all but
// the health probes; the load client speaks it with --token.
TEST_F(http_cluster, under_security_it_takes_tls_and_refuses_a_request_without_an_admitted_token) {
  std::ofstream(dir / "cluster.yaml", std::ios::app)
      << "security: {keys: keys, tls_cert: cert.pem, tls_key: key.pem, tokens: [token],\n"
         "           tenants: [{name: slow, tokens: [slow-token], rate: 0.5}]}\n";
  ASSERT_EQ(run({"sloserve", "keys", "-c", (dir / "cluster.yaml").string()}, "keys.log"), 0);
  ASSERT_EQ(run({"/usr/bin/openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj",
                 "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", (dir / "key.pem").string(),
                 "-out", (dir / "cert.pem").string()},
                "openssl.log"),
            0);
  std::ofstream(dir / "token") << "s3cret-token-for-the-test\n";
  std::ofstream(dir / "slow-token") << "the-slow-tenants-own-token\n";
  start("", true);
  wait_ready();  // the probes need no token
  auto body = image_request().dump();
  auto none = client->Post("/v2/models/traffic/infer", body, "application/json");
  ASSERT_TRUE(none) << httplib::to_string(none.error());
  EXPECT_EQ(none->status, 401);
  EXPECT_NE(none->body.find("Bearer token is required"), std::string::npos) << none->body;
  client->set_bearer_token_auth("not-the-token-at-all");
  EXPECT_EQ(client->Post("/v2/models/traffic/infer", body, "application/json")->status, 401);
  EXPECT_EQ(client->Get("/v2/models/traffic")->status, 401);
  EXPECT_EQ(client->Get("/metrics")->status, 401);
  client->set_bearer_token_auth("s3cret-token-for-the-test");
  auto ok = client->Post("/v2/models/traffic/infer", body, "application/json");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200) << ok->body;
  EXPECT_EQ(client->Get("/metrics")->status, 200);
  // Plain HTTP on the TLS port gets nowhere.
  httplib::Client plain("http://" + base.substr(8));
  plain.set_read_timeout(2s);
  auto p = plain.Get("/v2/health/live");
  EXPECT_TRUE(!p || p->status != 200);
  // The load client over TLS with the token.
  load_over_http("traffic", {"--token", (dir / "token").string()});
  // A tenant's token is that tenant (capped at 0.5/s: one now, the next refused with the reason);
  // under tokens, a Sloserve-Tenant header claims nothing.
  client->set_bearer_token_auth("the-slow-tenants-own-token");
  EXPECT_EQ(client->Post("/v2/models/traffic/infer", body, "application/json")->status, 200);
  auto capped = client->Post("/v2/models/traffic/infer", body, "application/json");
  ASSERT_TRUE(capped);
  EXPECT_EQ(capped->status, 429) << capped->body;  // Too Many Requests
  EXPECT_NE(capped->body.find("tenant 'slow' is over its rate cap of 0.5 queries/s"), std::string::npos)
      << capped->body;
  client->set_bearer_token_auth("s3cret-token-for-the-test");
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(client->Post("/v2/models/traffic/infer", {{"Sloserve-Tenant", "slow"}}, body, "application/json")->status,
              200);
  auto metrics = client->Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_NE(metrics->body.find(R"(sloserve_tenant_requests_total{tenant="slow",outcome="capped"} 1)"),
            std::string::npos)
      << metrics->body;
  EXPECT_NE(metrics->body.find(R"(sloserve_tenant_requests_total{tenant="slow",outcome="admitted"} 1)"),
            std::string::npos)
      << metrics->body;
}

// A POSIX shared-memory object of `size` bytes, as a client on the node's host makes one.
struct shm_object {
  std::string key;
  size_t size;
  char* p = nullptr;
  explicit shm_object(size_t n) : size(n) {
    key = "/sloserve-http-test-" + std::to_string(getpid());
    int fd = shm_open(key.c_str(), O_CREAT | O_RDWR | O_TRUNC, 0600);
    EXPECT_GE(fd, 0);
    EXPECT_EQ(ftruncate(fd, static_cast<off_t>(n)), 0);
    p = static_cast<char*>(mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
    close(fd);
  }
  ~shm_object() {
    munmap(p, size);
    shm_unlink(key.c_str());
  }
};

// Triton's system shared-memory extension: a client on the node's host registers windows of its
// own shared memory and passes an input and an output through them; what comes back is what the
// same input sent as bytes gets. Bad regions, offsets and sizes get a 400 with the reason.
TEST_F(http_cluster, inputs_and_outputs_pass_through_registered_system_shared_memory) {
  edit_config("runtime: {", "runtime: {client_shared_memory: true, ");
  start();
  wait_ready();
  auto extensions = json::parse(client->Get("/v2")->body)["extensions"];
  EXPECT_NE(std::find(extensions.begin(), extensions.end(), "system_shared_memory"), extensions.end()) << extensions;

  // The answers to the input sent as bytes, through the binary extension: the classify stage
  // runs once or twice a query (fanout 1.5), so both sizes of answer are kept.
  std::vector<float> data(3 * 32 * 32);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<float>(i % 7) / 7;
  std::string raw(reinterpret_cast<const char*>(data.data()), data.size() * sizeof(float));
  auto header = json{{"inputs",
                      {{{"name", "input"},
                        {"shape", {3, 32, 32}},
                        {"datatype", "FP32"},
                        {"parameters", {{"binary_data_size", raw.size()}}}}}},
                     {"outputs", {{{"name", "output"}, {"parameters", {{"binary_data", true}}}}}}}
                    .dump();
  std::map<size_t, std::string> answers;  // by size
  for (int i = 0; i < 8 && answers.size() < 2; ++i) {
    auto plain =
        client->Post("/v2/models/traffic/infer", {{"Inference-Header-Content-Length", std::to_string(header.size())}},
                     header + raw, "application/octet-stream");
    ASSERT_TRUE(plain);
    ASSERT_EQ(plain->status, 200) << plain->body;
    auto answer = plain->body.substr(std::stoul(plain->get_header_value("Inference-Header-Content-Length")));
    answers[answer.size()] = answer;
  }

  shm_object obj(65536);
  std::memcpy(obj.p + 4096, raw.data(), raw.size());
  auto post = [&](const std::string& path, const json& body) {
    return client->Post(path, body.dump(), "application/json");
  };
  auto region = [&](const std::string& name, size_t offset, size_t size) {
    return post("/v2/systemsharedmemory/region/" + name + "/register",
                {{"key", obj.key}, {"offset", offset}, {"byte_size", size}});
  };
  ASSERT_EQ(region("in", 4096, raw.size())->status, 200);
  ASSERT_EQ(region("out", 32768, 16384)->status, 200);
  auto status = client->Get("/v2/systemsharedmemory/status");
  ASSERT_TRUE(status && status->status == 200);
  EXPECT_EQ(json::parse(status->body).size(), 2u) << status->body;
  auto one = client->Get("/v2/systemsharedmemory/region/in/status");
  ASSERT_TRUE(one && one->status == 200);
  EXPECT_EQ(json::parse(one->body),
            json::parse(R"([{"name": "in", "key": ")" + obj.key + R"(", "offset": 4096, "byte_size": )" +
                        std::to_string(raw.size()) + "}]"));

  auto shm_request = [&](const std::string& in, size_t in_size, size_t in_offset = 0) {
    return json{{"inputs",
                 {{{"name", "input"},
                   {"shape", {3, 32, 32}},
                   {"datatype", "FP32"},
                   {"parameters",
                    {{"shared_memory_region", in},
                     {"shared_memory_offset", in_offset},
                     {"shared_memory_byte_size", in_size}}}}}},
                {"outputs",
                 {{{"name", "output"},
                   {"parameters", {{"shared_memory_region", "out"}, {"shared_memory_byte_size", 16384}}}}}}};
  };
  auto served = post("/v2/models/traffic/infer", shm_request("in", raw.size()));
  ASSERT_TRUE(served);
  ASSERT_EQ(served->status, 200) << served->body;
  auto out = json::parse(served->body)["outputs"][0];
  EXPECT_FALSE(out.contains("data")) << out;
  EXPECT_EQ(out["parameters"]["shared_memory_region"], "out");
  auto written = out["parameters"]["shared_memory_byte_size"].get<size_t>();
  ASSERT_EQ(answers.count(written), 1u) << out;
  EXPECT_EQ(std::string(obj.p + 32768, written), answers[written]) << "the output in the region is the bytes' answer";

  auto refused = [&](const httplib::Result& r, const std::string& why) {
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 400) << r->body;
    EXPECT_NE(r->body.find(why), std::string::npos) << r->body;
  };
  refused(post("/v2/models/traffic/infer", shm_request("zzz", raw.size())), "no shared-memory region 'zzz'");
  refused(post("/v2/models/traffic/infer", shm_request("in", raw.size() - 4)), "is not the 12288 bytes");
  refused(post("/v2/models/traffic/infer", shm_request("in", raw.size(), 8)), "past its");
  auto both = shm_request("in", raw.size());
  both["inputs"][0]["data"] = data;
  refused(post("/v2/models/traffic/infer", both), "also carries data");
  auto half = shm_request("in", raw.size());
  half["inputs"][0]["parameters"].erase("shared_memory_byte_size");
  refused(post("/v2/models/traffic/infer", half), "must both be given");
  refused(region("bad", 0, 10 * 65536), "past the end");
  refused(region("in", 0, 10), "already registered");
  refused(post("/v2/systemsharedmemory/region/x/register", {{"key", "/etc/passwd"}, {"byte_size", 8}}),
          "not a POSIX shared-memory name");
  ASSERT_EQ(region("tiny", 0, 8)->status, 200);
  auto small = shm_request("in", raw.size());
  small["outputs"][0]["parameters"]["shared_memory_region"] = "tiny";
  small["outputs"][0]["parameters"]["shared_memory_byte_size"] = 8;
  refused(post("/v2/models/traffic/infer", small), "more than the shared_memory_byte_size 8");
  refused(client->Get("/v2/cudasharedmemory/status"), "CUDA shared memory is unavailable");
  // A region name in a path is percent-decoded, as a client's library encodes it.
  ASSERT_EQ(region("in%20frames", 0, 8)->status, 200);
  auto spaced = client->Get("/v2/systemsharedmemory/region/in%20frames/status");
  ASSERT_TRUE(spaced && spaced->status == 200);
  EXPECT_EQ(json::parse(spaced->body)[0]["name"], "in frames") << spaced->body;
  refused(region("in%zzframes", 0, 8), "not followed by two hex digits");

  ASSERT_EQ(client->Post("/v2/systemsharedmemory/region/in/unregister", "", "application/json")->status, 200);
  refused(client->Get("/v2/systemsharedmemory/region/in/status"), "no region 'in'");
  refused(post("/v2/models/traffic/infer", shm_request("in", raw.size())), "no shared-memory region 'in'");
  ASSERT_EQ(client->Post("/v2/systemsharedmemory/unregister", "", "application/json")->status, 200);
  EXPECT_EQ(json::parse(client->Get("/v2/systemsharedmemory/status")->body), json::array());
  // The load client over HTTP registers one region, names it in every request, and unregisters it.
  auto s = load_over_http("traffic", {"--shared-memory"});
  EXPECT_EQ(json::parse(client->Get("/v2/systemsharedmemory/status")->body), json::array());
  auto metrics = client->Get("/metrics")->body;
  EXPECT_NE(metrics.find(R"(sloserve_shared_memory_total{what="registered"} 5)"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find(R"(sloserve_shared_memory_total{what="unregistered"} 5)"), std::string::npos) << metrics;
  // Every request the load client sent read its input from the region.
  auto read_line = metrics.find(R"(sloserve_shared_memory_total{what="read"} )");
  ASSERT_NE(read_line, std::string::npos) << metrics;
  EXPECT_GE(std::stoll(metrics.substr(read_line + 42)), s["sent"].get<long long>()) << metrics;
  EXPECT_EQ(client->Post("/v2/models/traffic/infer", image_request().dump(), "application/json")->status, 200);
}

TEST_F(http_cluster, shared_memory_is_off_unless_the_file_turns_it_on) {
  start();
  wait_ready();
  auto extensions = json::parse(client->Get("/v2")->body)["extensions"];
  EXPECT_EQ(std::find(extensions.begin(), extensions.end(), "system_shared_memory"), extensions.end()) << extensions;
  auto r = client->Post("/v2/systemsharedmemory/region/in/register",
                        R"({"key": "/sloserve-x", "offset": 0, "byte_size": 16})", "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_NE(r->body.find("runtime.client_shared_memory"), std::string::npos) << r->body;
}

// A free TCP port on loopback for a server that cannot be told to pick one (Prometheus).
int free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  int port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0)
    port = ntohs(a.sin_port);
  ::close(fd);
  return port;
}

// /metrics on the frontend's HTTP port and on a worker's own port (nodes[].metrics), in the
// exposition format that promtool accepts, scraped by a real Prometheus server.
TEST_F(http_cluster, metrics_pass_promtool_and_a_prometheus_server_scrapes_them) {
  auto yaml = read_text(dir / "cluster.yaml");
  yaml.replace(yaml.find("devices: [{kind: emulated"), 8, "metrics: \"127.0.0.1:0\", devices:");
  std::ofstream(dir / "cluster.yaml") << yaml;
  start();
  wait_ready();
  ASSERT_EQ(run({"sloserve", "load", "-c", (dir / "resolved.yaml").string(), "--pipeline", "traffic", "--rate", "200",
                 "--duration", "2", "--protocol", "http", "--json", (dir / "load.json").string()},
                "load.log"),
            0);
  auto summary = json::parse(std::ifstream(dir / "load.json"));
  auto sent = summary["sent"].get<int>();
  // Over HTTP too, the load client breaks latency down by the server's timing.
  EXPECT_GT(summary["latency_breakdown_ms"]["exec"]["p50"].get<double>(), 0) << summary.dump(2);
  // Two requests refused before they reach a pipeline: an unknown pipeline and a malformed body.
  EXPECT_EQ(client->Post("/v2/models/nope/infer", "{}", "application/json")->status, 400);
  EXPECT_EQ(client->Post("/v2/models/traffic/infer", "{", "application/json")->status, 400);
  auto resolved = sloserve::load_cluster_config(dir / "resolved.yaml");
  ASSERT_TRUE(resolved) << resolved.error_text();
  auto worker = resolved.config->find_node("w1")->metrics;
  ASSERT_NE(worker.substr(worker.rfind(':')), ":0") << "up resolves the metrics port";
  httplib::Client w("http://" + worker);
  auto front = client->Get("/metrics"), back = w.Get("/metrics");
  ASSERT_TRUE(front && back);
  ASSERT_EQ(front->status, 200);
  ASSERT_EQ(back->status, 200);
  EXPECT_EQ(front->get_header_value("Content-Type").rfind("text/plain; version=0.0.4", 0), 0u);

  // Every request the load client sent is counted once, by outcome; the series a dashboard needs
  // are there, on the node that knows them.
  uint64_t counted = 0;
  std::istringstream lines(front->body);
  for (std::string line; std::getline(lines, line);)
    if (line.rfind("sloserve_requests_total{pipeline=\"traffic\"", 0) == 0)
      counted += std::stoull(line.substr(line.rfind(' ') + 1));
  EXPECT_EQ(counted, static_cast<uint64_t>(sent)) << front->body;
  // The ingress counts every reply by status, the refused ones too.
  EXPECT_NE(front->body.find("sloserve_ingress_replies_total{protocol=\"http\",code=\"400\"} 2"), std::string::npos)
      << front->body;
  EXPECT_NE(front->body.find("sloserve_ingress_replies_total{protocol=\"http\",code=\"200\"} "), std::string::npos);
  EXPECT_NE(front->body.find("sloserve_build_info{version=\""), std::string::npos);
  for (auto* name : {"sloserve_request_duration_seconds_bucket{pipeline=\"traffic\",le=\"+Inf\"}",
                     "sloserve_stage_duration_seconds_count{pipeline=\"traffic\",stage=\"detect\"}",
                     "sloserve_slo_attainment_ratio{pipeline=\"traffic\"}", "sloserve_plan_devices ",
                     "sloserve_instances{model=\"det\"}"})
    EXPECT_NE(front->body.find(name), std::string::npos) << name << " in\n" << front->body;
  for (auto* name :
       {"sloserve_batch_size_bucket{model=\"det\",le=\"1\"}", "sloserve_queue_length{model=\"det\",device=\"w1/0\"}",
        "sloserve_device_busy_ratio{device=\"w1/0\"}", "sloserve_node_info{node=\"w1\"} 1",
        "sloserve_device_memory_used_bytes{device=\"w1/0\",model=\"det\"}"})
    EXPECT_NE(back->body.find(name), std::string::npos) << name << " in\n" << back->body;

  for (auto [name, body] : {std::pair{"front", front->body}, std::pair{"back", back->body}}) {
    std::ofstream(dir / (std::string(name) + ".prom")) << body;
    ASSERT_EQ(run({"/bin/sh", "-c", "promtool check metrics < " + (dir / (std::string(name) + ".prom")).string()},
                  (std::string(name) + "-promtool.log").c_str()),
              0)
        << read_text(dir / (std::string(name) + "-promtool.log"));
  }

  // A Prometheus server scrapes both every second; its query API then has the series.
  int port = free_port();
  std::ofstream(dir / "prometheus.yml") << "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
                                        << "scrape_configs:\n  - job_name: sloserve\n    static_configs:\n"
                                        << "      - targets: ['" << base.substr(7) << "', '" << worker << "']\n";
  auto prometheus = sloserve::spawn_child(
      "/usr/bin/prometheus",
      {"prometheus", "--config.file=" + (dir / "prometheus.yml").string(),
       "--storage.tsdb.path=" + (dir / "tsdb").string(), "--web.listen-address=127.0.0.1:" + std::to_string(port)},
      dir / "prometheus.log");
  httplib::Client api("http://127.0.0.1:" + std::to_string(port));
  api.set_connection_timeout(1s);
  api.set_read_timeout(2s);
  double total = 0, busy_series = 0;
  for (int i = 0; i < 300 && (total <= 0 || busy_series == 0); ++i) {
    std::this_thread::sleep_for(100ms);
    auto q = api.Get("/api/v1/query?query=sum(sloserve_requests_total%7Bpipeline%3D%22traffic%22%7D)");
    if (!q || q->status != 200) continue;
    auto result = json::parse(q->body)["data"]["result"];
    if (result.empty()) continue;
    total = std::stod(result[0]["value"][1].get<std::string>());
    auto b = api.Get("/api/v1/query?query=sloserve_device_busy_ratio");
    if (b && b->status == 200) busy_series = static_cast<double>(json::parse(b->body)["data"]["result"].size());
  }
  prometheus.stop();
  EXPECT_EQ(total, sent) << read_text(dir / "prometheus.log");
  EXPECT_EQ(busy_series, 1) << "the worker's own port was scraped too";
}

}  // namespace
