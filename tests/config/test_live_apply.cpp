// What `sloserve apply` may change while a cluster serves, and what every node runs afterwards.

#include <gtest/gtest.h>

#include "config/live_apply.hpp"
#include "tests/parse_config.hpp"

namespace sloserve {
namespace {

using testing::parse_config;

const std::string running_yaml = R"(nodes:
  - name: ctl
    address: tcp://127.0.0.1:7100
    roles: [controller, frontend]
  - name: w1
    address: tcp://127.0.0.1:7101
    roles: [worker]
    devices: [{kind: emulated, count: 2}]
models:
  - name: a
    input: {dtype: float32, shape: [4]}
    output: {dtype: float32, shape: [2]}
    max_batch: 8
    profile: {alpha_ms: 2, beta_ms: 4}
  - name: b
    input: {dtype: float32, shape: [2]}
    output: {dtype: float32, shape: [4]}
    max_batch: 4
    profile: {alpha_ms: 1, beta_ms: 4}
pipelines:
  - name: p1
    slo_ms: 100
    stages: [{name: s, model: a}]
runtime: {beacon_ms: 100}
)";

// `running_yaml` with `from` replaced by `to` (each must occur once).
std::string edited(std::string yaml, const std::string& from, const std::string& to) {
  auto at = yaml.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  EXPECT_EQ(yaml.find(from, at + 1), std::string::npos) << from;
  return yaml.replace(at, from.size(), to);
}

std::vector<std::string> lines(const std::vector<live_change>& changes) {
  std::vector<std::string> out;
  for (auto& c : changes) out.push_back(c.to_string());
  return out;
}

TEST(live_apply, the_same_file_changes_nothing) {
  auto a = parse_config(running_yaml), b = parse_config(running_yaml);
  EXPECT_TRUE(diff_configs(a, b).empty());
  EXPECT_TRUE(live_refusals(a, b, running_yaml).empty());
}

TEST(live_apply, pipelines_slos_models_and_device_lists_change_live) {
  auto running = parse_config(running_yaml);
  auto yaml = edited(running_yaml, "    slo_ms: 100\n", "    slo_ms: 150\n");
  yaml = edited(yaml, "devices: [{kind: emulated, count: 2}]", "devices: [{kind: emulated, count: 2, models: [a, b]}]");
  yaml = edited(yaml, "runtime:", "  - name: p2\n    slo_ms: 80\n    stages: [{name: t, model: b}]\nruntime:");
  yaml = edited(yaml, "    max_batch: 4\n", "    max_batch: 2\n");
  auto fresh = parse_config(yaml);
  EXPECT_EQ(lines(diff_configs(running, fresh)),
            (std::vector<std::string>{"~ node 'w1': devices[].models", "~ model 'b': max_batch",
                                      "~ pipeline 'p1': slo_ms", "+ pipeline 'p2'"}));
  EXPECT_TRUE(live_refusals(running, fresh, yaml).empty());
}

TEST(live_apply, a_removed_pipeline_and_model_are_changes_too) {
  auto yaml = edited(running_yaml, R"(  - name: b
    input: {dtype: float32, shape: [2]}
    output: {dtype: float32, shape: [4]}
    max_batch: 4
    profile: {alpha_ms: 1, beta_ms: 4}
)",
                     "");
  yaml = edited(yaml, "    stages: [{name: s, model: a}]\n",
                "    stages: [{name: s, model: a}]\n  - name: p3\n    slo_ms: 90\n    stages: [{name: u, model: a}]\n");
  auto running = parse_config(running_yaml), fresh = parse_config(yaml);
  EXPECT_EQ(lines(diff_configs(running, fresh)), (std::vector<std::string>{"- model 'b'", "+ pipeline 'p3'"}));
  EXPECT_TRUE(live_refusals(running, fresh, yaml).empty());
}

