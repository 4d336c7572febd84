#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "config/cluster_config.hpp"
#include "scheduling/policies/ipa/config.hpp"
#include "scheduling/policies/jellyfish/config.hpp"
#include "scheduling/policies/registry.hpp"

namespace sloserve {
namespace {

const std::string nodes = R"(nodes:
  - name: ctl
    address: tcp://127.0.0.1:7100
    roles: [controller, frontend]
  - name: w1
    address: tcp://127.0.0.1:7101
    roles: [worker]
    devices: [{kind: emulated, count: 2}]
)";

const std::string models = R"(models:
  - name: a
    input: {dtype: float32, shape: [4]}
    output: {dtype: float32, shape: [3, 2]}
    max_batch: 8
    profile: {batch: [1, 2, 4, 8], latency_ms: [10, 12, 16, 24]}
  - name: b
    input: {dtype: float32, shape: [2]}
    output: {dtype: float32, shape: [1]}
    max_batch: 4
    profile: {alpha_ms: 1, beta_ms: 4}
)";

std::string with_pipelines(const std::string& p) {
  return nodes + models + p;
}

// Parses and returns the errors as one text; expects failure.
std::string errors_of(const std::string& yaml) {
  auto r = parse_cluster_config(yaml, "c.yaml");
  EXPECT_FALSE(r) << "expected an error in:\n" << yaml;
  return r.error_text();
}

TEST(cluster_config, valid_file_loads_with_resolved_pipeline) {
  auto r = parse_cluster_config(with_pipelines(R"(pipelines:
  - name: p
    slo_ms: 100
    stages:
      - {name: s1, model: a}
      - {name: s2, model: b, after: [s1], fanout: 1.5}
)"),
                                "c.yaml");
  ASSERT_TRUE(r) << r.error_text();
  auto& cfg = *r.config;
  ASSERT_EQ(cfg.pipelines.size(), 1u);
  auto& p = cfg.pipelines[0];
  EXPECT_EQ(p.stages[1].parents, std::vector<size_t>{0});
  EXPECT_DOUBLE_EQ(*p.stages[1].fanout, 1.5);
  EXPECT_EQ(cfg.nodes[1].device_count(), 2);
  EXPECT_EQ(cfg.models[0].batch_limit(), 8);
  EXPECT_EQ(cfg.controller()->name, "ctl");
}

TEST(cluster_config, bad_yaml_names_line_and_column) {
  auto e = errors_of("nodes: [\n  {name: x,\n");
  EXPECT_NE(e.find("c.yaml:"), std::string::npos) << e;
  EXPECT_NE(e.find("bad YAML"), std::string::npos) << e;
}

