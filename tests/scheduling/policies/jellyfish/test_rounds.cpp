// The controller's Jellyfish policy apart from the actor: slots per pipeline, one variant per
// device, clients routed with the image size to send, and the resident zoo of each device.

#include <gtest/gtest.h>

#include <map>
#include <memory>

#include "scheduling/policies/jellyfish/rounds.hpp"
#include "tests/parse_config.hpp"

namespace sloserve {
namespace {

const char* yaml = R"(
nodes:
  - {name: fe, address: tcp://127.0.0.1:0, roles: [controller, frontend]}
  - {name: w1, address: tcp://127.0.0.1:0, roles: [worker], devices: [{kind: emulated, memory_mb: 300}]}
  - {name: w2, address: tcp://127.0.0.1:0, roles: [worker], devices: [{kind: emulated, memory_mb: 150}]}
models:
  - {name: d128, input: {dtype: float32, shape: [3, 128, 128]}, output: {dtype: float32, shape: [10]},
     preprocess: {from: image}, profile: {alpha_ms: 0.5, beta_ms: 2}, accuracy: 60, memory_mb: 100, max_batch: 8}
  - {name: d256, input: {dtype: float32, shape: [3, 256, 256]}, output: {dtype: float32, shape: [10]},
     preprocess: {from: image}, profile: {alpha_ms: 1, beta_ms: 2}, accuracy: 70, memory_mb: 100, max_batch: 8}
  - {name: d384, input: {dtype: float32, shape: [3, 384, 384]}, output: {dtype: float32, shape: [10]},
     preprocess: {from: image}, profile: {alpha_ms: 1.5, beta_ms: 2}, accuracy: 75, memory_mb: 100, max_batch: 8}
  - {name: d512, input: {dtype: float32, shape: [3, 512, 512]}, output: {dtype: float32, shape: [10]},
     preprocess: {from: image}, profile: {alpha_ms: 2, beta_ms: 2}, accuracy: 80, memory_mb: 100, max_batch: 8}
pipelines:
  - {name: detect, slo_ms: 100, stages: [{name: d, variants: [d512, d128, d384, d256]}]}
scheduler: {policy: jellyfish, jellyfish: {resident: 3, overhead_ms: 5, bytes_per_pixel: 0.25}}
)";

msg::client_load client(const std::string& id, double mbps) {
  return {id, "detect", 100, 10, mbps, 10, 0.25};
}

const msg::client_route* route_of(const cluster_placement& p, const std::string& id) {
  for (auto& c : p.table.clients)
    if (c.client == id) return &c;
  return nullptr;
}

TEST(jellyfish_rounds, the_zoo_ascends_in_accuracy_with_each_variants_image_size) {
  auto cfg = std::make_shared<const cluster_config>(testing::parse_config(yaml));
  auto zoo = sched::jellyfish::zoo_of(cfg->pipelines[0], cfg->models);
  ASSERT_EQ(zoo.size(), 4u);
  EXPECT_EQ(zoo[0].model, "d128");
  EXPECT_EQ(zoo[3].model, "d512");
  EXPECT_EQ(zoo[2].height, 384);
  EXPECT_EQ(zoo[2].width, 384);
  EXPECT_DOUBLE_EQ(zoo[1].latency_ms(4), 6);
}

TEST(jellyfish_rounds, maps_clients_to_devices_and_tells_them_the_size_to_send) {
  auto cfg = std::make_shared<const cluster_config>(testing::parse_config(yaml));
  sched::jellyfish::rounds core(*cfg);
  auto slots = device_slots(*cfg);
  auto p = core.decide({client("fast", 200), client("slow", 2)}, slots, cfg->models, 7);
  auto* fast = route_of(p, "fast");
  auto* slow = route_of(p, "slow");
  ASSERT_TRUE(fast && slow);
  EXPECT_GT(fast->input_height, slow->input_height) << "the slow uplink sends smaller images";
  EXPECT_NE(fast->node, slow->node);
  EXPECT_GT(fast->budget_ms, 0);
  EXPECT_EQ(fast->input_height, fast->input_width);
  // Each device runs the variant its clients were mapped to, first in its schedule.
  for (auto* c : {fast, slow}) {
    auto& s = p.schedules.at(c->node);
    EXPECT_EQ(s.epoch, 7u);
    ASSERT_FALSE(s.devices[0].sessions.empty());
    EXPECT_EQ(s.devices[0].sessions[0].model, c->model);
    bool routed = false;
    for (auto& r : p.table.routes)
      if (r.model == c->model)
        for (auto& i : r.instances) routed |= i.node == c->node;
    EXPECT_TRUE(routed);
  }
  // Requests without a client route run on the fastest variant running.
  ASSERT_EQ(p.table.budgets.size(), 1u);
  EXPECT_EQ(p.table.budgets[0].model, slow->model);
  EXPECT_DOUBLE_EQ(p.table.budgets[0].budget_ms, 100);
  EXPECT_DOUBLE_EQ(core.counters().mapped, 1);
}

// A device keeps its variant's neighbours in size loaded too (Jellyfish's prefetching).
TEST(jellyfish_rounds, devices_prefetch_the_neighbours_of_their_variant) {
  auto cfg = std::make_shared<const cluster_config>(testing::parse_config(yaml));
  sched::jellyfish::rounds core(*cfg);
  auto slots = device_slots(*cfg);
  slots.pop_back();
  auto p = core.decide({client("cam", 200)}, slots, cfg->models, 1);
  auto& d = p.schedules.at("w1").devices[0];
  ASSERT_EQ(d.sessions.size(), 3u);
  EXPECT_EQ(d.sessions[0].model, "d512");
  EXPECT_EQ(d.sessions[1].model, "d384") << "its one neighbour";
  EXPECT_EQ(d.sessions[2].model, "d256") << "then the next one out";
  EXPECT_EQ(d.sessions[1].batch, 1u);
}

TEST(jellyfish_rounds, devices_keep_recent_variants_resident_within_their_memory) {
  auto cfg = std::make_shared<const cluster_config>(testing::parse_config(yaml));
  sched::jellyfish::rounds core(*cfg);
  auto slots = device_slots(*cfg);
  slots.pop_back();  // w2 is down: w1 alone
  std::vector<std::string> ran;
  for (double mbps : {200.0, 2.0, 200.0}) {
    auto p = core.decide({client("cam", mbps)}, slots, cfg->models, 1);
    auto& d = p.schedules.at("w1").devices[0];
    ran.push_back(d.sessions[0].model);
    EXPECT_LE(d.sessions.size(), 3u) << "300 MB hold three variants of 100 MB";
    EXPECT_TRUE(p.schedules.at("w2").devices[0].sessions.empty());
  }
  EXPECT_NE(ran[0], ran[1]);
  EXPECT_EQ(core.counters().switches, 2u);
  EXPECT_GE(core.counters().resident_hits, 1u) << "the switch back found its variant loaded";
  // w2 holds 150 MB: one variant.
  sched::jellyfish::rounds small(*cfg);
  auto only_w2 = device_slots(*cfg);
  only_w2.erase(only_w2.begin());
  for (double mbps : {200.0, 2.0}) {
    auto p = small.decide({client("cam", mbps)}, only_w2, cfg->models, 1);
    EXPECT_EQ(p.schedules.at("w2").devices[0].sessions.size(), 1u);
  }
}

// The headroom (0.1 here) is the pipeline's clients' share of it: 42 clients of 10 frames/s
// on w1 alone fit d512 at batch 8 (t(8) = 444/s) planned full, not at 0.9 of it (400/s); a
// pipeline whose misses gave the headroom back runs d512, one keeping it a smaller variant.
TEST(jellyfish_rounds, a_pipeline_is_planned_with_the_headroom_its_clients_keep) {
  std::string file = yaml;
  file.replace(file.find("resident: 3"), 11, "resident: 3, headroom: 0.1");
  auto cfg = std::make_shared<const cluster_config>(testing::parse_config(file));
  auto slots = device_slots(*cfg);
  slots.pop_back();
  auto ran = [&](double share) {
    sched::jellyfish::rounds core(*cfg);
    std::vector<msg::client_load> cams;
    for (int i = 0; i < 42; ++i) {
      cams.push_back(client("cam" + std::to_string(i), 200));
      cams.back().headroom_share = i == 0 ? share : 0;  // the largest counts
    }
    auto p = core.decide(cams, slots, cfg->models, 1);
    return std::make_pair(p.schedules.at("w1").devices[0].sessions[0].model, core.counters().mapped);
  };
  auto none = ran(0), whole = ran(1);
  EXPECT_EQ(none.first, "d512");
  EXPECT_DOUBLE_EQ(none.second, 1);
  EXPECT_NE(whole.first, "d512");
}

// One device and one variant of l(b) = 20·b + 20 ms (t(1) = 25/s, t(2) = 33/s), SLO 150 ms, with
// `jellyfish` as the scheduler's section.
std::shared_ptr<const cluster_config> one_slow_model(const std::string& jellyfish) {
  return std::make_shared<const cluster_config>(testing::parse_config(R"(
nodes:
  - {name: n, address: tcp://127.0.0.1:0, roles: [controller, frontend, worker], devices: [{kind: emulated}]}
models:
  - {name: slow, input: {dtype: float32, shape: [3, 512, 512]}, output: {dtype: float32, shape: [10]},
     preprocess: {from: image}, profile: {alpha_ms: 20, beta_ms: 20}, accuracy: 60, max_batch: 8}
pipelines:
  - {name: detect, slo_ms: 150, stages: [{name: d, variants: [slow]}]}
)" + std::string("scheduler: {policy: jellyfish, jellyfish: {") + jellyfish +
                                                                      "}}\n"));
}

// A worker keeps its batch while the plan's moves little, but not where the batch kept would not
// carry its clients or fit their budgets: one client on a slow link runs at batch 1 (2·l(2) =
// 120 ms exceeds its budget); two on fast links, 30 frames/s, need batch 2 (t(1) = 25/s).
TEST(jellyfish_rounds, a_worker_keeps_its_batch_only_while_it_carries_its_clients) {
  auto cfg = one_slow_model("mode: paper, overhead_ms: 5");
  sched::jellyfish::rounds core(*cfg);
  auto slots = device_slots(*cfg);
  auto cam = [](const std::string& id, double mbps) { return msg::client_load{id, "detect", 150, 15, mbps, 10, 0.25}; };
  auto batch = [&](std::vector<msg::client_load> clients) {
    auto p = core.decide(clients, slots, cfg->models, 1);
    return p.schedules.at("n").devices[0].sessions.at(0).batch;
  };
  EXPECT_EQ(batch({cam("a", 20)}), 1u) << "a 0.5 Mbit image takes 26 ms at 20 Mbps: a budget of 109 ms";
  EXPECT_EQ(batch({cam("a", 1000)}), 1u) << "batch 2 now fits, but 1 carries the one client: kept";
  EXPECT_EQ(batch({cam("a", 1000), cam("b", 1000)}), 2u);
  EXPECT_EQ(batch({cam("a", 20)}), 1u) << "its budget no longer holds batch 2";
}

// With a headroom the batch kept must carry the rate with it: 24 frames/s fit t(1) = 25/s, but
// not 0.9 of it, so the worker moves to batch 2 once its client's budget allows it.
TEST(jellyfish_rounds, a_kept_batch_keeps_the_headroom) {
  auto cfg = one_slow_model("overhead_ms: 5, headroom: 0.1");
  sched::jellyfish::rounds core(*cfg);
  auto slots = device_slots(*cfg);
  auto batch = [&](double mbps) {
    auto p = core.decide({msg::client_load{"a", "detect", 150, 24, mbps, 10, 0.25}}, slots, cfg->models, 1);
    return p.schedules.at("n").devices[0].sessions.at(0).batch;
  };
  EXPECT_EQ(batch(20), 1u) << "a budget of 109 ms holds batch 1 alone";
  EXPECT_EQ(batch(1000), 2u);
}

// Four devices, a high-priority pipeline of 3 cameras at 40 frames/s and a low one of 20 at 30,
// each on a variant that carries at most 89 frames/s a device (l(4) = 45 ms within half the SLO
// of 100 ms): by frame rate alone the low one would take three devices and leave the high one
// one; by priority the high one first has the two its 120 frames/s take (each device kept a
// fifth idle), and the low one the rest. Of one priority, the rates decide as before.
TEST(jellyfish_rounds, a_higher_priority_takes_the_devices_its_load_needs_first) {
  auto yaml = [](int low_priority) {
    return R"(
nodes:
  - {name: fe, address: tcp://127.0.0.1:0, roles: [controller, frontend]}
  - {name: w, address: tcp://127.0.0.1:0, roles: [worker], devices: [{kind: emulated, count: 4}]}
models:
  - {name: h, input: {dtype: float32, shape: [3, 128, 128]}, output: {dtype: float32, shape: [10]},
     preprocess: {from: image}, profile: {alpha_ms: 10, beta_ms: 5}, accuracy: 60, max_batch: 4}
  - {name: l, input: {dtype: float32, shape: [3, 128, 128]}, output: {dtype: float32, shape: [10]},
     preprocess: {from: image}, profile: {alpha_ms: 10, beta_ms: 5}, accuracy: 60, max_batch: 4}
pipelines:
  - {name: high, slo_ms: 100, priority: 1, stages: [{name: d, variants: [h]}]}
  - {name: low, slo_ms: 100, priority: )" +
           std::to_string(low_priority) + R"(, stages: [{name: d, variants: [l]}]}
scheduler: {policy: jellyfish}
)";
  };
  auto devices_of = [&](int low_priority) {
    auto cfg = std::make_shared<const cluster_config>(testing::parse_config(yaml(low_priority)));
    sched::jellyfish::rounds core(*cfg);
    std::vector<msg::client_load> clients;
    for (int i = 0; i < 3; ++i) clients.push_back({"h" + std::to_string(i), "high", 100, 40, 1000, 10, 0.25});
    for (int i = 0; i < 20; ++i) clients.push_back({"l" + std::to_string(i), "low", 100, 30, 1000, 10, 0.25});
    auto p = core.decide(clients, device_slots(*cfg), cfg->models, 1);
    std::map<std::string, int> on;
    for (auto& d : p.schedules.at("w").devices)
      if (!d.sessions.empty()) ++on[d.sessions.front().model];
    return on;
  };
  auto ranked = devices_of(0), alike = devices_of(1);
  EXPECT_EQ(ranked["h"], 2);
  EXPECT_EQ(ranked["l"], 2);
  EXPECT_EQ(alike["h"], 1);
  EXPECT_EQ(alike["l"], 3);
}

}  // namespace
}  // namespace sloserve