TEST(live_apply, what_cannot_change_live_is_refused_at_its_place) {
  auto running = parse_config(running_yaml);
  // A node's address: line 6 ("    address: ..." of w1), column 14.
  auto moved = edited(running_yaml, "tcp://127.0.0.1:7101", "tcp://127.0.0.1:7201");
  auto r = live_refusals(running, parse_config(moved), moved);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].to_string(),
            "test.yaml:6:14: node 'w1': 'address' cannot change while the node runs (restart it with the file)");
  // A device kind.
  auto kind = edited(running_yaml, "{kind: emulated, count: 2}", "{kind: emulated, count: 3}");
  r = live_refusals(running, parse_config(kind), kind);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].line, 8);
  EXPECT_NE(r[0].message.find("'devices' cannot change"), std::string::npos) << r[0].message;
  // A node removed while it runs: at `nodes:`.
  auto dropped = edited(running_yaml, R"(  - name: w1
    address: tcp://127.0.0.1:7101
    roles: [worker]
    devices: [{kind: emulated, count: 2}]
)",
                        "  - name: w2\n    address: tcp://127.0.0.1:7102\n    roles: [worker]\n"
                        "    devices: [{kind: emulated, count: 2}]\n");
  r = live_refusals(running, parse_config(dropped), dropped);
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].to_string().substr(0, 13), "test.yaml:5:5");  // w2, not running
  EXPECT_NE(r[0].message.find("node 'w2' is not in the running cluster"), std::string::npos);
  EXPECT_EQ(r[1].line, 1);  // w1 dropped
  EXPECT_NE(r[1].message.find("node 'w1' runs in the cluster and the file drops it"), std::string::npos);
  // Runtime, and a model's tensors under the same name.
  auto rt = edited(running_yaml, "runtime: {beacon_ms: 100}", "runtime: {beacon_ms: 200}");
  r = live_refusals(running, parse_config(rt), rt);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].line, 24);
  auto shape = edited(running_yaml, "output: {dtype: float32, shape: [2]}", "output: {dtype: float32, shape: [3]}");
  r = live_refusals(running, parse_config(shape), shape);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].line, 12);
  EXPECT_NE(r[0].message.find("model 'a': 'output' cannot change under the same name"), std::string::npos);
}

TEST(live_apply, another_scheduler_policy_is_refused_its_knobs_are_not) {
  auto running = parse_config(running_yaml);
  auto knob = running_yaml + "scheduler: {epoch_s: 20}\n";
  EXPECT_TRUE(live_refusals(running, parse_config(knob), knob).empty());
  auto policy = running_yaml + "scheduler: {policy: static}\n";
  auto r = live_refusals(running, parse_config(policy), policy);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_NE(r[0].message.find("the scheduler policy cannot change"), std::string::npos);
}

// A plain model's file changes under its name (devices load the new file in place); the
// scaler's knobs change, its policy does not.
TEST(live_apply, a_models_file_and_the_scalers_knobs_change_live_the_scaler_policy_does_not) {
  auto running = parse_config(running_yaml);
  auto file = edited(running_yaml, "    max_batch: 8\n", "    max_batch: 8\n    path: a-2.pt\n");
  EXPECT_TRUE(live_refusals(running, parse_config(file), file).empty());
  EXPECT_EQ(lines(diff_configs(running, parse_config(file))), std::vector<std::string>{"~ model 'a': path"});

  auto scaled_yaml = running_yaml + "scaler: {policy: fa2, horizontal_s: 5}\n";
  auto scaled = parse_config(scaled_yaml);
  auto knobs = running_yaml + "scaler: {policy: fa2, horizontal_s: 10, max_total_cores: 8}\n";
  EXPECT_TRUE(live_refusals(scaled, parse_config(knobs), knobs).empty());
  auto off = running_yaml;
  auto r = live_refusals(scaled, parse_config(off), off);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_NE(r[0].message.find("the scaler policy cannot change while the cluster runs ('fa2' runs)"), std::string::npos)
      << r[0].message;
  // Under a scaler, models still change by restart.
  auto with_file = edited(scaled_yaml, "    max_batch: 8\n", "    max_batch: 8\n    path: a-2.pt\n");
  r = live_refusals(scaled, parse_config(with_file), with_file);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_NE(r[0].message.find("owns placement"), std::string::npos) << r[0].message;
}