TEST(cluster_config, unknown_model_points_at_the_stage) {
  auto e = errors_of(with_pipelines(R"(pipelines:
  - name: p
    slo_ms: 100
    stages:
      - {name: s1, model: nope}
)"));
  EXPECT_NE(e.find("c.yaml:24:9: pipeline 'p': stage 's1' uses unknown model 'nope'"), std::string::npos) << e;
}

TEST(cluster_config, cycle_is_reported) {
  auto e = errors_of(with_pipelines(R"(pipelines:
  - name: p
    slo_ms: 100
    stages:
      - {name: s1, model: a, after: [s2]}
      - {name: s2, model: b, after: [s1]}
)"));
  EXPECT_NE(e.find("c.yaml:24:9: pipeline 'p': stage 's1' is on a cycle"), std::string::npos) << e;
  EXPECT_NE(e.find("c.yaml:25:9: pipeline 'p': stage 's2' is on a cycle"), std::string::npos) << e;
}

TEST(cluster_config, stage_below_a_cycle_is_unreachable) {
  auto e = errors_of(with_pipelines(R"(pipelines:
  - name: p
    slo_ms: 100
    stages:
      - {name: root, model: a}
      - {name: x, model: a, after: [y]}
      - {name: y, model: a, after: [x]}
      - {name: z, model: b, after: [x]}
)"));
  EXPECT_NE(e.find("c.yaml:27:9: pipeline 'p': stage 'z' is unreachable"), std::string::npos) << e;
}

TEST(cluster_config, duplicate_names_are_reported) {
  auto e = errors_of(with_pipelines(R"(pipelines:
  - name: p
    slo_ms: 100
    stages:
      - {name: s1, model: a}
      - {name: s1, model: b, after: [s1]}
)"));
  EXPECT_NE(e.find("c.yaml:25:9: pipeline 'p': duplicate stage name 's1'"), std::string::npos) << e;
  auto dup_node = errors_of(R"(nodes:
  - {name: n, address: tcp://127.0.0.1:1, roles: [controller, frontend]}
  - {name: n, address: tcp://127.0.0.1:2, roles: [worker], devices: [{kind: emulated}]}
)");
  EXPECT_NE(dup_node.find("c.yaml:3:12: duplicate node name 'n'"), std::string::npos) << dup_node;
}

TEST(cluster_config, missing_and_non_positive_slo) {
  auto missing = errors_of(with_pipelines(R"(pipelines:
  - name: p
    stages:
      - {name: s1, model: a}
)"));
  EXPECT_NE(missing.find("c.yaml:21:5: pipeline 'p' is missing 'slo_ms'"), std::string::npos) << missing;
  auto zero = errors_of(with_pipelines(R"(pipelines:
  - name: p
    slo_ms: 0
    stages:
      - {name: s1, model: a}
)"));
  EXPECT_NE(zero.find("c.yaml:22:13: pipeline 'p' slo_ms must be positive"), std::string::npos) << zero;
}

TEST(cluster_config, slo_below_fastest_path) {
  // a at batch 1 takes 10 ms, b takes 5 ms: 15 ms is the fastest the chain can answer.
  auto e = errors_of(with_pipelines(R"(pipelines:
  - name: p
    slo_ms: 14
    stages:
      - {name: s1, model: a}
      - {name: s2, model: b, after: [s1]}
)"));
  EXPECT_NE(e.find("c.yaml:22:13: pipeline 'p' slo_ms 14 is below"), std::string::npos) << e;
  EXPECT_NE(e.find("below its fastest possible path (15"), std::string::npos) << e;
}

TEST(cluster_config, a_leaf_may_have_its_own_slo_within_the_pipelines) {
  // a takes 10 ms at batch 1, b 5 ms.
  auto ok = parse_cluster_config(with_pipelines(R"(pipelines:
  - name: p
    slo_ms: 100
    stages:
      - {name: s1, model: a}
      - {name: fast, model: b, after: [s1], slo_ms: 30}
      - {name: slow, model: a, after: [s1]}
)"),
                                 "c.yaml");
  ASSERT_TRUE(ok) << ok.error_text();
  auto& p = ok.config->pipelines[0];
  EXPECT_DOUBLE_EQ(path_slo_ms(p, 1), 30);
  EXPECT_DOUBLE_EQ(path_slo_ms(p, 2), 100);
  auto e = errors_of(with_pipelines(R"(pipelines:
  - name: p
    slo_ms: 100
    stages:
      - {name: s1, model: a, slo_ms: 50}
      - {name: fast, model: b, after: [s1], slo_ms: 14}
      - {name: slow, model: a, after: [s1], slo_ms: 120}
)"));
  EXPECT_NE(e.find("c.yaml:24:38: pipeline 'p' stage 's1' slo_ms: only a leaf stage"), std::string::npos) << e;
  EXPECT_NE(e.find("c.yaml:25:53: pipeline 'p' stage 'fast' slo_ms 14 is below its fastest possible path (15"),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("c.yaml:26:53: pipeline 'p' stage 'slow' slo_ms 120 must be positive and at most"),
            std::string::npos)
      << e;
}

TEST(cluster_config, no_frontend) {
  auto e = errors_of(R"(nodes:
  - {name: n, address: tcp://127.0.0.1:1, roles: [controller, worker], devices: [{kind: emulated}]}
)");
  EXPECT_NE(e.find("c.yaml:2:3: no node has the frontend role"), std::string::npos) << e;
}

TEST(cluster_config, bad_address) {
  auto e = errors_of(R"(nodes:
  - {name: n, address: "tcp://127.0.0.1:99999", roles: [controller, frontend]}
  - {name: m, address: "udp://x", roles: [worker], devices: [{kind: emulated}]}
)");
  EXPECT_NE(e.find("c.yaml:2:24: node 'n': address 'tcp://127.0.0.1:99999' has an invalid port"), std::string::npos)
      << e;
  EXPECT_NE(e.find("c.yaml:3:24: node 'm': address 'udp://x' must be"), std::string::npos) << e;
}

// A StatefulSet's workers as one entry: `replicas` names them NAME-0 ... and numbers their addresses.
TEST(cluster_config, a_node_with_replicas_stands_for_numbered_nodes) {
  auto r = parse_cluster_config(R"(nodes:
  - {name: ctl, address: "tcp://ctl:7100", roles: [controller, frontend]}
  - {name: w, replicas: 3, address: "tcp://w-{i}.w:7100", metrics: "0.0.0.0:91{i}0", roles: [worker],
     devices: [{kind: emulated}]}
)" + models + "pipelines:\n  - {name: p, slo_ms: 100, stages: [{name: s, model: b}]}\n",
                                "c.yaml");
  ASSERT_TRUE(r) << r.error_text();
  ASSERT_EQ(r.config->nodes.size(), 4u);
  EXPECT_EQ(r.config->nodes[1].name, "w-0");
  EXPECT_EQ(r.config->nodes[3].name, "w-2");
  EXPECT_EQ(r.config->nodes[3].address, "tcp://w-2.w:7100");
  EXPECT_EQ(r.config->nodes[2].metrics, "0.0.0.0:9110");
  auto again = parse_cluster_config(to_yaml(*r.config), "again.yaml");
  ASSERT_TRUE(again) << again.error_text();
  EXPECT_EQ(again.config->nodes.size(), 4u) << "written back one by one";
  auto e = errors_of(R"(nodes:
  - {name: ctl, address: "tcp://ctl:7100", roles: [controller, frontend]}
  - {name: w, replicas: 2, address: "tcp://w:7100", roles: [worker], devices: [{kind: emulated}]}
  - {name: v, replicas: 0, address: "tcp://v:7100", roles: [worker], devices: [{kind: emulated}]}
)");
  EXPECT_NE(e.find("c.yaml:3:37: node 'w' has 2 replicas: its address needs {i}"), std::string::npos) << e;
  EXPECT_NE(e.find("c.yaml:4:25: node 'v' replicas must be in [1, 1000]"), std::string::npos) << e;
}

TEST(cluster_config, the_http_ingress_and_tensor_names_are_checked_and_round_trip) {
  auto e = errors_of(R"(nodes:
  - {name: n, address: "tcp://127.0.0.1:1", roles: [controller, frontend], http: "127.0.0.1:99999"}
  - {name: m, address: "tcp://127.0.0.1:2", roles: [worker], http: "127.0.0.1:8000", devices: [{kind: emulated}]}
  - {name: o, address: "tcp://127.0.0.1:3", roles: [frontend], http: "8000"}
  - {name: q, address: "tcp://127.0.0.1:4", roles: [worker], grpc: "127.0.0.1:8001", devices: [{kind: emulated}]}
)");
  EXPECT_NE(e.find("node 'q' has grpc but not the frontend role"), std::string::npos) << e;
  EXPECT_NE(e.find("c.yaml:2:82: node 'n' http: '127.0.0.1:99999' has an invalid port"), std::string::npos) << e;
  EXPECT_NE(e.find("c.yaml:3:68: node 'm' has http but not the frontend role"), std::string::npos) << e;
  EXPECT_NE(e.find("node 'o' http: '8000' must be HOST:PORT"), std::string::npos) << e;
  auto named = R"(nodes:
  - {name: n, address: "tcp://127.0.0.1:1", roles: [controller, frontend, worker], http: "0.0.0.0:8000", devices: [{kind: emulated}]}
models:
  - {name: a, input: {dtype: float32, shape: [4], name: pixels}, output: {dtype: float32, shape: [2], name: scores}, max_batch: 8, profile: {alpha_ms: 1, beta_ms: 4}}
pipelines:
  - {name: p, slo_ms: 100, stages: [{name: s, model: a}]}
)";
  auto ok = parse_cluster_config(named, "c.yaml");
  ASSERT_TRUE(ok) << ok.error_text();
  auto back = parse_cluster_config(to_yaml(*ok.config), "again.yaml");
  ASSERT_TRUE(back) << back.error_text();
  EXPECT_EQ(back.config->nodes[0].http, "0.0.0.0:8000");
  EXPECT_EQ(back.config->models[0].input_name, "pixels");
  EXPECT_EQ(back.config->models[0].output_name, "scores");
  // Under security, an http ingress off loopback needs TLS and tokens.
  auto open_http = errors_of(R"(nodes:
  - {name: n, address: "tcp://127.0.0.1:1", roles: [controller, frontend, worker], http: "0.0.0.0:8000", devices: [{kind: emulated}]}
security: {keys: k}
)");
  EXPECT_NE(
      open_http.find("with security on, an http ingress on '0.0.0.0' needs security tls_cert, tls_key and tokens"),
      std::string::npos)
      << open_http;
  auto half_tls = errors_of(R"(nodes:
  - {name: n, address: "tcp://127.0.0.1:1", roles: [controller, frontend, worker], http: "127.0.0.1:8000", devices: [{kind: emulated}]}
security: {keys: k, tls_cert: c.pem}
)");
  EXPECT_NE(half_tls.find("both tls_cert and tls_key"), std::string::npos) << half_tls;
  // /metrics on a node of its own port: any role, the same rules, round-trips.
  auto metrics = errors_of(R"(nodes:
  - {name: n, address: "tcp://127.0.0.1:1", roles: [controller, frontend], http: "127.0.0.1:8000"}
  - {name: m, address: "tcp://127.0.0.1:2", roles: [worker], metrics: "0.0.0.0:9100", devices: [{kind: emulated}]}
  - {name: o, address: "tcp://127.0.0.1:3", roles: [worker], metrics: "127.0.0.1:8000", devices: [{kind: emulated}]}
  - {name: p, address: "tcp://127.0.0.1:4", roles: [worker], metrics: "0.0.0.0:9100", devices: [{kind: emulated}]}
security: {keys: k}
)");
  EXPECT_NE(metrics.find("c.yaml:3:71: node 'm': with security on, metrics on '0.0.0.0' needs"), std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find("c.yaml:4:71: metrics '127.0.0.1:8000' is used twice"), std::string::npos) << metrics;
  EXPECT_EQ(metrics.find("'0.0.0.0:9100' is used twice"), std::string::npos) << metrics;
  auto with_metrics = std::string(named);
  with_metrics.replace(with_metrics.find("http: "), 6, "metrics: \"127.0.0.1:0\", grpc: \"127.0.0.1:0\", http: ");
  auto m = parse_cluster_config(with_metrics, "c.yaml");
  ASSERT_TRUE(m) << m.error_text();
  auto m2 = parse_cluster_config(to_yaml(*m.config), "again.yaml");
  ASSERT_TRUE(m2) << m2.error_text();
  EXPECT_EQ(m2.config->nodes[0].metrics, "127.0.0.1:0");
  EXPECT_EQ(m2.config->nodes[0].grpc, "127.0.0.1:0");
  // A node may bind apart from the address it is dialled at.
  auto bound = std::string(named);
  bound.replace(bound.find("http: "), 6, "bind: \"tcp://0.0.0.0:7101\", http: ");
  auto b = parse_cluster_config(bound, "c.yaml");
  ASSERT_TRUE(b) << b.error_text();
  auto b2 = parse_cluster_config(to_yaml(*b.config), "again.yaml");
  ASSERT_TRUE(b2) << b2.error_text();
  EXPECT_EQ(b2.config->nodes[0].bind, "tcp://0.0.0.0:7101");
  auto bad_bind = std::string(named);
  bad_bind.replace(bad_bind.find("http: "), 6, "bind: \"udp://x\", http: ");
  EXPECT_NE(errors_of(bad_bind).find("bind: address 'udp://x' must be"), std::string::npos) << errors_of(bad_bind);
  auto bad_name = std::string(named);
  bad_name.replace(bad_name.find("name: pixels"), 12, "name: \"a b\"");
  EXPECT_NE(errors_of(bad_name).find("name 'a b' must be letters"), std::string::npos);
}

TEST(cluster_config, unknown_key_and_wrong_type) {
  auto e = errors_of(nodes + R"(models:
  - name: a
    input: {dtype: float32, shape: [4]}
    output: {dtype: float32, shape: [1]}
    max_batch: lots
    profile: {alpha_ms: 1, beta_ms: 1}
    colour: red
)");
  EXPECT_NE(e.find("c.yaml:13:16: 'max_batch' in model 'a' has the wrong type"), std::string::npos) << e;
  EXPECT_NE(e.find("c.yaml:15:5: unknown key 'colour' in model"), std::string::npos) << e;
}

TEST(cluster_config, scheduler_section) {
  auto ok = parse_cluster_config(
      nodes + "scheduler: {policy: batch-oblivious, split: even, epoch_s: 20, rate_band: [0.7, 1.2]}\n", "c.yaml");
  ASSERT_TRUE(ok) << ok.error_text();
  EXPECT_EQ(ok.config->scheduler.policy, scheduler_policy::batch_oblivious);
  EXPECT_DOUBLE_EQ(ok.config->scheduler.rate_band_high, 1.2);
  auto again = parse_cluster_config(to_yaml(*ok.config), "again.yaml");
  ASSERT_TRUE(again) << again.error_text();
  EXPECT_EQ(again.config->scheduler.split, split_policy::even);
  auto e = errors_of(nodes + "scheduler: {policy: magic, rate_band: [1.5, 2]}\n");
  EXPECT_NE(e.find("c.yaml:9:21: scheduler policy 'magic' is not nexus"), std::string::npos) << e;
  EXPECT_NE(e.find("c.yaml:9:39: scheduler rate_band must be"), std::string::npos) << e;
}

TEST(cluster_config, missing_file_is_named) {
  auto r = load_cluster_config("/nonexistent/cluster.yaml");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.errors[0].to_string(), "/nonexistent/cluster.yaml: cannot open the cluster file");
}

TEST(cluster_config, embedded_default_and_yaml_round_trip) {
  auto d = default_config();
  ASSERT_TRUE(d) << d.error_text();
  auto again = parse_cluster_config(to_yaml(*d.config), "again.yaml");
  ASSERT_TRUE(again) << again.error_text();
  EXPECT_EQ(again.config->models.size(), d.config->models.size());
  EXPECT_EQ(again.config->pipelines[0].stages[1].fanout, d.config->pipelines[0].stages[1].fanout);
  EXPECT_EQ(again.config->nodes[0].address, d.config->nodes[0].address);
  // A step profile (a device that pads batches) keeps its flag.
  auto s = default_config();
  s.config->models[0].profile = {{1, 2, 4}, {3, 4, 6}, 0, 0, true};
  auto back = parse_cluster_config(to_yaml(*s.config), "step.yaml");
  ASSERT_TRUE(back) << back.error_text();
  EXPECT_TRUE(back.config->models[0].profile.step);
  EXPECT_FALSE(again.config->models[0].profile.step);
}

TEST(cluster_config, single_node_pools_every_worker_device) {
  auto r = parse_cluster_config(nodes + R"(  - name: w2
    address: tcp://127.0.0.1:7102
    roles: [worker]
    devices: [{kind: emulated, count: 3, models: [a]}]
)" + models,
                                "c.yaml");
  ASSERT_TRUE(r) << r.error_text();
  auto one = single_node(*r.config);
  ASSERT_EQ(one.nodes.size(), 1u);
  EXPECT_EQ(one.nodes[0].device_count(), 5);
  EXPECT_TRUE(one.nodes[0].serves(4, "a"));
  EXPECT_FALSE(one.nodes[0].serves(4, "b"));
  EXPECT_EQ(one.nodes[0].address, "tcp://127.0.0.1:7100");
}

// `run` serves a file in one process: its clients reach it where they reach the file's frontend,
// over every ingress that frontend has.
TEST(cluster_config, single_node_keeps_the_frontends_ingresses) {
  auto r = parse_cluster_config(R"(nodes:
  - name: fe
    address: tcp://127.0.0.1:7100
    bind: tcp://0.0.0.0:7100
    roles: [controller, frontend]
    http: 127.0.0.1:8000
    grpc: 127.0.0.1:8001
    metrics: 127.0.0.1:8002
  - name: w
    address: tcp://127.0.0.1:7101
    roles: [worker]
    cores: 4
    devices: [{kind: emulated, count: 2}]
  - name: w2
    address: tcp://127.0.0.1:7102
    roles: [worker]
    cores: 2
    devices: [{kind: emulated, count: 1}]
)" + models,
                                "c.yaml");
  ASSERT_TRUE(r) << r.error_text();
  auto one = single_node(*r.config);
  ASSERT_EQ(one.nodes.size(), 1u);
  auto& n = one.nodes[0];
  EXPECT_EQ(n.address, "tcp://127.0.0.1:7100");
  EXPECT_EQ(n.bind, "tcp://0.0.0.0:7100");
  EXPECT_EQ(n.http, "127.0.0.1:8000");
  EXPECT_EQ(n.grpc, "127.0.0.1:8001");
  EXPECT_EQ(n.metrics, "127.0.0.1:8002");
  EXPECT_EQ(n.cores, 6);
  EXPECT_EQ(n.device_count(), 3);
}

}  // namespace
}  // namespace sloserve

namespace sloserve {
namespace {

const std::string one_pipeline = "pipelines:\n  - {name: p, slo_ms: 100, stages: [{name: s, model: a}]}\n";

TEST(cluster_config, security_paths_resolve_beside_the_file) {
  auto r = parse_cluster_config(
      with_pipelines(one_pipeline) +
          "security: {keys: keys, clients: [c/alice.pub, \"rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7\"]}\n",
      "/etc/sloserve/cluster.yaml");
  ASSERT_TRUE(r) << r.error_text();
  auto& s = r.config->security;
  EXPECT_TRUE(s.enabled());
  EXPECT_EQ(s.keys, "/etc/sloserve/keys");
  ASSERT_EQ(s.clients.size(), 2u);
  EXPECT_EQ(s.clients[0], "/etc/sloserve/c/alice.pub");
  EXPECT_EQ(s.clients[1], "rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7");  // a Z85 key stays as written
  // Written back and read again, it means the same.
  auto again = parse_cluster_config(to_yaml(*r.config), "/tmp/elsewhere/resolved.yaml");
  ASSERT_TRUE(again) << again.error_text();
  EXPECT_EQ(again.config->security.keys, s.keys);
  EXPECT_EQ(again.config->security.clients, s.clients);
}

TEST(cluster_config, security_needs_a_keys_directory) {
  auto e = errors_of(with_pipelines(one_pipeline) + "security: {clients: [a.pub]}\n");
  EXPECT_NE(e.find("c.yaml:22:11:"), std::string::npos) << e;
  EXPECT_NE(e.find("missing 'keys'"), std::string::npos) << e;
  e = errors_of(with_pipelines(one_pipeline) + "runtime: {max_queued_mb: 0}\n");
  EXPECT_NE(e.find("max_queued_mb"), std::string::npos) << e;
}

// Tenants: under keys, each by its client keys and token files (resolved beside the file);
// without keys, tenants alone (clients name theirs). Checked with their places; written back and
// read again, the same.
TEST(cluster_config, tenants_are_read_checked_and_round_trip) {
  auto r = parse_cluster_config(with_pipelines(one_pipeline) + R"(security:
  keys: keys
  tenants:
    - {name: gold, clients: [c/gold.pub], tokens: [t/gold.token], rate: 300, priority: 1}
    - {name: bronze, rate: 100, weight: 2}
    - {name: free}
)",
                                "/etc/sloserve/cluster.yaml");
  ASSERT_TRUE(r) << r.error_text();
  auto& t = r.config->security.tenants;
  ASSERT_EQ(t.size(), 3u);
  EXPECT_EQ(t[0].clients, std::vector<std::string>{"/etc/sloserve/c/gold.pub"});
  EXPECT_EQ(t[0].tokens, std::vector<std::string>{"/etc/sloserve/t/gold.token"});
  EXPECT_EQ(t[0].share(), 300);  // weighted by its cap
  EXPECT_EQ(t[0].priority, 1);
  EXPECT_EQ(t[1].share(), 2);  // its weight where it names one
  EXPECT_EQ(t[2].share(), 1);  // no cap, no weight
  auto again = parse_cluster_config(to_yaml(*r.config), "/tmp/elsewhere/resolved.yaml");
  ASSERT_TRUE(again) << again.error_text();
  EXPECT_EQ(again.config->security.tenants, t);

  auto alone =
      parse_cluster_config(with_pipelines(one_pipeline) + "security: {tenants: [{name: a}, {name: b}]}\n", "c.yaml");
  ASSERT_TRUE(alone) << alone.error_text();
  EXPECT_FALSE(alone.config->security.enabled());
  EXPECT_EQ(alone.config->security.tenants.size(), 2u);

  auto e = errors_of(with_pipelines(one_pipeline) + R"(security:
  keys: k
  tenants:
    - {name: a, clients: [x.pub], rate: 0}
    - {name: a, clients: [x.pub], weight: -1, colour: red}
)");
  EXPECT_NE(e.find("c.yaml:25:41: tenant 'a' rate must be positive"), std::string::npos) << e;
  EXPECT_NE(e.find("c.yaml:26:14: duplicate tenant 'a'"), std::string::npos) << e;
  EXPECT_NE(e.find("c.yaml:26:27: tenant 'a': '"), std::string::npos) << e;
  EXPECT_NE(e.find("already belongs to tenant 'a'"), std::string::npos) << e;
  EXPECT_NE(e.find("tenant 'a' weight must be positive"), std::string::npos) << e;
  EXPECT_NE(e.find("unknown key 'colour' in tenant"), std::string::npos) << e;
  e = errors_of(with_pipelines(one_pipeline) +
                "security: {tenants: [{name: a, tokens: [a.token]}], tokens: [b.token]}\n");
  EXPECT_NE(e.find("missing 'keys'"), std::string::npos) << e;
}

// How a node's actor threads wait for work: sharing unless the file says stealing; a name
// neither is an error at its place; written back and read again, the same.
TEST(cluster_config, actor_scheduling_is_sharing_unless_stealing_is_named) {
  auto r = parse_cluster_config(with_pipelines(one_pipeline), "c.yaml");
  ASSERT_TRUE(r) << r.error_text();
  EXPECT_EQ(r.config->runtime.actor_scheduling, actor_scheduling_kind::sharing);
  r = parse_cluster_config(with_pipelines(one_pipeline) + "runtime: {actor_scheduling: stealing}\n", "c.yaml");
  ASSERT_TRUE(r) << r.error_text();
  EXPECT_EQ(r.config->runtime.actor_scheduling, actor_scheduling_kind::stealing);
  auto again = parse_cluster_config(to_yaml(*r.config), "c.yaml");
  ASSERT_TRUE(again) << again.error_text();
  EXPECT_EQ(again.config->runtime.actor_scheduling, actor_scheduling_kind::stealing);
  auto e = errors_of(with_pipelines(one_pipeline) + "runtime: {actor_scheduling: spinning}\n");
  EXPECT_NE(e.find("c.yaml:22:"), std::string::npos) << e;
  EXPECT_NE(e.find("spinning"), std::string::npos) << e;
  EXPECT_NE(e.find("sharing"), std::string::npos) << e;
}

TEST(cluster_config, link_probes_are_checked_and_round_trip) {
  auto e = errors_of(with_pipelines(one_pipeline) + "runtime: {link_probe_ms: -1}\n");
  EXPECT_NE(e.find("c.yaml:22:"), std::string::npos) << e;
  EXPECT_NE(e.find("link_probe_ms cannot be negative"), std::string::npos) << e;
  e = errors_of(with_pipelines(one_pipeline) + "runtime: {max_payload_bytes: 4096, link_probe_bytes: 8192}\n");
  EXPECT_NE(e.find("link_probe_bytes must be from 1024 up to max_payload_bytes"), std::string::npos) << e;
  // Not given: no more than the payload limit.
  auto r = parse_cluster_config(with_pipelines(one_pipeline) + "runtime: {max_payload_bytes: 4096}\n", "c.yaml");
  ASSERT_TRUE(r) << r.error_text();
  EXPECT_EQ(r.config->runtime.link_probe_bytes, 4096);
  EXPECT_EQ(r.config->runtime.link_probe_ms, 1000);
  r = parse_cluster_config(with_pipelines(one_pipeline) + "runtime: {link_probe_ms: 0, link_probe_bytes: 2048}\n",
                           "c.yaml");
  ASSERT_TRUE(r) << r.error_text();
  auto again = parse_cluster_config(to_yaml(*r.config), "c.yaml");
  ASSERT_TRUE(again) << again.error_text();
  EXPECT_EQ(again.config->runtime.link_probe_ms, 0);
  EXPECT_EQ(again.config->runtime.link_probe_bytes, 2048);
}

}  // namespace
}  // namespace sloserve

namespace sloserve {
namespace {

const std::string cpu_nodes = R"(nodes:
  - {name: n, address: "tcp://127.0.0.1:0", roles: [controller, frontend, worker], devices: [{kind: cpu, count: 1}]}
)";

// A model path is relative to the file that names it, resolved once: the copy `up` writes
// elsewhere names the same file, and a model without a profile stays without one.
TEST(cluster_config, model_paths_resolve_beside_the_file_and_round_trip_without_a_profile) {
  auto r = parse_cluster_config(cpu_nodes + R"(models:
  - {name: a, path: models/../models/a.pt, input: {dtype: float32, shape: [4]}, output: {dtype: float32, shape: [2]}, max_batch: 8}
pipelines:
  - {name: p, slo_ms: 100, stages: [{name: s, model: a}]}
)",
                                "/srv/project/cluster.yaml");
  ASSERT_TRUE(r) << r.error_text();
  EXPECT_EQ(r.config->models[0].path, "/srv/project/models/a.pt");
  auto text = to_yaml(*r.config);
  EXPECT_EQ(text.find("profile:"), std::string::npos) << text;
  EXPECT_EQ(text.find("profiles:"), std::string::npos) << text;
  auto again = parse_cluster_config(text, "/tmp/sloserve-up-1.yaml");
  ASSERT_TRUE(again) << again.error_text();
  EXPECT_EQ(again.config->models[0].path, "/srv/project/models/a.pt");
  EXPECT_TRUE(again.config->models[0].needs_profile);
  EXPECT_EQ(to_yaml(*again.config), text);
}

// preprocess: requests carry images; the model must take float32[3, H, W].
TEST(cluster_config, preprocess_takes_images_and_round_trips) {
  auto r = parse_cluster_config(cpu_nodes + R"(models:
  - {name: a, path: /m/a.pt, input: {dtype: float32, shape: [3, 224, 224]}, output: {dtype: float32, shape: [10]}, max_batch: 8,
     preprocess: {from: image, mean: [0.5, 0.5, 0.5], std: [0.25, 0.25, 0.25]}}
pipelines:
  - {name: p, slo_ms: 100, stages: [{name: s, model: a}]}
)",
                                "c.yaml");
  ASSERT_TRUE(r) << r.error_text();
  auto& m = r.config->models[0];
  ASSERT_TRUE(m.preprocess);
  EXPECT_FLOAT_EQ(m.preprocess->mean[1], 0.5f);
  EXPECT_FLOAT_EQ(m.preprocess->stddev[2], 0.25f);
  auto again = parse_cluster_config(to_yaml(*r.config), "again.yaml");
  ASSERT_TRUE(again) << again.error_text();
  ASSERT_TRUE(again.config->models[0].preprocess);
  EXPECT_FLOAT_EQ(again.config->models[0].preprocess->stddev[2], 0.25f);
  auto e = errors_of(cpu_nodes + R"(models:
  - {name: a, path: /m/a.pt, input: {dtype: float32, shape: [16]}, output: {dtype: float32, shape: [2]}, max_batch: 8,
     preprocess: {from: video, std: [1, 0, 1], mean: [1, 2]}}
)");
  EXPECT_NE(e.find("c.yaml:5:25: model 'a' preprocess: 'from' must be image"), std::string::npos) << e;
  EXPECT_NE(e.find("model 'a' preprocess mean needs 3 values"), std::string::npos) << e;
  EXPECT_NE(e.find("model 'a' preprocess std values must be positive"), std::string::npos) << e;
  EXPECT_NE(e.find("the model's input must be float32[3, H, W] to take images, not float32[16]"), std::string::npos)
      << e;
}

TEST(cluster_config, precision_is_fp32_fp16_or_bf16_and_round_trips) {
  auto r = parse_cluster_config(cpu_nodes + R"(models:
  - {name: a, path: /m/a.pt, input: {dtype: float32, shape: [4]}, output: {dtype: float32, shape: [2]}, max_batch: 8, precision: bf16}
pipelines:
  - {name: p, slo_ms: 100, stages: [{name: s, model: a}]}
)",
                                "c.yaml");
  ASSERT_TRUE(r) << r.error_text();
  EXPECT_EQ(r.config->models[0].precision, precision::bf16);
  auto again = parse_cluster_config(to_yaml(*r.config), "again.yaml");
  ASSERT_TRUE(again) << again.error_text();
  EXPECT_EQ(again.config->models[0].precision, precision::bf16);
  auto e = errors_of(cpu_nodes + R"(models:
  - {name: a, path: /m/a.pt, input: {dtype: float32, shape: [4]}, output: {dtype: float32, shape: [2]}, max_batch: 8, precision: int4}
)");
  EXPECT_NE(e.find("c.yaml:4:130: model 'a' precision 'int4' must be fp32, fp16 or bf16"), std::string::npos) << e;
}

TEST(cluster_config, a_real_model_may_leave_its_profile_to_the_worker) {
  auto r = parse_cluster_config(cpu_nodes + R"(models:
  - {name: a, path: /m/a.pt, input: {dtype: float32, shape: [4]}, output: {dtype: float32, shape: [2]}, max_batch: 8}
pipelines:
  - {name: p, slo_ms: 100, stages: [{name: s, model: a}]}
)",
                                "c.yaml");
  ASSERT_TRUE(r) << r.error_text();
  EXPECT_TRUE(r.config->models[0].needs_profile);
  // Without a path there is nothing to measure; emulated devices have nothing to emulate.
  auto e = errors_of(cpu_nodes + R"(models:
  - {name: a, input: {dtype: float32, shape: [4]}, output: {dtype: float32, shape: [2]}, max_batch: 8}
)");
  EXPECT_NE(e.find("c.yaml:4:5: model 'a' is missing 'profile'"), std::string::npos) << e;
  e = errors_of(R"(nodes:
  - {name: n, address: "tcp://127.0.0.1:0", roles: [controller, frontend, worker], devices: [{kind: emulated}]}
models:
  - {name: a, path: /m/a.pt, input: {dtype: float32, shape: [4]}, output: {dtype: float32, shape: [2]}, max_batch: 8}
)");
  EXPECT_NE(e.find("c.yaml:2:94: node 'n' has emulated devices for model 'a', which has no 'profile' to emulate"),
            std::string::npos)
      << e;
}

TEST(cluster_config, cores_declares_how_latency_scales_with_cores) {
  auto r = parse_cluster_config(cpu_nodes + R"(models:
  - {name: a, path: /m/a.pt, input: {dtype: float32, shape: [4]}, output: {dtype: float32, shape: [2]}, max_batch: 8, profile: {alpha_ms: 1, beta_ms: 2}, cores: {gamma_ms: 40, epsilon_ms: 20, delta_ms: 2, eta_ms: 5}}
)",
                                "c.yaml");
  ASSERT_TRUE(r) << r.error_text();
  ASSERT_TRUE(r.config->models[0].cores);
  EXPECT_DOUBLE_EQ(r.config->models[0].cores->at(4, 2), 40.0 * 4 / 2 + 20.0 / 2 + 2 * 4 + 5);
  auto e = errors_of(cpu_nodes + R"(models:
  - {name: a, path: /m/a.pt, input: {dtype: float32, shape: [4]}, output: {dtype: float32, shape: [2]}, max_batch: 8, profile: {alpha_ms: 1, beta_ms: 2}, cores: {gamma_ms: 40, epsilon_ms: 20, delta_ms: 2}}
)");
  EXPECT_NE(e.find("model 'a' cores is missing 'eta_ms'"), std::string::npos) << e;
}