TEST(live_apply, ports_the_new_file_leaves_to_up_match_the_running_ones) {
  auto running = parse_config(running_yaml);
  auto zero = edited(running_yaml, "tcp://127.0.0.1:7101", "tcp://127.0.0.1:0");
  EXPECT_TRUE(diff_configs(running, parse_config(zero)).empty());
  auto other_host = edited(running_yaml, "tcp://127.0.0.1:7101", "tcp://127.0.0.2:0");
  EXPECT_EQ(live_refusals(running, parse_config(other_host), other_host).size(), 1u);
}

TEST(live_apply, nodes_keep_their_nodes_runtime_and_measured_profiles) {
  auto running = parse_config(running_yaml);
  running.nodes[1].address = "tcp://127.0.0.1:45001";  // as `up` resolved it
  auto yaml = edited(running_yaml, "tcp://127.0.0.1:7101", "tcp://127.0.0.1:0");
  yaml = edited(yaml, "devices: [{kind: emulated, count: 2}]", "devices: [{kind: emulated, count: 2, models: [a]}]");
  yaml = edited(yaml, "runtime: {beacon_ms: 100}", "runtime: {beacon_ms: 300}");
  auto merged = merge_live(running, parse_config(yaml));
  EXPECT_EQ(merged.nodes[1].address, "tcp://127.0.0.1:45001");
  EXPECT_EQ(merged.nodes[1].devices[0].models, std::vector<std::string>{"a"});
  EXPECT_EQ(merged.runtime.beacon_ms, 100);
}

TEST(live_apply, a_node_keeps_every_configuration_it_ran) {
  auto first = std::make_shared<const cluster_config>(parse_config(running_yaml));
  config_source source(first);
  EXPECT_EQ(source.revision(), 0u);
  const auto* spec = &first->models[0];
  auto second = std::make_shared<const cluster_config>(parse_config(running_yaml));
  EXPECT_TRUE(source.set(second, config_revision("x")));
  EXPECT_FALSE(source.set(second, config_revision("x")));  // that revision runs already
  EXPECT_EQ(source.get(), second);
  first.reset();
  EXPECT_EQ(spec->name, "a");  // still alive: requests admitted under it may point into it
  EXPECT_NE(config_revision("x"), 0u);
  EXPECT_NE(config_revision("x"), config_revision("y"));
}

const std::string versions_yaml = R"(nodes:
  - {name: ctl, address: tcp://127.0.0.1:7100, roles: [controller, frontend]}
  - {name: w1, address: tcp://127.0.0.1:7101, roles: [worker], devices: [{kind: emulated, count: 2}]}
models:
  - {name: det, input: {dtype: float32, shape: [4]}, output: {dtype: float32, shape: [2]}, max_batch: 8, profile: {alpha_ms: 2, beta_ms: 4}}
  - {name: det, version: 2, input: {dtype: float32, shape: [4]}, output: {dtype: float32, shape: [2]}, max_batch: 8, profile: {alpha_ms: 2, beta_ms: 5}}
pipelines:
  - {name: p, slo_ms: 100, stages: [{name: s, model: det, versions: [{version: 1, weight: 90}, {version: 2, weight: 10}]}]}
  - {name: q, slo_ms: 100, stages: [{name: s, model: det}]}
)";

TEST(model_versions, versions_are_models_of_their_own_and_stages_split_over_them) {
  auto cfg = parse_config(versions_yaml);
  ASSERT_EQ(cfg.models.size(), 2u);
  EXPECT_EQ(cfg.models[0].name, "det");
  EXPECT_EQ(cfg.models[1].name, "det:v2");
  EXPECT_EQ(cfg.models[1].version, 2);
  auto& s = cfg.pipelines[0].stages[0];
  ASSERT_EQ(s.versions.size(), 2u);
  EXPECT_EQ(s.versions[1].model_index, 1u);
  EXPECT_EQ(s.model_index, 0u) << "plans with the version of the largest weight";
  EXPECT_EQ(cfg.pipelines[1].stages[0].model_index, 0u) << "without versions: the lowest";
  EXPECT_EQ(pipeline_versions(cfg.pipelines[0]), (std::vector<uint32_t>{1, 2}));
  EXPECT_EQ(pipeline_versions(cfg.pipelines[1]), (std::vector<uint32_t>{1}));
  // Written back and read again: the same models and splits.
  auto again = parse_config(to_yaml(cfg));
  EXPECT_EQ(again.models[1].name, "det:v2");
  EXPECT_EQ(again.pipelines[0].stages[0].versions.size(), 2u);
  EXPECT_TRUE(diff_configs(cfg, again).empty());
}

TEST(model_versions, a_request_asks_for_a_version_or_draws_one_by_the_weights) {
  auto cfg = parse_config(versions_yaml);
  auto& vs = cfg.pipelines[0].stages[0].versions;
  std::mt19937_64 rng(7);
  EXPECT_EQ(pick_version(vs, 2, rng), 1u);
  EXPECT_EQ(pick_version(vs, 1, rng), 0u);
  int second = 0;
  for (int i = 0; i < 10000; ++i) second += pick_version(vs, 0, rng) == 1;
  EXPECT_NEAR(second / 100.0, 10, 2) << "within 2 points of the weight over 10,000";
  vs[0].weight = 0;
  for (int i = 0; i < 100; ++i) EXPECT_EQ(pick_version(vs, 0, rng), 1u) << "the rollout: all to version 2";
}

TEST(model_versions, the_file_is_refused_where_versions_do_not_fit) {
  auto refused = [](const std::string& yaml) {
    auto r = parse_cluster_config(yaml, "v.yaml");
    return r ? std::string() : r.error_text();
  };
  auto edit = [](std::string y, const std::string& from, const std::string& to) {
    return y.replace(y.find(from), from.size(), to);
  };
  EXPECT_NE(
      refused(edit(versions_yaml, "{version: 2, weight: 10}", "{version: 3, weight: 10}"))
          .find("v.yaml:8:37: pipeline 'p': stage 's' names version 3 of model 'det', which the file does not have"),
      std::string::npos)
      << refused(edit(versions_yaml, "{version: 2, weight: 10}", "{version: 3, weight: 10}"));
  EXPECT_NE(refused(edit(versions_yaml, "version: 2, input", "version: 1, input"))
                .find("duplicate model name 'det' at version 1"),
            std::string::npos);
  EXPECT_NE(refused(edit(versions_yaml, "weight: 90", "weight: -1")).find("version weight must not be negative"),
            std::string::npos);
  // Policies that choose models themselves say why they refuse versions; piccolo plans them (and
  // the scalers size them: tests/actors/test_scaler.cpp).
  for (auto [policy, why] : {std::pair{"ipa", "which scheduler policy ipa does not plan"},
                             std::pair{"graft", "which scheduler policy graft does not plan"},
                             std::pair{"jellyfish", "which scheduler policy jellyfish does not plan"}})
    EXPECT_NE(refused(versions_yaml + "scheduler: {policy: " + policy + "}\n").find(why), std::string::npos)
        << refused(versions_yaml + "scheduler: {policy: " + policy + "}\n");
  EXPECT_EQ(refused(versions_yaml + "scheduler: {policy: piccolo}\n"), "");
  // A canary raised to 100 through an apply changes the stage and nothing else.
  auto rolled = edit(versions_yaml, "{version: 1, weight: 90}, {version: 2, weight: 10}", "{version: 2, weight: 100}");
  auto changes = diff_configs(parse_config(versions_yaml), parse_config(rolled));
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(changes[0].to_string(), "~ pipeline 'p': stages");
  EXPECT_TRUE(live_refusals(parse_config(versions_yaml), parse_config(rolled), rolled).empty());
}

}  // namespace
}  // namespace sloserve