TEST(cluster_config, load_ms_emulates_a_cold_start_and_round_trips) {
  const std::string p = "pipelines:\n  - {name: p, slo_ms: 100, stages: [{name: s, model: a}]}\n";
  auto with_load = [&](const std::string& v) {
    auto m = models;
    return nodes + m.insert(m.find("  - name: b"), "    load_ms: " + v + "\n") + p;
  };
  auto ok = parse_cluster_config(with_load("2500"), "c.yaml");
  ASSERT_TRUE(ok) << ok.error_text();
  EXPECT_DOUBLE_EQ(ok.config->models[0].load_ms, 2500);
  EXPECT_DOUBLE_EQ(ok.config->models[1].load_ms, 0);
  auto again = parse_cluster_config(to_yaml(*ok.config), "again.yaml");  // `up` hands it on
  ASSERT_TRUE(again) << again.error_text();
  EXPECT_DOUBLE_EQ(again.config->models[0].load_ms, 2500);
  auto e = errors_of(with_load("-1"));
  EXPECT_NE(e.find("c.yaml:15:14: model 'a' load_ms cannot be negative"), std::string::npos) << e;
}

TEST(cluster_config, scaler_section_round_trips_and_names_its_errors) {
  const std::string cored = R"(models:
  - {name: a, input: {dtype: float32, shape: [4]}, output: {dtype: float32, shape: [2]}, max_batch: 8, profile: {alpha_ms: 1, beta_ms: 2}, cores: {gamma_ms: 4, epsilon_ms: 2, delta_ms: 1, eta_ms: 1}}
  - {name: b, input: {dtype: float32, shape: [2]}, output: {dtype: float32, shape: [1]}, max_batch: 4, profile: {alpha_ms: 1, beta_ms: 4}}
)";
  auto two =
      "pipelines:\n  - {name: p, slo_ms: 100, stages: [{name: s1, model: a}, {name: s2, model: b, after: [s1]}]}\n";
  auto ok = parse_cluster_config(nodes + cored + two + "scaler: {policy: fa2, horizontal_s: 5, max_total_cores: 12}\n",
                                 "c.yaml");
  ASSERT_TRUE(ok) << ok.error_text();
  EXPECT_TRUE(ok.config->scaler.enabled());
  EXPECT_EQ(ok.config->scaler.max_total_cores, 12);
  auto again = parse_cluster_config(to_yaml(*ok.config), "again.yaml");
  ASSERT_TRUE(again) << again.error_text();
  EXPECT_EQ(again.config->scaler.policy, scaler_policy::fa2);
  EXPECT_DOUBLE_EQ(again.config->scaler.horizontal_s, 5);
  ASSERT_TRUE(again.config->models[0].cores);  // `up` hands l(b, c) on to its nodes
  EXPECT_DOUBLE_EQ(again.config->models[0].cores->gamma, 4);
  // A policy that resizes cores needs l(b, c) of every model it scales.
  auto e = errors_of(nodes + cored + two + "scaler: {policy: biscale}\n");
  EXPECT_NE(e.find("c.yaml:14:18: scaler policy biscale scales cores in place: model 'b' needs 'cores"),
            std::string::npos)
      << e;
  e = errors_of(nodes + cored + two + "scaler: {policy: magic, vertical_s: 0}\n");
  EXPECT_NE(e.find("scaler policy 'magic' is not none, fa2, sponge, biscale or ipa"), std::string::npos) << e;
  EXPECT_NE(e.find("scaler needs 0 < vertical_s <= horizontal_s"), std::string::npos) << e;
  // Each model sized on its own: one stage each.
  e = errors_of(
      nodes + cored +
      "pipelines:\n  - {name: p, slo_ms: 100, stages: [{name: s1, model: a}, {name: s2, model: a, after: [s1]}]}\n" +
      "scaler: {policy: fa2}\n");
  EXPECT_NE(e.find("model 'a' serves both p.s1 and p.s2"), std::string::npos) << e;
  e = errors_of(R"(nodes:
  - {name: ctl, address: tcp://127.0.0.1:7100, roles: [controller, frontend, worker], cores: 0, devices: [{kind: emulated}]}
)");
  EXPECT_NE(e.find("node 'ctl' cores must be at least 1"), std::string::npos) << e;
}

// Piccolo's dispatch: whole batches in turn, or the file's balancer (the baseline), not both.
TEST(cluster_config, piccolo_dispatches_whole_batches_or_by_the_runtime_balancer) {
  const std::string one = R"(models:
  - {name: a, input: {dtype: float32, shape: [4]}, output: {dtype: float32, shape: [2]}, max_batch: 8, profile: {alpha_ms: 1, beta_ms: 2}}
pipelines:
  - {name: p, slo_ms: 100, stages: [{name: s, model: a}]}
)";
  for (auto section : {"{whole_batches: true}", "{runtime_balancer: true}"}) {
    auto ok = parse_cluster_config(nodes + one + "scheduler: {policy: piccolo, piccolo: " + section + "}\n", "c.yaml");
    EXPECT_TRUE(ok) << section << ": " << ok.error_text();
  }
  auto e = errors_of(nodes + one +
                     "scheduler: {policy: piccolo, piccolo: {whole_batches: true,\n    runtime_balancer: true}}\n");
  EXPECT_NE(e.find("c.yaml:14:23: scheduler piccolo runtime_balancer: whole batches go in turn"), std::string::npos)
      << e;
}

}  // namespace
}  // namespace sloserve

namespace sloserve {
namespace {

// Every example a user may start from loads as it is.
// Three classifiers of one input; `c` gives another output, `d` declares no accuracy.
const std::string variant_models = R"(
  - {name: small, input: {dtype: float32, shape: [4]}, output: {dtype: float32, shape: [3, 2]}, max_batch: 8,
     profile: {alpha_ms: 1, beta_ms: 2}, accuracy: 69.76, memory_mb: 45}
  - {name: large, input: {dtype: float32, shape: [4]}, output: {dtype: float32, shape: [3, 2]}, max_batch: 8,
     profile: {alpha_ms: 4, beta_ms: 8}, accuracy: 76.13, base_cores: 2, memory_mb: 98}
  - {name: c, input: {dtype: float32, shape: [4]}, output: {dtype: float32, shape: [5]}, profile: {alpha_ms: 1, beta_ms: 1},
     accuracy: 50}
  - {name: d, input: {dtype: float32, shape: [4]}, output: {dtype: float32, shape: [3, 2]}, profile: {alpha_ms: 1, beta_ms: 1}}
)";

TEST(cluster_config, stages_may_name_variants_that_start_at_the_most_accurate_and_round_trip) {
  auto text = nodes + models + variant_models + R"(pipelines:
  - name: p
    slo_ms: 100
    stages: [{name: s, variants: [small, large]}, {name: t, model: b, after: s}]
scheduler: {policy: ipa, ipa: {alpha: 2, beta: 0.02, delta: 0.001, interval_s: 5}}
)";
  auto r = parse_cluster_config(text, "c.yaml");
  ASSERT_TRUE(r) << r.error_text();
  auto& s = r.config->pipelines[0].stages[0];
  EXPECT_EQ(s.model, "large");
  EXPECT_EQ(s.variant_indices.size(), 2u);
  EXPECT_EQ(r.config->pipelines[0].stages[1].variant_indices.size(), 1u);
  auto* large = r.config->find_model("large");
  EXPECT_DOUBLE_EQ(*large->accuracy, 76.13);
  EXPECT_DOUBLE_EQ(large->base_cores, 2);
  EXPECT_FALSE(r.config->find_model("d")->accuracy);
  EXPECT_EQ(r.config->scheduler.policy, scheduler_policy::ipa);
  EXPECT_EQ(r.config->scaler.policy, scaler_policy::ipa) << "IPA's choices run as the scaler's instances";
  EXPECT_DOUBLE_EQ(r.config->scheduler.section_as<sched::ipa::options>().beta, 0.02);
  EXPECT_DOUBLE_EQ(r.config->scheduler.section_as<sched::ipa::options>().interval_s, 5);
  auto again = parse_cluster_config(to_yaml(*r.config), "again.yaml");
  ASSERT_TRUE(again) << again.error_text() << "\n" << to_yaml(*r.config);
  EXPECT_EQ(again.config->pipelines[0].stages[0].variants, (std::vector<std::string>{"small", "large"}));
  EXPECT_DOUBLE_EQ(*again.config->find_model("small")->accuracy, 69.76);
  EXPECT_DOUBLE_EQ(again.config->find_model("large")->base_cores, 2);
  EXPECT_DOUBLE_EQ(again.config->scheduler.section_as<sched::ipa::options>().alpha, 2);
  EXPECT_EQ(again.config->scaler.policy, scaler_policy::ipa);
}

TEST(cluster_config, variants_are_checked_with_their_place) {
  auto with = [&](const std::string& stages, const std::string& rest = "") {
    return errors_of(nodes + models + variant_models + "pipelines:\n  - name: p\n    slo_ms: 100\n    stages:\n" +
                     stages + rest);
  };
  auto e = with("      - {name: s, variants: [small, nope]}\n");
  EXPECT_NE(e.find("c.yaml:32:9:"), std::string::npos) << e;
  EXPECT_NE(e.find("unknown variant 'nope'"), std::string::npos) << e;
  e = with("      - {name: s, variants: [small, c]}\n");
  EXPECT_NE(e.find("variant 'c' takes float32[4] and gives float32[5], but variant 'small'"), std::string::npos) << e;
  e = with("      - {name: s, model: small, variants: [small, large]}\n");
  EXPECT_NE(e.find("c.yaml:32:26: pipeline 'p' stage 's' names both 'model' and 'variants'"), std::string::npos) << e;
  e = with("      - {name: s, variants: [small, d]}\n");
  EXPECT_NE(e.find("variant 'd' declares no 'accuracy'"), std::string::npos) << e;
  e = with("      - {name: s, variants: []}\n");
  EXPECT_NE(e.find("variants must name at least one model"), std::string::npos) << e;
  e = with("      - {name: s, variants: [small, small]}\n");
  EXPECT_NE(e.find("lists variant 'small' twice"), std::string::npos) << e;
  e = errors_of(nodes + models +
                "  - {name: x, input: {dtype: float32, shape: [1]}, output: {dtype: float32, shape: [1]},"
                " profile: {alpha_ms: 1, beta_ms: 1}, accuracy: 101, base_cores: 0}\n");
  EXPECT_NE(e.find("accuracy is a top-1 percentage"), std::string::npos) << e;
  EXPECT_NE(e.find("base_cores must be positive"), std::string::npos) << e;
  e = with("      - {name: s, variants: [small, large]}\n", "scaler: {policy: ipa}\n");
  EXPECT_NE(e.find("scaler policy ipa follows the scheduler's"), std::string::npos) << e;
  e = with("      - {name: s, variants: [small, large]}\n", "scheduler: {policy: ipa}\nscaler: {policy: fa2}\n");
  EXPECT_NE(e.find("scaler policy fa2 cannot run beside it"), std::string::npos) << e;
  e = with("      - {name: s, variants: [small, large]}\n", "scheduler: {ipa: {alpha: 1}}\n");
  EXPECT_NE(e.find("scheduler ipa is only read with policy: ipa"), std::string::npos) << e;
  // Under a scaler a model serves one stage: a variant shared by two stages is refused.
  e = with("      - {name: s, variants: [small, large]}\n      - {name: t, model: small, after: s}\n",
           "scheduler: {policy: ipa}\n");
  EXPECT_NE(e.find("model 'small' serves both p.s and p.t"), std::string::npos) << e;
}

// Jellyfish: variants of one network at several image sizes; its options round-trip.
const std::string image_variants = R"(
  - {name: i128, input: {dtype: float32, shape: [3, 128, 128]}, output: {dtype: float32, shape: [10]},
     preprocess: {from: image}, profile: {alpha_ms: 1, beta_ms: 1}, accuracy: 60}
  - {name: i256, input: {dtype: float32, shape: [3, 256, 256]}, output: {dtype: float32, shape: [10]},
     preprocess: {from: image}, profile: {alpha_ms: 2, beta_ms: 1}, accuracy: 70}
)";

TEST(cluster_config, jellyfish_serves_image_variants_of_several_sizes_and_round_trips) {
  auto text = nodes + models + image_variants + R"(pipelines:
  - {name: p, slo_ms: 100, stages: [{name: s, variants: [i128, i256]}]}
scheduler: {policy: jellyfish, jellyfish: {interval_ms: 250, overhead_ms: 3, bytes_per_pixel: 0.4, resident: 2,
                                           compute_share: 0.5, uplink_quantile: 0.1, miss_target: 0.02,
                                           use_spare: false, min_wait_share: 0.25}}
)";
  auto r = parse_cluster_config(text, "c.yaml");
  ASSERT_TRUE(r) << r.error_text();
  EXPECT_EQ(r.config->scheduler.policy, scheduler_policy::jellyfish);
  EXPECT_EQ(r.config->pipelines[0].stages[0].model, "i256");
  auto again = parse_cluster_config(to_yaml(*r.config), "again.yaml");
  ASSERT_TRUE(again) << again.error_text();
  auto& j = again.config->scheduler.section_as<sched::jellyfish::options>();
  EXPECT_DOUBLE_EQ(j.interval_ms, 250);
  EXPECT_DOUBLE_EQ(j.overhead_ms, 3);
  EXPECT_DOUBLE_EQ(j.bytes_per_pixel, 0.4);
  EXPECT_EQ(j.resident, 2);
  EXPECT_DOUBLE_EQ(j.compute_share, 0.5);
  EXPECT_DOUBLE_EQ(j.uplink_quantile, 0.1);
  EXPECT_DOUBLE_EQ(j.miss_target, 0.02);
  EXPECT_FALSE(j.use_spare);
  EXPECT_DOUBLE_EQ(j.min_wait_share, 0.25);
  EXPECT_DOUBLE_EQ(sched::policy_of(again.config->scheduler).clients(*again.config).min_wait_share, 0.25)
      << "the frontends' dip quantiles get it";
  EXPECT_FALSE(j.paper()) << "extended by default";
  // Paper mode round-trips, and turns the extensions off where they are left to their defaults.
  auto paper = parse_cluster_config(nodes + models + image_variants + R"(pipelines:
  - {name: p, slo_ms: 100, stages: [{name: s, variants: [i128, i256]}]}
scheduler: {policy: jellyfish, jellyfish: {mode: paper}}
)",
                                    "c.yaml");
  ASSERT_TRUE(paper) << paper.error_text();
  auto round = parse_cluster_config(to_yaml(*paper.config), "again.yaml");
  ASSERT_TRUE(round) << round.error_text();
  EXPECT_TRUE(round.config->scheduler.section_as<sched::jellyfish::options>().paper());
  auto tracking = sched::policy_of(round.config->scheduler).clients(*round.config);
  EXPECT_EQ(tracking.uplink_quantile, 0) << "uploads timed at the estimate";
  EXPECT_EQ(tracking.miss_target, 0) << "no dip quantile to move";
  EXPECT_EQ(round.config->scheduler.section_as<sched::jellyfish::options>().headroom, 0) << "workers planned full";
  EXPECT_EQ(round.config->scheduler.section_as<sched::jellyfish::options>().lift_margin, 0) << "no lift";
  EXPECT_DOUBLE_EQ(j.lift_margin, 0.25) << "the extended default";
  EXPECT_DOUBLE_EQ(tracking.min_wait_share, 1) << "no lift's wait to lower";
  EXPECT_DOUBLE_EQ(sched::jellyfish::options{}.min_wait_share, 1) << "by default the lift spends no misses";
}

TEST(cluster_config, jellyfish_is_checked_with_its_place) {
  auto with = [&](const std::string& pipelines, const std::string& rest) {
    return errors_of(nodes + models + variant_models + image_variants + "pipelines:\n" + pipelines + rest);
  };
  auto one = "  - {name: p, slo_ms: 100, stages: [{name: s, variants: [i128, i256]}]}\n";
  auto e = with("  - {name: p, slo_ms: 100, stages: [{name: s, variants: [small, large]}]}\n",
                "scheduler: {policy: jellyfish}\n");
  EXPECT_NE(e.find("model 'large' of pipeline 'p' needs 'preprocess: {from: image}'"), std::string::npos) << e;
  e = with(
      "  - {name: p, slo_ms: 100, stages: [{name: s, variants: [i128, i256]}, {name: t, model: i128, after: s}]}\n",
      "scheduler: {policy: jellyfish}\n");
  EXPECT_NE(e.find("serves pipelines of one stage (one DNN a request): pipeline 'p' has 2 stages"), std::string::npos)
      << e;
  e = with(one, "scheduler: {policy: jellyfish}\nscaler: {policy: fa2}\n");
  EXPECT_NE(e.find("scaler policy fa2 cannot run beside it"), std::string::npos) << e;
  e = with(one, "scheduler: {policy: nexus, jellyfish: {interval_ms: 100}}\n");
  EXPECT_NE(e.find("scheduler jellyfish is only read with policy: jellyfish"), std::string::npos) << e;
  e = with(one, "scheduler: {policy: jellyfish, jellyfish: {interval_ms: 1, resident: 0, bytes_per_pixel: 0}}\n");
  EXPECT_NE(e.find("interval_ms must be at least 10"), std::string::npos) << e;
  EXPECT_NE(e.find("resident must be at least 1"), std::string::npos) << e;
  EXPECT_NE(e.find("bytes_per_pixel must be positive"), std::string::npos) << e;
  e = with(one, "scheduler: {policy: jellyfish, jellyfish: {compute_share: 1.5}}\n");
  EXPECT_NE(e.find("compute_share must be in [0, 1]"), std::string::npos) << e;
  e = with(one, "scheduler: {policy: jellyfish, jellyfish: {miss_target: -0.1, uplink_quantile: 1.5}}\n");
  EXPECT_NE(e.find("miss_target must be in [0, 0.5]"), std::string::npos) << e;
  EXPECT_NE(e.find("uplink_quantile must be in [0, 1]"), std::string::npos) << e;
  e = with(one, "scheduler: {policy: jellyfish, jellyfish: {mode: printed}}\n");
  EXPECT_NE(e.find("mode must be paper or extended"), std::string::npos) << e;
  e = with(one, "scheduler: {policy: jellyfish, jellyfish: {lift_margin: 0.95}}\n");
  EXPECT_NE(e.find("lift_margin must be in [0, 0.9]"), std::string::npos) << e;
  e = with(one, "scheduler: {policy: jellyfish, jellyfish: {mode: paper, lift_margin: 0.2}}\n");
  EXPECT_NE(e.find("lift_margin is an extension"), std::string::npos) << e;
  e = with(one, "scheduler: {policy: jellyfish, jellyfish: {headroom: 1}}\n");
  EXPECT_NE(e.find("headroom must be in [0, 0.9]"), std::string::npos) << e;
  e = with(one, "scheduler: {policy: jellyfish, jellyfish: {mode: paper, headroom: 0.1}}\n");
  EXPECT_NE(e.find("headroom is an extension"), std::string::npos) << e;
  e = with(one, "scheduler: {policy: jellyfish, jellyfish: {min_wait_share: 1.5}}\n");
  EXPECT_NE(e.find("min_wait_share must be in [0, 1]"), std::string::npos) << e;
  e = with(one, "scheduler: {policy: jellyfish, jellyfish: {mode: paper, min_wait_share: 0}}\n");
  EXPECT_NE(e.find("min_wait_share is an extension"), std::string::npos) << e;
  e = with(one, "scheduler: {policy: jellyfish, jellyfish: {mode: paper, use_spare: true, miss_target: 0.01}}\n");
  EXPECT_NE(e.find("mode paper runs the algorithms as printed: use_spare is an extension it turns off"),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("miss_target is an extension"), std::string::npos) << e;
  // Image variants of different sizes are one stage's variants.
  auto ok = parse_cluster_config(nodes + models + image_variants + "pipelines:\n" + one, "c.yaml");
  EXPECT_TRUE(ok) << ok.error_text();
}

TEST(cluster_config, a_cascade_names_two_models_and_round_trips) {
  auto text = nodes + models + variant_models +
              R"(  - {name: e, input: {dtype: float32, shape: [4]}, output: {dtype: float32, shape: [3, 2]},
     profile: {alpha_ms: 1, beta_ms: 1}, pass_rate: 0.7}
pipelines:
  - {name: p, slo_ms: 100, stages: [{name: s, cascade: {models: [e, large], confidence: 0.9}}]}
)";
  auto r = parse_cluster_config(text, "c.yaml");
  ASSERT_TRUE(r) << r.error_text();
  auto& s = r.config->pipelines[0].stages[0];
  ASSERT_TRUE(s.cascade);
  EXPECT_EQ(s.model, "e") << "the first model is the stage's";
  EXPECT_EQ(r.config->models[s.cascade->second_index].name, "large");
  EXPECT_DOUBLE_EQ(s.cascade->confidence, 0.9);
  EXPECT_DOUBLE_EQ(*r.config->find_model("e")->pass_rate, 0.7);
  auto again = parse_cluster_config(to_yaml(*r.config), "again.yaml");
  ASSERT_TRUE(again) << again.error_text();
  EXPECT_EQ(again.config->pipelines[0].stages[0].cascade->models, (std::vector<std::string>{"e", "large"}));
  EXPECT_DOUBLE_EQ(*again.config->find_model("e")->pass_rate, 0.7);

  // WEG's skew detection: its knobs round-trip; mistakes are named.
  auto skewed = parse_cluster_config(
      nodes + models + variant_models +
          R"(  - {name: e, input: {dtype: float32, shape: [4]}, output: {dtype: float32, shape: [3, 2]},
     profile: {alpha_ms: 1, beta_ms: 1}, pass_rate: 0.7}
pipelines:
  - {name: p, slo_ms: 100, stages: [{name: s, cascade: {models: [e, large], skew: {window: 20, epsilon: 0.05,
      classes: [5, 10], a_in: [0.95, 0.9], e_in_out: [0.03, 0.05], a_out: [0.9, 0.85]}}}]}
)",
      "c.yaml");
  ASSERT_TRUE(skewed) << skewed.error_text();
  auto round = parse_cluster_config(to_yaml(*skewed.config), "again.yaml");
  ASSERT_TRUE(round) << round.error_text();
  auto& k = round.config->pipelines[0].stages[0].cascade->skew;
  ASSERT_TRUE(k);
  EXPECT_EQ(k->window, 20);
  EXPECT_DOUBLE_EQ(k->epsilon, 0.05);
  EXPECT_EQ(k->a_out, (std::vector<double>{0.9, 0.85}));
  auto file = [&](const std::string& stage, const std::string& rest) {
    return nodes + models + variant_models +
           "  - {name: e, input: {dtype: float32, shape: [4]}, output: {dtype: float32, shape: [3, 2]},"
           " profile: {alpha_ms: 1, beta_ms: 1}, pass_rate: 0.7}\npipelines:\n  - name: p\n    slo_ms: 100\n"
           "    stages:\n" +
           stage + rest;
  };
  auto with = [&](const std::string& stage, const std::string& rest = "") { return errors_of(file(stage, rest)); };
  auto e = with("      - {name: s, cascade: {models: [small, large]}}\n");
  EXPECT_NE(e.find("'small' has no outputs to judge (no 'path'): it needs 'pass_rate'"), std::string::npos) << e;
  e = with("      - {name: s, cascade: {models: [e]}}\n");
  EXPECT_NE(e.find("cascade needs exactly two models"), std::string::npos) << e;
  e = with("      - {name: s, cascade: {models: [e, c]}}\n");
  EXPECT_NE(e.find("cascade: 'c' takes float32[4] and gives float32[5]"), std::string::npos) << e;
  e = with("      - {name: s, cascade: {models: [e, nope]}}\n");
  EXPECT_NE(e.find("cascade has unknown model 'nope'"), std::string::npos) << e;
  e = with("      - {name: s, cascade: {models: [e, large], confidence: 1.5}}\n");
  EXPECT_NE(e.find("confidence must be in (0, 1]"), std::string::npos) << e;
  e = with("      - {name: s, model: e, cascade: {models: [e, large]}}\n");
  EXPECT_NE(e.find("names 'cascade' beside 'model' or 'variants'"), std::string::npos) << e;
  e = with("      - {name: s, cascade: {models: [e, large], skew: {window: 1, a_in: [0.9, 0.8]}}}\n");
  EXPECT_NE(e.find("cascade skew window must be at least 2"), std::string::npos) << e;
  EXPECT_NE(e.find("needs classes, a_in, e_in_out and a_out of one length"), std::string::npos) << e;
  e = with(
      "      - {name: s, cascade: {models: [e, large], skew: {classes: [10, 5, 20], a_in: [1, 1, 2], e_in_out: [0, 0, "
      "0], a_out: [0, 0, 0]}}}\n");
  EXPECT_NE(e.find("classes must be ascending"), std::string::npos) << e;
  EXPECT_NE(e.find("fractions in [0, 1]"), std::string::npos) << e;
  e = with("      - {name: s, cascade: {models: [e, small], skew: {windw: 3}}}\n");
  EXPECT_NE(e.find("unknown key 'windw' in pipeline 'p' stage 's' cascade skew"), std::string::npos) << e;
  e = with("      - {name: s, cascade: {models: [large, e], skew: {}}}\n");
  EXPECT_NE(e.find("the oracle's accuracy: 'e' needs 'accuracy'"), std::string::npos) << e;
  e = with("      - {name: s, cascade: {models: [e, large]}}\n", "scaler: {policy: fa2}\n");
  EXPECT_NE(e.find("scaler policy fa2 does not size cascades"), std::string::npos) << e;
  // IPA chooses cascades (the cascade, or its second alone), each model for one stage.
  auto ipa = parse_cluster_config(
      file("      - {name: s, cascade: {models: [e, large]}}\n", "scheduler: {policy: ipa}\n"), "c.yaml");
  EXPECT_TRUE(ipa) << ipa.error_text();
  e = with("      - {name: s, cascade: {models: [e, large]}}\n      - {name: t, model: large, after: [s]}\n",
           "scheduler: {policy: ipa}\n");
  EXPECT_NE(e.find("model 'large' serves both p.s and p.t"), std::string::npos) << e;
}

// `fanout` as a number (a declared mean) or a map (items read from the parent's output), each
// round-tripping as written; the map's mistakes named at their stage.
TEST(cluster_config, a_fanout_from_the_parents_output_is_checked_and_round_trips) {
  auto stages = [](const std::string& fanout) {
    return with_pipelines(
        "pipelines:\n  - name: p\n    slo_ms: 100\n    stages:\n      - {name: s1, model: a}\n"
        "      - {name: s2, model: b, after: [s1], fanout: " +
        fanout + "}\n");
  };
  auto r =
      parse_cluster_config(stages("{from_output: output, score_above: 0.7, score_column: 1, expect: 1.5}"), "c.yaml");
  ASSERT_TRUE(r) << r.error_text();
  auto& s = r.config->pipelines[0].stages[1];
  ASSERT_TRUE(s.items);
  EXPECT_EQ(s.items->from_output, "output");
  EXPECT_DOUBLE_EQ(s.items->score_above, 0.7);
  EXPECT_EQ(s.items->score_column, 1);
  EXPECT_DOUBLE_EQ(*s.fanout, 1.5) << "planned at its expectation";
  auto again = parse_cluster_config(to_yaml(*r.config), "again.yaml");
  ASSERT_TRUE(again) << again.error_text();
  auto& s2 = again.config->pipelines[0].stages[1];
  ASSERT_TRUE(s2.items);
  EXPECT_DOUBLE_EQ(s2.items->score_above, 0.7);
  EXPECT_EQ(s2.items->score_column, 1);
  EXPECT_DOUBLE_EQ(*s2.items->expect, 1.5);
  auto plain = parse_cluster_config(stages("{from_output: output}"), "c.yaml");
  ASSERT_TRUE(plain) << plain.error_text();
  EXPECT_DOUBLE_EQ(*plain.config->pipelines[0].stages[1].fanout, 1) << "no expect: one item until measured";
  auto number = parse_cluster_config(to_yaml(*parse_cluster_config(stages("2.5"), "c.yaml").config), "n.yaml");
  ASSERT_TRUE(number) << number.error_text();
  EXPECT_FALSE(number.config->pipelines[0].stages[1].items);
  EXPECT_DOUBLE_EQ(*number.config->pipelines[0].stages[1].fanout, 2.5);

  auto e = errors_of(stages("{from_output: boxes}"));
  EXPECT_NE(e.find("c.yaml:25:9: pipeline 'p': stage 's2' fanout from_output 'boxes' is not an output of 'a' (stage "
                   "'s1'): its output is 'output'"),
            std::string::npos)
      << e;
  e = errors_of(stages("{from_output: output, score_column: 2}"));
  EXPECT_NE(e.find("fanout score_column 2 is outside the 2 columns of 'a'"), std::string::npos) << e;
  e = errors_of(stages("{from_output: output, expect: 0}"));
  EXPECT_NE(e.find("fanout expect must be positive"), std::string::npos) << e;
  e = errors_of(stages("{score_above: 0.5}"));
  EXPECT_NE(e.find("s2' fanout is missing 'from_output'"), std::string::npos) << e;
  e = errors_of(stages("{from_output: output, above: 0.5}"));
  EXPECT_NE(e.find("c.yaml:25:73: unknown key 'above'"), std::string::npos) << e;
  e = errors_of(stages("lots"));
  EXPECT_NE(e.find("'fanout' in pipeline 'p' stage 's2' has the wrong type"), std::string::npos) << e;
  e =
      errors_of(with_pipelines("pipelines:\n  - name: p\n    slo_ms: 100\n    stages:\n      - {name: s1, model: b}\n"
                               "      - {name: s2, model: a, after: [s1], fanout: {from_output: output}}\n"));
  EXPECT_NE(e.find("fans out from the output of 'b' (stage 's1'), which must be float32 [items, columns]"),
            std::string::npos)
      << e;
  e = errors_of(with_pipelines(
      "pipelines:\n  - {name: p, slo_ms: 100, stages: [{name: s1, model: a, fanout: {from_output: output}}]}\n"));
  EXPECT_NE(e.find("stage 's1' fans out from_output but has no parent"), std::string::npos) << e;
}

TEST(cluster_config, every_example_loads) {
  int n = 0;
  for (auto& e : std::filesystem::directory_iterator(SLOSERVE_EXAMPLES_DIR)) {
    if (e.path().extension() != ".yaml") continue;
    auto r = load_cluster_config(e.path().string());
    EXPECT_TRUE(r) << e.path() << ": " << r.error_text();
    ++n;
  }
  EXPECT_GE(n, 5);
}

}  // namespace
}  // namespace sloserve

namespace sloserve {
namespace {

// docs/configuration.md documents every key the parser accepts, as `section.key`, and names no
// key that the parser would refuse.
TEST(config_keys, every_key_the_parser_accepts_is_documented) {
  std::ifstream in(SLOSERVE_DOCS_DIR "/configuration.md");
  ASSERT_TRUE(in) << "cannot read docs/configuration.md";
  std::string doc((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  size_t keys = 0;
  for (auto& section : config_keys())
    for (auto key : section.keys) {
      auto full = section.path.empty() ? std::string(key) : std::string(section.path) + "." + std::string(key);
      EXPECT_NE(doc.find("`" + full + "`"), std::string::npos) << full << " is not documented";
      ++keys;
    }
  EXPECT_GT(keys, 60u);
  // The reference's tables name keys in their first cells; each must be one the parser accepts.
  std::istringstream lines(doc);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("| `", 0) != 0) continue;
    auto cell = line.substr(2, line.find(" |", 2) - 2);
    for (size_t at = 0; (at = cell.find('`', at)) != std::string::npos;) {
      auto end = cell.find('`', at + 1);
      auto full = cell.substr(at + 1, end - at - 1);
      at = end + 1;
      auto dot = full.rfind('.');
      std::string path = dot == std::string::npos ? "" : full.substr(0, dot);
      std::string key = dot == std::string::npos ? full : full.substr(dot + 1);
      auto all = config_keys();
      auto it = std::find_if(all.begin(), all.end(), [&](auto& s) { return s.path == path; });
      bool known = it != all.end() && std::find(it->keys.begin(), it->keys.end(), key) != it->keys.end();
      EXPECT_TRUE(known) << "docs/configuration.md documents `" << full << "`, which the parser refuses";
    }
  }
}

TEST(config_keys, a_key_no_section_lists_is_refused_with_its_place) {
  auto r = parse_cluster_config(R"(
nodes:
  - {name: a, address: tcp://127.0.0.1:0, roles: [controller, frontend, worker], devices: [{kind: emulated, colour: red}]}
models:
  - {name: m, input: {dtype: float32, shape: [2]}, output: {dtype: float32, shape: [2]}, profile: {alpha_ms: 1, beta_ms: 1}}
pipelines:
  - {name: p, slo_ms: 100, stages: [{name: s, model: m}]}
cluster: {name: c, owner: me}
)",
                                "k.yaml");
  ASSERT_FALSE(r);
  auto e = r.error_text();
  EXPECT_NE(e.find("k.yaml:3:"), std::string::npos) << e;
  EXPECT_NE(e.find("unknown key 'colour'"), std::string::npos) << e;
  EXPECT_NE(e.find("unknown key 'owner' in cluster"), std::string::npos) << e;
}

// Device types with prices, devices of a type, and per-type profiles beside the default.
const std::string typed = R"(device_types: [{name: t4, price: 0.35}, {name: a100, price: 2.9}]
nodes:
  - name: ctl
    address: tcp://127.0.0.1:7100
    roles: [controller, frontend]
  - name: w1
    address: tcp://127.0.0.1:7101
    roles: [worker]
    devices: [{kind: emulated, count: 2, type: t4}, {kind: emulated, count: 1, type: a100}, {kind: emulated}]
models:
  - name: a
    input: {dtype: float32, shape: [4]}
    output: {dtype: float32, shape: [2]}
    max_batch: 8
    profile: {alpha_ms: 10, beta_ms: 2}
    profiles: {a100: {alpha_ms: 2, beta_ms: 0.5}}
)";

TEST(cluster_config, device_types_prices_and_per_type_profiles_parse_and_round_trip) {
  auto r = parse_cluster_config(typed, "c.yaml");
  ASSERT_TRUE(r) << r.error_text();
  auto& cfg = *r.config;
  ASSERT_EQ(cfg.device_types.size(), 2u);
  EXPECT_DOUBLE_EQ(cfg.find_device_type("a100")->price, 2.9);
  auto& groups = cfg.nodes[1].devices;
  EXPECT_EQ(groups[0].type, "t4");
  EXPECT_DOUBLE_EQ(cfg.price_of(groups[0]), 0.35);
  EXPECT_DOUBLE_EQ(cfg.price_of(groups[2]), 1) << "untyped";
  auto& m = *cfg.find_model("a");
  EXPECT_DOUBLE_EQ(m.profile_for("a100").latency_ms_at(4), 8.5);
  EXPECT_DOUBLE_EQ(m.profile_for("t4").latency_ms_at(4), 42) << "no profile of its own: the default";
  auto again = parse_cluster_config(to_yaml(cfg), "again.yaml");
  ASSERT_TRUE(again) << again.error_text();
  EXPECT_EQ(again.config->device_types.size(), 2u);
  EXPECT_EQ(again.config->nodes[1].devices[1].type, "a100");
  EXPECT_DOUBLE_EQ(again.config->find_model("a")->profile_for("a100").latency_ms_at(4), 8.5);
}

TEST(cluster_config, device_types_are_checked_with_their_place) {
  auto e =
      errors_of("device_types: [{name: t4, price: 0}, {name: t4, price: 1}]\n" + typed.substr(typed.find("nodes:")));
  EXPECT_NE(e.find("c.yaml:1:"), std::string::npos) << e;
  EXPECT_NE(e.find("device type 't4' price must be positive"), std::string::npos) << e;
  EXPECT_NE(e.find("duplicate device type 't4'"), std::string::npos) << e;
  auto bad = typed;
  bad.replace(bad.find("type: a100}"), 11, "type: v100}");
  bad.replace(bad.find("profiles: {a100"), 15, "profiles: {h100");
  e = errors_of(bad);
  EXPECT_NE(e.find("device type 'v100' is not in device_types"), std::string::npos) << e;
  EXPECT_NE(e.find("profiles name 'h100', which device_types does not declare"), std::string::npos) << e;
  EXPECT_NE(e.find("c.yaml:9:86: node 'w1' device type"), std::string::npos) << e;
  EXPECT_NE(e.find("c.yaml:16:16: model 'a' profiles"), std::string::npos) << e;
}

// Fractional devices: each device of a group hosts one instance per share; every instance is a
// device of its own, with its share; shares are checked with their place and round-trip.
// A switch device runs NetNN models: its limits are read and written back; a switch's limit on
// another kind, a switch serving a model without a netnn file and a netnn model of the wrong
// tensors are refused at their place.
// A model's labels (the classification extension) are read with the file, relative to it, a
// trailing CR dropped; they survive a resolved copy; a file that cannot be read is refused at the
// key's place.
TEST(cluster_config, a_models_labels_are_read_with_the_file_or_refused_where_named) {
  auto dir = std::filesystem::temp_directory_path() / ("sloserve_labels_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "classes.txt") << "cat\r\ndog\n";
  std::string text = R"(nodes:
  - {name: ctl, address: tcp://127.0.0.1:0, roles: [controller, frontend, worker], devices: [{kind: emulated}]}
models:
  - {name: m, labels: classes.txt, input: {dtype: float32, shape: [5]}, output: {dtype: float32, shape: [2]}, profile: {alpha_ms: 1, beta_ms: 1}}
pipelines:
  - {name: p, slo_ms: 100, stages: [{name: s, model: m}]}
)";
  auto r = parse_cluster_config(text, (dir / "c.yaml").string());
  ASSERT_TRUE(r) << r.error_text();
  EXPECT_EQ(r.config->models[0].labels, (dir / "classes.txt").string());
  EXPECT_EQ(r.config->models[0].label_names, (std::vector<std::string>{"cat", "dog"}));
  auto again = parse_cluster_config(to_yaml(*r.config), "/elsewhere/again.yaml");
  ASSERT_TRUE(again) << again.error_text();
  EXPECT_EQ(again.config->models[0].label_names, (std::vector<std::string>{"cat", "dog"}));
  std::filesystem::remove_all(dir);
  auto gone = parse_cluster_config(text, (dir / "c.yaml").string());
  ASSERT_FALSE(gone);
  EXPECT_NE(gone.error_text().find("c.yaml:4:23: model 'm' labels: cannot read " + (dir / "classes.txt").string()),
            std::string::npos)
      << gone.error_text();
}

TEST(cluster_config, switch_devices_run_netnn_models_within_their_limits) {
  const char* text = R"(nodes:
  - {name: ctl, address: tcp://127.0.0.1:0, roles: [controller, frontend]}
  - {name: sw, address: tcp://127.0.0.1:0, roles: [worker], devices: [{kind: switch, models: [ids], stages: 12, ops_per_packet: 2000, register_kb_per_stage: 128}]}
  - {name: w, address: tcp://127.0.0.1:0, roles: [worker], devices: [{kind: emulated, models: [m]}]}
models:
  - {name: ids, netnn: ids.json, input: {dtype: uint8, shape: [76]}, output: {dtype: float32, shape: [5]}, profile: {alpha_ms: 0.001, beta_ms: 0.001}}
  - {name: m, input: {dtype: float32, shape: [5]}, output: {dtype: float32, shape: [2]}, profile: {alpha_ms: 1, beta_ms: 1}}
pipelines:
  - {name: p, slo_ms: 100, stages: [{name: screen, model: ids}, {name: s, model: m, after: [screen]}]}
)";
  auto r = parse_cluster_config(text, "/etc/c.yaml");
  ASSERT_TRUE(r) << r.error_text();
  auto& g = r.config->nodes[1].devices[0];
  EXPECT_EQ(g.kind, device_kind::network_switch);
  EXPECT_EQ(g.stages, 12);
  EXPECT_EQ(g.ops_per_packet, 2000);
  EXPECT_EQ(g.register_kb_per_stage, 128);
  EXPECT_EQ(g.pipelines, 4);
  EXPECT_EQ(r.config->find_model("ids")->netnn, "/etc/ids.json");
  auto again = parse_cluster_config(to_yaml(*r.config), "again.yaml");
  ASSERT_TRUE(again) << again.error_text();
  EXPECT_EQ(again.config->nodes[1].devices[0].stages, 12);
  EXPECT_EQ(again.config->nodes[1].devices[0].kind, device_kind::network_switch);
  EXPECT_EQ(again.config->find_model("ids")->netnn, "/etc/ids.json");
  auto refused = [&](std::string from, std::string to, const std::string& want) {
    std::string t = text;
    auto at = t.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    t.replace(at, from.size(), to);
    auto e = errors_of(t);
    EXPECT_NE(e.find(want), std::string::npos) << e;
  };
  refused("{kind: emulated, models: [m]}", "{kind: emulated, models: [m], stages: 4}",
          "c.yaml:4:108: node 'w' device stages is a switch's limit: only a device of kind switch takes it");
  refused("models: [ids], stages: 12", "models: [ids, m], stages: 12",
          "has switch devices for model 'm', which has no 'netnn' file");
  refused("{dtype: uint8, shape: [76]}", "{dtype: uint8, shape: [68]}", "input must be {dtype: uint8, shape: [76]}");
  refused("stages: 12,", "stages: 0,", "must each be at least 1");
}

TEST(cluster_config, device_shares_make_instances_and_are_checked) {
  const char* text = R"(nodes:
  - {name: ctl, address: tcp://127.0.0.1:0, roles: [controller, frontend]}
  - {name: w, address: tcp://127.0.0.1:0, roles: [worker], devices: [{kind: emulated, count: 2, shares: [0.5, 0.25]}, {kind: emulated}]}
models:
  - {name: m, input: {dtype: float32, shape: [2]}, output: {dtype: float32, shape: [2]}, profile: {alpha_ms: 1, beta_ms: 1}, share_exponent: 0.5}
pipelines:
  - {name: p, slo_ms: 100, stages: [{name: s, model: m}]}
)";
  auto r = parse_cluster_config(text, "c.yaml");
  ASSERT_TRUE(r) << r.error_text();
  auto& w = r.config->nodes[1];
  ASSERT_EQ(w.device_count(), 5) << "two devices of two instances, and a whole one";
  EXPECT_DOUBLE_EQ(w.share_of(0), 0.5);
  EXPECT_DOUBLE_EQ(w.share_of(1), 0.25);
  EXPECT_DOUBLE_EQ(w.share_of(2), 0.5);
  EXPECT_DOUBLE_EQ(w.share_of(3), 0.25);
  EXPECT_DOUBLE_EQ(w.share_of(4), 1);
  EXPECT_EQ(w.group_of(4), &w.devices[1]);
  auto& m = *r.config->find_model("m");
  EXPECT_DOUBLE_EQ(m.share_slowdown(0.25), 2);
  EXPECT_DOUBLE_EQ(m.share_slowdown(1), 1);
  auto again = parse_cluster_config(to_yaml(*r.config), "again.yaml");
  ASSERT_TRUE(again) << again.error_text();
  EXPECT_EQ(again.config->nodes[1].devices[0].shares, (std::vector<double>{0.5, 0.25}));
  EXPECT_DOUBLE_EQ(again.config->find_model("m")->share_exponent, 0.5);

  std::string bad = text;
  bad.replace(bad.find("[0.5, 0.25]"), 11, "[0.75, 0.5]");
  auto e = errors_of(bad);
  EXPECT_NE(e.find("c.yaml:3:"), std::string::npos) << e;
  EXPECT_NE(e.find("shares sum to 1.25"), std::string::npos) << e;
  bad = text;
  bad.replace(bad.find("[0.5, 0.25]"), 11, "[0, 0.25]");
  EXPECT_NE(errors_of(bad).find("shares must each be in (0, 1]"), std::string::npos);
  bad = text;
  bad.replace(bad.find("kind: emulated, count: 2"), 14, "kind: cpu");
  EXPECT_NE(errors_of(bad).find("only emulated devices take shares"), std::string::npos) << errors_of(bad);
}

// Partitioned models: blocks with their inputs and profiles; every range is a model of its own,
// found by name, served where the model is; mistakes are named with their place; the file
// round-trips; policy graft takes only pipelines of one stage on such a model.
TEST(cluster_config, partitioned_models_derive_a_model_per_range_and_are_checked) {
  std::ifstream in(std::string(SLOSERVE_EXAMPLES_DIR) + "/graft.yaml");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto r = parse_cluster_config(text, "g.yaml");
  ASSERT_TRUE(r) << r.error_text();
  auto& cfg = *r.config;
  auto& m = *cfg.find_model("resnet18");
  ASSERT_EQ(m.layers.size(), 6u);
  EXPECT_TRUE(m.partitioned());
  EXPECT_NEAR(m.profile.alpha_ms, 1.25, 1e-9);
  EXPECT_NEAR(m.profile.beta_ms, 8, 1e-9);
  EXPECT_EQ(cfg.fragments.size(), 20u) << "every range [a, b) of 6 blocks but the whole";
  auto* f = cfg.find_model("resnet18[2,4)");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->fragment_of, "resnet18");
  EXPECT_EQ(f->input.shape, (std::vector<int64_t>{64, 16, 16}));
  EXPECT_EQ(f->output.shape, (std::vector<int64_t>{256, 4, 4}));
  EXPECT_NEAR(f->profile.latency_ms_at(4), (0.2 * 4 + 0.4) + (0.3 * 4 + 3), 1e-9);
  EXPECT_EQ(cfg.find_model("resnet18[4,6)")->output.shape, (std::vector<int64_t>{1000}));
  EXPECT_EQ(cfg.find_model("resnet18[0,6)"), nullptr) << "the whole range is the model itself";
  EXPECT_TRUE(cfg.nodes[1].serves(0, "resnet18[1,6)"));
  auto again = parse_cluster_config(to_yaml(cfg), "again.yaml");
  ASSERT_TRUE(again) << again.error_text();
  EXPECT_EQ(again.config->find_model("resnet18")->layers.size(), 6u);
  EXPECT_EQ(again.config->find_model("resnet18")->layers[3].input.shape, (std::vector<int64_t>{128, 8, 8}));
  EXPECT_EQ(again.config->scheduler.policy, scheduler_policy::graft);
  EXPECT_EQ(again.config->fragments.size(), 20u);

  auto broken = [&](const std::string& from, const std::string& to) {
    auto bad = text;
    auto at = bad.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    bad.replace(at, from.size(), to);
    return errors_of(bad);
  };
  auto e = broken("{name: stem, profile:", "{name: stem, input: {dtype: float32, shape: [3, 64, 64]}, profile:");
  EXPECT_NE(e.find("the first layer takes the model's input"), std::string::npos) << e;
  EXPECT_NE(e.find("c.yaml:"), std::string::npos) << e;
  e = broken("{name: layer2, input: {dtype: float32, shape: [64, 16, 16]}, ", "{name: layer2, ");
  EXPECT_NE(e.find("layer 'layer2' is missing 'input'"), std::string::npos) << e;
  e = broken("    share_exponent: 0.7\n", "    share_exponent: 0.7\n    profile: {alpha_ms: 1, beta_ms: 1}\n");
  EXPECT_NE(e.find("its profile is their sum"), std::string::npos) << e;
  e = broken("  - name: resnet18\n", "  - name: resnet18[x]\n");
  EXPECT_NE(e.find("cannot hold '['"), std::string::npos) << e;
  // Policy graft: every pipeline one stage on a partitioned model.
  auto flat = text;
  flat.replace(
      flat.find("pipelines:"), 10,
      "  - {name: flat, input: {dtype: float32, shape: [2]}, output: {dtype: float32, shape: [2]}, "
      "profile: {alpha_ms: 1, beta_ms: 1}}\npipelines:\n  - {name: f, slo_ms: 100, stages: [{name: s, model: flat}]}");
  e = errors_of(flat);
  EXPECT_NE(e.find("pipeline 'f' is not one"), std::string::npos) << e;
}

// A model's run times on emulated devices: around the profile (jitter) or under it (p99_spread),
// one or the other.
TEST(cluster_config, a_model_runs_around_its_profile_or_under_it) {
  auto model = [](const std::string& keys) {
    return "models:\n  - {name: a, input: {dtype: float32, shape: [4]}, output: {dtype: float32, shape: [2]}, "
           "profile: {alpha_ms: 1, beta_ms: 4}" +
           keys + "}\n";
  };
  auto ok = parse_cluster_config(nodes + model(", p99_spread: 0.2"), "c.yaml");
  ASSERT_TRUE(ok) << ok.error_text();
  EXPECT_DOUBLE_EQ(ok.config->models[0].p99_spread, 0.2);
  EXPECT_EQ(ok.config->models[0].run_factors(), std::make_pair(0.8, 1.0));
  auto e = errors_of(nodes + model(", p99_spread: 0.6"));
  EXPECT_NE(e.find("c.yaml:10:"), std::string::npos) << e;
  EXPECT_NE(e.find("model 'a' p99_spread must be in [0, 0.5]"), std::string::npos) << e;
  e = errors_of(nodes + model(", jitter: 0.1, p99_spread: 0.2"));
  EXPECT_NE(e.find("sets both jitter and p99_spread"), std::string::npos) << e;
}
}  // namespace
}  // namespace sloserve
