// The frontend on a deterministic scheduler: DAG walk with fan-out and joins, validation,
// deadline expiry and re-routing around a failed node, all under a manual clock.

#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "actors/roles.hpp"
#include "caf_fixture.hpp"
#include "tests/partitioned_model.hpp"

namespace sloserve {
namespace {

using namespace std::chrono_literals;
using testing::caf_fixture;
using testing::recording_link;

const char* yaml = R"(
nodes:
  - {name: fe, address: tcp://127.0.0.1:0, roles: [controller, frontend]}
  - {name: w1, address: tcp://127.0.0.1:0, roles: [worker], devices: [{kind: emulated}]}
  - {name: w2, address: tcp://127.0.0.1:0, roles: [worker], devices: [{kind: emulated}]}
models:
  - {name: det, input: {dtype: float32, shape: [4]}, output: {dtype: float32, shape: [8, 3]}, max_batch: 4, profile: {alpha_ms: 1, beta_ms: 2}}
  - {name: cls, input: {dtype: float32, shape: [3]}, output: {dtype: float32, shape: [2]}, max_batch: 4, profile: {alpha_ms: 1, beta_ms: 2}}
  - {name: big, input: {dtype: float32, shape: [5, 5]}, output: {dtype: float32, shape: [1]}, max_batch: 4, profile: {alpha_ms: 1, beta_ms: 2}}
pipelines:
  - name: traffic
    slo_ms: 100
    stages:
      - {name: detect, model: det}
      - {name: classify, model: cls, after: [detect], fanout: 3}
  - name: diamond
    slo_ms: 120
    stages:
      - {name: a, model: det}
      - {name: b, model: cls, after: [a]}
      - {name: c, model: big, after: [a]}
      - {name: d, model: cls, after: [b, c]}
  - name: alarm
    slo_ms: 400
    stages:
      - {name: a, model: det}
      - {name: alert, model: cls, after: [a], slo_ms: 120}
      - {name: report, model: cls, after: [a]}
)";

// A controller apart from the frontend (its load reports are recorded) and one one-stage pipeline.
const char* one_stage_cluster = R"(
nodes:
  - {name: ctl, address: tcp://127.0.0.1:0, roles: [controller]}
  - {name: fe, address: tcp://127.0.0.1:0, roles: [frontend]}
  - {name: w1, address: tcp://127.0.0.1:0, roles: [worker], devices: [{kind: emulated}]}
models:
  - {name: m, input: {dtype: float32, shape: [4]}, output: {dtype: float32, shape: [2]}, max_batch: 4, profile: {alpha_ms: 1, beta_ms: 2}}
pipelines:
  - {name: p, slo_ms: 100, stages: [{name: s, model: m}]}
)";

struct frontend_fixture : caf_fixture, ::testing::Test {
  frontend_fixture() {
    cfg_ = testing::parse_or_die(yaml);
    net = std::make_shared<recording_link>("fe");
    fe = keep(spawn_frontend(*sys, {cfg_, net, 1, [this] { return wall_us; }}));
    net->actors.frontend = fe;
    caf::anon_send(fe, start_atom::value);  // arms the expiry tick, as the node runtime does
    run();
  }

  void route(std::vector<std::string> nodes) {
    msg::routing_table t;
    t.epoch = 1;
    for (auto& m : cfg_->models) {
      msg::model_route r{m.name, {}};
      for (auto& n : nodes) r.instances.push_back({n, 0, 1});
      t.routes.push_back(r);
    }
    for (auto& p : cfg_->pipelines) {
      auto s = even_split(p);
      for (size_t i = 0; i < p.stages.size(); ++i) t.budgets.push_back({p.name, p.stages[i].name, s.budget_ms[i]});
    }
    caf::anon_send(fe, t);
    run();
  }

  void request(std::string pipeline, uint64_t id, tensor input, double network_ms = -1) {
    msg::client_request r{std::move(pipeline), id, {std::move(input)}, network_ms};
    caf::anon_send(fe, ingress{"client-1", std::move(r)});
    run();
  }

  // Answers `inv` to the fixture's frontend, or to `to`.
  void answer(const msg::invocation& inv, const model_spec& m, msg::status code = msg::status::ok,
              const frontend_actor& to = {}) {
    msg::invocation_result r;
    r.id = inv.id;
    r.code = code;
    r.node = "w1";
    r.batch = 1;
    if (code == msg::status::ok)
      r.outputs.push_back(make_tensor(m.output, inv.id, "output"));
    else
      r.reason = "test says no";
    caf::anon_send(to ? to : fe, r);
    run();
  }

  // A request of `client` that its client meant to send at `sent_at_us` by its own clock.
  void request_sent_at(const std::string& client, uint64_t id, int64_t sent_at_us) {
    msg::client_request r{"traffic", id, {make_tensor({dtype::float32, {4}}, 1)}, -1, sent_at_us};
    caf::anon_send(fe, ingress{client, std::move(r)});
    run();
  }
  // The budget of the one invocation the last request sent, in ms; -1 when it sent none.
  double first_budget_ms() {
    auto inv = net->take<msg::invocation>();
    return inv.size() == 1 ? static_cast<double>(inv[0].second.budget_ns) / 1e6 : -1;
  }

  // Another frontend, on `c` and its own `link`, started and with every model routed to w1.
  frontend_actor spawn_routed(const std::shared_ptr<const cluster_config>& c,
                              const std::shared_ptr<recording_link>& link) {
    auto f = keep(spawn_frontend(*sys, {c, link, 1, [this] { return wall_us; }}));
    link->actors.frontend = f;
    caf::anon_send(f, start_atom::value);
    run();
    msg::routing_table t;
    t.epoch = 1;
    for (auto& m : c->models) t.routes.push_back({m.name, {{"w1", 0, 1}}});
    for (auto& p : c->pipelines) {
      auto split = even_split(p);
      for (size_t i = 0; i < p.stages.size(); ++i) t.budgets.push_back({p.name, p.stages[i].name, split.budget_ms[i]});
    }
    caf::anon_send(f, t);
    run();
    return f;
  }

  std::shared_ptr<const cluster_config> cfg_;
  std::shared_ptr<recording_link> net;
  frontend_actor fe;
  int64_t wall_us = 1'800'000'000'000'000;  // the frontend's wall clock, set by each test
};

TEST_F(frontend_fixture, not_ready_without_a_routing_table) {
  request("traffic", 1, make_tensor({dtype::float32, {4}}, 1));
  auto replies = net->client_replies();
  ASSERT_EQ(replies.size(), 1u);
  EXPECT_EQ(replies[0].code, msg::status::error);
  EXPECT_NE(replies[0].reason.find("not ready"), std::string::npos);
}

// Ready means ready: with a table that routes everything to w1, the frontend serves at once
// (w1 is live until it goes down) but says it is ready only once its node agent has heard w1 both
// ways: heartbeats, then a link probe answered over the data connections.
TEST_F(frontend_fixture, is_ready_once_the_agent_heard_its_workers_both_ways_and_over_the_data_connections) {
  net->actors.agent = keep(spawn_node_agent(*sys, {cfg_, net, 1}));
  caf::anon_send(net->actors.agent, start_atom::value);
  run();
  route({"w1"});
  auto status = [&] {
    caf::anon_send(fe, status_query{"probe", msg::status_request{5}});
    run();
    msg::status_reply out;
    for (auto& [client, b] : net->replies)
      if (auto* r = std::get_if<msg::status_reply>(&b)) out = *r;
    net->replies.clear();
    return out;
  };
  EXPECT_FALSE(status().ready);
  EXPECT_EQ(status().detail, "model 'det' runs only on nodes not heard both ways yet");
  auto ours = net->take<msg::heartbeat>();
  ASSERT_FALSE(ours.empty());
  uint64_t our_seq = ours.back().second.seq;
  // w1's heartbeat says it heard ours: the control connections carry both ways. The agent probes
  // w1's link at once and waits for it.
  dispatch(*net, {"w1", msg::heartbeat{"w1", 9, 1, our_seq}}, {});
  run();
  std::vector<msg::heartbeat> probes;
  for (auto& [to, hb] : net->take<msg::heartbeat>())
    if (to == "w1" && hb.probe) probes.push_back(hb);
  ASSERT_EQ(probes.size(), 2u) << "an empty probe and a loaded one";
  EXPECT_FALSE(status().ready) << "the data connections have not answered yet";
  msg::heartbeat echo;
  echo.node = "w1";
  echo.echo = probes[0].probe;
  dispatch(*net, {"w1", echo}, {});
  run();
  auto now = status();
  EXPECT_TRUE(now.ready) << now.detail;
}

TEST_F(frontend_fixture, walks_a_fan_out_dag_and_answers_once) {
  route({"w1"});
  request("traffic", 7, make_tensor({dtype::float32, {4}}, 1));
  auto first = net->take<msg::invocation>();
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0].first, "w1");
  EXPECT_EQ(first[0].second.model, "det");
  // Even split of 100 ms over two stages: the first stage must finish within 50 ms.
  EXPECT_EQ(first[0].second.budget_ns, std::chrono::nanoseconds(50ms).count());
  answer(first[0].second, *cfg_->find_model("det"));
  auto second = net->take<msg::invocation>();
  ASSERT_EQ(second.size(), 3u);  // fanout 3: one invocation per forwarded row
  auto det_out = make_tensor(cfg_->find_model("det")->output, first[0].second.id, "output");
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(second[i].second.model, "cls");
    EXPECT_EQ(second[i].second.inputs[0].shape, std::vector<int64_t>{3});
    EXPECT_EQ(second[i].second.inputs[0].data, row_of(det_out, static_cast<int64_t>(i)).data);
  }
  EXPECT_TRUE(net->client_replies().empty());
  for (auto& [node, inv] : second) answer(inv, *cfg_->find_model("cls"));
  auto replies = net->client_replies();
  ASSERT_EQ(replies.size(), 1u);
  EXPECT_EQ(replies[0].request_id, 7u);
  EXPECT_EQ(replies[0].code, msg::status::ok);
  EXPECT_EQ(replies[0].outputs.size(), 3u);
  EXPECT_EQ(replies[0].outputs[0].name, "classify");
  EXPECT_EQ(replies[0].timings.size(), 4u);
}

// An apply while requests are in flight: one of a pipeline that stays (its SLO changed) goes on
// under the new file and is answered OK; one of a pipeline the file removed finishes on the stages
// it started on (its walk through the old DAG, the models still routed); the removed pipeline
// takes no more requests, and a pipeline the file added waits for its table.
TEST_F(frontend_fixture, an_apply_carries_on_requests_of_kept_pipelines_and_answers_the_others) {
  route({"w1"});
  request("traffic", 7, make_tensor({dtype::float32, {4}}, 1));
  request("diamond", 8, make_tensor({dtype::float32, {4}}, 1));
  auto first = net->take<msg::invocation>();
  ASSERT_EQ(first.size(), 2u);
  std::string next = yaml;
  next.replace(next.find("slo_ms: 100"), 11, "slo_ms: 150");
  auto d = next.find("  - name: diamond");
  next.erase(d, next.find("  - name: alarm") - d);
  next += "  - {name: solo, slo_ms: 50, stages: [{name: s, model: big}]}\n";
  auto applied = testing::parse_or_die(next);
  caf::anon_send(fe, new_config{applied});
  run();
  EXPECT_TRUE(net->client_replies().empty()) << "nothing in flight is answered by the apply";
  // traffic's walk goes on: its detection answered, its classifications sent and answered.
  answer(first[0].second, *cfg_->find_model("det"));
  auto second = net->take<msg::invocation>();
  ASSERT_EQ(second.size(), 3u);
  for (auto& [node, inv] : second) answer(inv, *cfg_->find_model("cls"));
  auto replies = net->client_replies();
  ASSERT_EQ(replies.size(), 1u);
  EXPECT_EQ(replies[0].request_id, 7u);
  EXPECT_EQ(replies[0].code, msg::status::ok) << replies[0].reason;
  net->replies.clear();
  // diamond's, removed by the apply, finishes where it started: a, then b and c, then d.
  answer(first[1].second, *cfg_->find_model("det"));
  auto middle = net->take<msg::invocation>();
  ASSERT_EQ(middle.size(), 2u);
  for (auto& [node, inv] : middle) answer(inv, *cfg_->find_model(inv.model));
  auto last = net->take<msg::invocation>();
  ASSERT_EQ(last.size(), 1u);
  EXPECT_EQ(last[0].second.model, "cls");
  answer(last[0].second, *cfg_->find_model("cls"));
  replies = net->client_replies();
  ASSERT_EQ(replies.size(), 1u);
  EXPECT_EQ(replies[0].request_id, 8u);
  EXPECT_EQ(replies[0].code, msg::status::ok) << replies[0].reason;
  ASSERT_EQ(replies[0].timings.size(), 4u);
  EXPECT_EQ(replies[0].timings.back().stage, "d");
  net->replies.clear();
  request("diamond", 9, make_tensor({dtype::float32, {4}}, 1));
  request("solo", 10, make_tensor({dtype::float32, {5, 5}}, 1));
  replies = net->client_replies();
  ASSERT_EQ(replies.size(), 2u);
  EXPECT_EQ(replies[0].reason, "unknown pipeline 'diamond'");
  EXPECT_EQ(replies[1].code, msg::status::error);
  EXPECT_EQ(replies[1].reason.rfind("not ready", 0), 0u) << replies[1].reason;
  net->replies.clear();
  // traffic runs under its new SLO: 150 ms split evenly once the controller's table says so;
  // until then under the split it had.
  request("traffic", 11, make_tensor({dtype::float32, {4}}, 1));
  EXPECT_EQ(first_budget_ms(), 50);
}

// A canary: a stage over two versions sends each its share of 10,000 requests (within 2 points),
// a request that asks for a version runs it, and each reply names the version that served it.
TEST_F(frontend_fixture, a_stage_over_versions_splits_requests_by_weight_and_replies_name_the_version) {
  auto c = testing::parse_or_die(R"(
nodes:
  - {name: fe, address: tcp://127.0.0.1:0, roles: [controller, frontend]}
  - {name: w1, address: tcp://127.0.0.1:0, roles: [worker], devices: [{kind: emulated}]}
models:
  - {name: det, input: {dtype: float32, shape: [4]}, output: {dtype: float32, shape: [2]}, max_batch: 4, profile: {alpha_ms: 1, beta_ms: 2}}
  - {name: det, version: 2, input: {dtype: float32, shape: [4]}, output: {dtype: float32, shape: [2]}, max_batch: 4, profile: {alpha_ms: 1, beta_ms: 2}}
pipelines:
  - {name: p, slo_ms: 100, stages: [{name: s, model: det, versions: [{version: 1, weight: 90}, {version: 2, weight: 10}]}]}
)");
  auto link = std::make_shared<recording_link>("fe");
  auto f = spawn_routed(c, link);
  std::map<std::string, int> sent;
  for (uint64_t id = 1; id <= 10000; ++id) {
    caf::anon_send(f, ingress{"client-1", {"p", id, {make_tensor({dtype::float32, {4}}, 1)}}});
    run();
    for (auto& [node, inv] : link->take<msg::invocation>()) {
      ++sent[inv.model];
      answer(inv, c->models[inv.model == "det" ? 0 : 1], msg::status::ok, f);
    }
  }
  EXPECT_EQ(sent["det"] + sent["det:v2"], 10000);
  EXPECT_NEAR(sent["det:v2"] / 100.0, 10, 2) << sent["det:v2"];
  // Every reply names the version that served it.
  auto replies = link->client_replies();
  ASSERT_EQ(replies.size(), 10000u);
  for (auto& r : replies) {
    ASSERT_EQ(r.timings.size(), 1u);
    EXPECT_EQ(r.timings[0].version, r.timings[0].model == "det:v2" ? 2u : 1u);
  }
  // Asking for a version: that version, every time; one the pipeline lacks is refused.
  link->replies.clear();
  for (uint64_t id = 20001; id <= 20050; ++id) {
    msg::client_request rq{"p", id, {make_tensor({dtype::float32, {4}}, 1)}};
    rq.version = 2;
    caf::anon_send(f, ingress{"client-1", std::move(rq)});
    run();
  }
  auto pinned = link->take<msg::invocation>();
  ASSERT_EQ(pinned.size(), 50u);
  for (auto& [node, inv] : pinned) EXPECT_EQ(inv.model, "det:v2");
  msg::client_request bad{"p", 30000, {make_tensor({dtype::float32, {4}}, 1)}};
  bad.version = 3;
  caf::anon_send(f, ingress{"client-1", std::move(bad)});
  run();
  replies = link->client_replies();
  ASSERT_EQ(replies.size(), 1u);
  EXPECT_EQ(replies[0].reason, "pipeline 'p' has no version 3; its versions: 1, 2");
}

// A client that names itself: its requests run on the instance the controller mapped it to,
// under the SLO it declares, and each reply tells it the image size to send; others are served
// as before; nonsense in its fields is refused.
TEST_F(frontend_fixture, a_mapped_client_runs_on_its_instance_under_its_slo_and_is_told_its_size) {
  route({"w1", "w2"});
  msg::routing_table t;
  t.epoch = 2;
  for (auto& m : cfg_->models) t.routes.push_back({m.name, {{"w1", 0, 1}, {"w2", 0, 1}}});
  t.budgets = {{"traffic", "detect", 50}, {"traffic", "classify", 50}, {"diamond", "a", 30},
               {"diamond", "b", 30},      {"diamond", "c", 30},        {"diamond", "d", 30}};
  t.clients = {{"cam", "traffic", "det", "w2", 0, 60, 224, 320}};
  caf::anon_send(fe, t);
  run();
  auto send = [&](const std::string& client, uint64_t id, double slo_ms) {
    msg::client_request r{"traffic", id, {make_tensor({dtype::float32, {4}}, 1)}};
    r.client = client;
    r.slo_ms = slo_ms;
    caf::anon_send(fe, ingress{"conn", std::move(r)});
    run();
  };
  for (uint64_t id = 1; id <= 8; ++id) {
    send("cam", id, 150);
    auto inv = net->take<msg::invocation>();
    ASSERT_EQ(inv.size(), 1u);
    EXPECT_EQ(inv[0].first, "w2") << "the mapped instance, every time";
    EXPECT_EQ(inv[0].second.budget_ns, std::chrono::nanoseconds(75ms).count()) << "half of its own 150 ms";
    answer(inv[0].second, *cfg_->find_model("det"));
    for (auto& [node, i] : net->take<msg::invocation>()) answer(i, *cfg_->find_model("cls"));
    auto replies = net->client_replies();
    ASSERT_EQ(replies.size(), id);
    EXPECT_EQ(replies.back().code, msg::status::ok);
    EXPECT_EQ(replies.back().input_height, 224u);
    EXPECT_EQ(replies.back().input_width, 320u);
  }
  send("other", 9, 0);
  auto inv = net->take<msg::invocation>();
  ASSERT_EQ(inv.size(), 1u);
  EXPECT_EQ(inv[0].second.budget_ns, std::chrono::nanoseconds(50ms).count()) << "the pipeline's SLO";
  answer(inv[0].second, *cfg_->find_model("det"));
  for (auto& [node, i] : net->take<msg::invocation>()) answer(i, *cfg_->find_model("cls"));
  auto replies = net->client_replies();
  ASSERT_EQ(replies.size(), 9u);
  EXPECT_EQ(replies.back().input_height, 0u) << "no mapping, no advice";
  send("cam", 10, -5);
  replies = net->client_replies();
  ASSERT_EQ(replies.size(), 10u);
  EXPECT_EQ(replies.back().code, msg::status::error);
  EXPECT_NE(replies.back().reason.find("sloMs must be in"), std::string::npos) << replies.back().reason;
  // The mapping moves while a request is out (its uplink rose): the reply advises the new size.
  send("cam", 11, 150);
  auto out = net->take<msg::invocation>();
  ASSERT_EQ(out.size(), 1u);
  t.epoch = 3;
  t.clients = {{"cam", "traffic", "det", "w2", 0, 60, 480, 640}};
  caf::anon_send(fe, t);
  run();
  answer(out[0].second, *cfg_->find_model("det"));
  for (auto& [node, i] : net->take<msg::invocation>()) answer(i, *cfg_->find_model("cls"));
  replies = net->client_replies();
  ASSERT_EQ(replies.size(), 11u);
  EXPECT_EQ(replies.back().code, msg::status::ok);
  EXPECT_EQ(replies.back().input_height, 480u) << "the mapping as the reply leaves";
  EXPECT_EQ(replies.back().input_width, 640u);
}

// Under Jellyfish each frontend counts its named clients' outcomes per pipeline, and the frames
// they report skipping, and moves the pipeline's dip quantile on them every second: up while they do
// not miss, down while they do (sched::dip_quantile; the gauge shows it).
TEST_F(frontend_fixture, a_named_clients_misses_move_its_pipelines_dip_quantile) {
  auto jf = testing::parse_or_die(R"(
nodes:
  - {name: fe, address: tcp://127.0.0.1:0, roles: [controller, frontend]}
  - {name: w1, address: tcp://127.0.0.1:0, roles: [worker], devices: [{kind: emulated}]}
models:
  - {name: det, input: {dtype: float32, shape: [3, 4, 4]}, output: {dtype: float32, shape: [8, 3]}, max_batch: 4,
     preprocess: {from: image}, profile: {alpha_ms: 1, beta_ms: 2}}
pipelines:
  - {name: video, slo_ms: 100, stages: [{name: detect, model: det}]}
scheduler: {policy: jellyfish, jellyfish: {uplink_quantile: 0.1, miss_target: 0.02}}
)");
  auto link2 = std::make_shared<recording_link>("fe");
  auto fe2 = spawn_routed(jf, link2);
  uint64_t id = 0;
  // 120 requests of client cam, each telling `skipped` frames skipped before it; the detector
  // answers `code`.
  auto serve = [&](uint32_t skipped, msg::status code) {
    for (int k = 0; k < 120; ++k) {
      msg::client_request r{"video", ++id, {make_tensor({dtype::float32, {3, 4, 4}}, 1)}};
      r.client = "cam";
      r.rate_hz = 15;
      r.skipped = skipped;
      caf::anon_send(fe2, ingress{"conn", std::move(r)});
      run();
      for (auto& [node, inv] : link2->take<msg::invocation>()) answer(inv, *jf->find_model(inv.model), code, fe2);
    }
  };
  auto gauge = [&](const std::string& name) {
    auto text = link2->metrics.render("fe", std::chrono::duration<double>(now().time_since_epoch()).count());
    std::string key = name + R"({pipeline="video"} )";
    auto at = text.find(key);
    return at == std::string::npos ? -1.0 : std::stod(text.substr(at + key.size()));
  };
  auto quantile = [&] { return gauge("sloserve_client_uplink_quantile"); };
  serve(0, msg::status::ok);
  advance(500ms);
  EXPECT_DOUBLE_EQ(quantile(), 0.1) << "no step before 1 s";
  advance(600ms);
  EXPECT_DOUBLE_EQ(quantile(), 0.2) << "none of 120 missed: up";
  EXPECT_DOUBLE_EQ(gauge("sloserve_client_wait_share"), 1) << "the worst case while the quantile is under 1";
  EXPECT_DOUBLE_EQ(gauge("sloserve_client_headroom_share"), 1) << "all of it while the quantile is under 1";
  serve(1, msg::status::ok);  // 120 answered in time, and 120 frames skipped
  advance(1100ms);
  EXPECT_DOUBLE_EQ(quantile(), 0.1) << "120 of 342 weighed missed: down 2x";
  serve(0, msg::status::error);
  advance(1100ms);
  EXPECT_DOUBLE_EQ(quantile(), 0.05) << "refused requests missed";
  auto replies = link2->client_replies();
  ASSERT_EQ(replies.size(), 360u);
  EXPECT_EQ(std::count_if(replies.begin(), replies.end(), [](auto& r) { return r.code == msg::status::ok; }), 240);
}

// What the node's /metrics shows of the frontend's work: every reply counted once by outcome,
// durations on the actors' clock, stages, and drops by reason; names clients make up do not
// become labels.
// Tenants: a tenant over its cap is answered OVERLOADED with the reason, an unknown one ERROR;
// under a quota (a plan short of devices) each tenant has its share, and what was shed is
// reported beside what was let in, so that the plan sees the load sent.
TEST_F(frontend_fixture, tenants_are_capped_and_shed_by_their_share_and_what_is_shed_is_reported) {
  auto c = testing::parse_or_die(std::string(one_stage_cluster) + R"(
security:
  tenants:
    - {name: capped, rate: 5}
    - {name: gold, weight: 3}
    - {name: bronze}
)");
  auto link = std::make_shared<recording_link>("fe");
  auto f = spawn_routed(c, link);
  uint64_t id = 0;
  auto answer_all = [&] {
    for (auto& [node, inv] : link->take<msg::invocation>()) {
      msg::invocation_result r;
      r.id = inv.id, r.code = msg::status::ok, r.node = "w1", r.batch = 1;
      r.outputs.push_back(make_tensor({dtype::float32, {2}}, 1, "output"));
      caf::anon_send(f, r);
    }
    run();
  };
  auto send = [&](const std::string& tenant) {
    msg::client_request r{"p", ++id, {make_tensor({dtype::float32, {4}}, 1)}};
    r.tenant = tenant;
    caf::anon_send(f, ingress{"client-" + tenant, std::move(r)});
  };
  for (int i = 0; i < 10; ++i) send("capped");  // at one instant: a burst of one
  send("nobody");
  run();
  auto replies = link->client_replies();
  ASSERT_EQ(replies.size(), 10u);  // nine capped, one unknown; the first is in flight
  EXPECT_EQ(replies[0].code, msg::status::overloaded);
  EXPECT_EQ(replies[0].reason, "tenant 'capped' is over its rate cap of 5 queries/s");
  EXPECT_EQ(replies.back().code, msg::status::error);
  EXPECT_EQ(replies.back().reason, "unknown tenant 'nobody'");
  answer_all();
  advance(2s);  // its window reported
  link->replies.clear();
  link->take<msg::load_report>();

  // A plan short of devices: 40 queries/s of p. gold and bronze each send 100/s for 5 s.
  msg::routing_table t;
  t.epoch = 2;
  t.routes.push_back({"m", {{"w1", 0, 1}}});
  t.budgets.push_back({"p", "s", 100});
  t.quotas = {{"p", 40, 200, 0}};
  caf::anon_send(f, t);
  run();
  for (int i = 0; i < 500; ++i) {
    send("gold");
    send("bronze");
    advance(10ms);
    answer_all();
  }
  advance(2s);  // the last window reported
  std::map<std::string, int> ok, admitted, shed;
  std::string why;
  for (auto& [client, b] : link->replies)
    if (auto* r = std::get_if<msg::client_reply>(&b)) {
      (r->code == msg::status::overloaded ? shed : admitted)[client]++;
      if (r->code == msg::status::ok) ok[client]++;
      if (client == "client-bronze" && r->code == msg::status::overloaded) why = r->reason;
    }
  double gold = ok["client-gold"], bronze = ok["client-bronze"];
  EXPECT_NEAR(gold / (gold + bronze), 0.75, 0.05) << gold << " and " << bronze;
  EXPECT_NEAR((gold + bronze) / 5, 40, 4);
  EXPECT_NE(why.find("shed for fair share"), std::string::npos) << why;
  uint64_t queries = 0, reported_shed = 0;
  for (auto& [node, r] : link->take<msg::load_report>()) {
    EXPECT_EQ(node, "ctl");
    for (auto& pl : r.pipelines) queries += pl.queries, reported_shed += pl.shed;
  }
  EXPECT_EQ(queries, static_cast<uint64_t>(admitted["client-gold"] + admitted["client-bronze"]));
  EXPECT_EQ(reported_shed, static_cast<uint64_t>(shed["client-gold"] + shed["client-bronze"]));
  EXPECT_GT(reported_shed, 500u);
  auto text = link->metrics.render("fe", 0);
  EXPECT_NE(text.find(R"(sloserve_tenant_requests_total{tenant="capped",outcome="capped"} 9)"), std::string::npos)
      << text;
  EXPECT_NE(text.find(R"(sloserve_tenant_requests_total{tenant="bronze",outcome="shed"} )"), std::string::npos);
}

// A tenant's cap holds across the cluster whichever frontends it reaches: each frontend tells the
// others its capped tenants' rates at each beacon and admits its part of the cap in proportion to
// what the tenant sends it. One frontend alone with the tenant admits the whole cap (not half of
// it); both with it admit the cap between them.
TEST_F(frontend_fixture, a_tenants_cap_is_split_by_where_it_sends_across_frontends) {
  auto c = testing::parse_or_die(R"(
nodes:
  - {name: ctl, address: tcp://127.0.0.1:0, roles: [controller]}
  - {name: fe, address: tcp://127.0.0.1:0, roles: [frontend]}
  - {name: fe2, address: tcp://127.0.0.1:0, roles: [frontend]}
  - {name: w1, address: tcp://127.0.0.1:0, roles: [worker], devices: [{kind: emulated}]}
models:
  - {name: m, input: {dtype: float32, shape: [4]}, output: {dtype: float32, shape: [2]}, max_batch: 4, profile: {alpha_ms: 1, beta_ms: 2}}
pipelines:
  - {name: p, slo_ms: 100, stages: [{name: s, model: m}]}
security:
  tenants:
    - {name: capped, rate: 20}
)");
  std::map<std::string, std::shared_ptr<recording_link>> links{{"fe", std::make_shared<recording_link>("fe")},
                                                               {"fe2", std::make_shared<recording_link>("fe2")}};
  std::map<std::string, frontend_actor> fes;
  for (auto& [name, link] : links) {
    fes[name] = spawn_routed(c, link);
    msg::routing_table t;  // two frontends share the caps
    t.epoch = 2;
    t.frontends = 2;
    t.routes.push_back({"m", {{"w1", 0, 1}}});
    t.budgets.push_back({"p", "s", 100});
    caf::anon_send(fes[name], t);
  }
  run();
  uint64_t id = 0;
  std::map<std::string, int> ok;
  // Every 10 ms: `to` each get a request of the tenant; invocations answered, replies counted,
  // and the reports one frontend sends another delivered.
  auto run_for = [&](std::chrono::seconds span, std::vector<std::string> to) {
    for (auto t = 0ms; t < span; t += 10ms) {
      for (auto& name : to) {
        msg::client_request r{"p", ++id, {make_tensor({dtype::float32, {4}}, 1)}};
        r.tenant = "capped";
        caf::anon_send(fes[name], ingress{"client", std::move(r)});
      }
      advance(10ms);
      for (auto& [name, link] : links) {
        for (auto& [node, inv] : link->take<msg::invocation>()) {
          msg::invocation_result r;
          r.id = inv.id, r.code = msg::status::ok, r.node = "w1", r.batch = 1;
          r.outputs.push_back(make_tensor({dtype::float32, {2}}, 1, "output"));
          caf::anon_send(fes[name], r);
        }
        for (auto& [node, report] : link->take<msg::load_report>()) {
          if (node == "ctl") continue;
          EXPECT_EQ(report.tenants.size(), 1u);
          caf::anon_send(fes.at(node), report);
        }
        for (auto& r : link->client_replies()) ok[name] += r.code == msg::status::ok;
        link->replies.clear();
      }
      run();
    }
  };
  run_for(2s, {"fe"});  // the rates heard
  ok.clear();
  run_for(5s, {"fe"});
  EXPECT_NEAR(ok["fe"], 20 * 5, 12) << "the whole cap at the one frontend the tenant reaches";
  run_for(3s, {"fe", "fe2"});
  ok.clear();
  run_for(5s, {"fe", "fe2"});
  EXPECT_NEAR(ok["fe"] + ok["fe2"], 20 * 5, 12) << ok["fe"] << " and " << ok["fe2"] << ": the cap between them";
  EXPECT_NEAR(ok["fe"], ok["fe2"], 15);
}

TEST_F(frontend_fixture, counts_every_reply_in_the_nodes_metrics) {
  route({"w1"});
  request("traffic", 1, make_tensor({dtype::float32, {4}}, 1));
  advance(20ms);
  answer(net->take<msg::invocation>().at(0).second, *cfg_->find_model("det"));
  advance(10ms);
  for (auto& [node, inv] : net->take<msg::invocation>()) answer(inv, *cfg_->find_model("cls"));
  request("no-such-pipeline", 2, make_tensor({dtype::float32, {4}}, 1));
  request("traffic", 3, make_tensor({dtype::float32, {4}}, 1), 150);  // the network took the whole SLO
  auto replies = net->client_replies();
  ASSERT_EQ(replies.size(), 3u);
  auto text = net->metrics.render("fe", std::chrono::duration<double>(now().time_since_epoch()).count());
  auto has = [&](const std::string& line) { return text.find(line + "\n") != std::string::npos; };
  EXPECT_TRUE(has(R"(sloserve_requests_total{pipeline="traffic",outcome="ok"} 1)")) << text;
  EXPECT_TRUE(has(R"(sloserve_requests_total{pipeline="traffic",outcome="dropped"} 1)")) << text;
  EXPECT_TRUE(has(R"(sloserve_requests_total{pipeline="_unknown",outcome="error"} 1)")) << text;
  EXPECT_EQ(text.find("no-such-pipeline"), std::string::npos);
  EXPECT_TRUE(has(R"(sloserve_request_duration_seconds_bucket{pipeline="traffic",le="0.025"} 1)")) << text;
  EXPECT_TRUE(has(R"(sloserve_request_duration_seconds_bucket{pipeline="traffic",le="0.05"} 2)")) << text;
  EXPECT_TRUE(has(R"(sloserve_stage_duration_seconds_count{pipeline="traffic",stage="classify"} 3)")) << text;
  EXPECT_TRUE(has(R"(sloserve_stage_duration_seconds_bucket{pipeline="traffic",stage="detect",le="0.01"} 0)")) << text;
  EXPECT_TRUE(has(R"(sloserve_stage_duration_seconds_bucket{pipeline="traffic",stage="detect",le="0.025"} 1)")) << text;
  EXPECT_TRUE(has(R"(sloserve_drops_total{reason="network_time"} 1)")) << text;
  EXPECT_TRUE(has(R"(sloserve_slo_attainment_ratio{pipeline="traffic"} 0.5)")) << text;
  EXPECT_TRUE(has("sloserve_requests_in_flight 0")) << text;
}

// A path to a worker that holds a standing queue (replies spend 40 ms outside the worker's queue
// and execution where the first, earlier, took none): what is sent after it loses the path's one-way delay
// from its budget, and a request that Little's law says would queue on the path past a share of
// its budget is answered OVERLOADED at once, with the reason; once the path is quiet, requests go.
TEST_F(frontend_fixture, a_backed_up_path_to_a_worker_refuses_what_would_queue_on_it_and_says_why) {
  auto c = testing::parse_or_die(R"(
nodes:
  - {name: fe, address: tcp://127.0.0.1:0, roles: [controller, frontend]}
  - {name: w1, address: tcp://127.0.0.1:0, roles: [worker], devices: [{kind: emulated}]}
models:
  - {name: det, input: {dtype: float32, shape: [4]}, output: {dtype: float32, shape: [8, 3]}, max_batch: 4, profile: {alpha_ms: 1, beta_ms: 2}}
pipelines:
  - {name: one, slo_ms: 100, stages: [{name: s, model: det}]}
)");
  auto link = std::make_shared<recording_link>("fe");
  auto f = spawn_routed(c, link);
  uint64_t id = 0;
  auto send = [&] {
    caf::anon_send(f, ingress{"client-1", msg::client_request{"one", ++id, {make_tensor({dtype::float32, {4}}, 1)}}});
    run();
  };
  auto answer_all = [&] {
    for (auto& [node, inv] : link->take<msg::invocation>()) answer(inv, c->models[0], msg::status::ok, f);
  };
  send();
  answer_all();  // at once: the path's base is nothing
  advance(150ms);
  for (int i = 0; i < 40; ++i) send();
  advance(40ms);
  answer_all();  // 40 ms each: 41 replies in 190 ms
  // 40 ms over the base, of 100 ms budgets, for all of the last 100 ms: a standing queue. At 216
  // replies/s, 6 in flight queue 27.8 ms (< 30 ms): sent, each with 100 ms less the 20 ms one
  // way; the 7th would queue 32.4 ms, and it and the rest are refused.
  for (int i = 0; i < 20; ++i) send();
  auto sent = link->take<msg::invocation>();
  ASSERT_EQ(sent.size(), 6u);
  for (auto& [node, inv] : sent) EXPECT_EQ(inv.budget_ns, 80'000'000);
  auto replies = link->client_replies();
  ASSERT_EQ(replies.size(), 41u + 14u);
  for (size_t i = 41; i < replies.size(); ++i) {
    EXPECT_EQ(replies[i].code, msg::status::overloaded);
    EXPECT_NE(replies[i].reason.find("the path to worker 'w1' is backed up"), std::string::npos) << replies[i].reason;
  }
  for (auto& [node, inv] : sent) answer(inv, c->models[0], msg::status::ok, f);
  // No reply for longer than the guard's interval: nothing stands, the next request goes whole.
  advance(200ms);
  send();
  sent = link->take<msg::invocation>();
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].second.budget_ns, 100'000'000);
}

// Per-path SLOs: the alert's path is due 120 ms after arrival though the pipeline's SLO is 400 ms.
// Its invocation's deadline says so; a reply whose alert finished later names it, and counts as
// outside the SLO though it came within 400 ms.
TEST_F(frontend_fixture, a_leaf_past_its_own_slo_makes_the_reply_late) {
  route({"w1"});
  auto serve = [&](uint64_t id, std::chrono::milliseconds alert_after) {
    request("alarm", id, make_tensor({dtype::float32, {4}}, 1));
    advance(5ms);
    answer(net->take<msg::invocation>().at(0).second, *cfg_->find_model("det"));
    auto next = net->take<msg::invocation>();
    EXPECT_EQ(next.size(), 2u);
    for (auto& [node, inv] : next)
      if (static_cast<double>(inv.budget_ns) / 1e6 <= 115 + 1e-6) {  // the alert's: 120 ms less the 5 gone
        advance(alert_after);
        answer(inv, *cfg_->find_model("cls"));
      }
    for (auto& [node, inv] : next)
      if (static_cast<double>(inv.budget_ns) / 1e6 > 115 + 1e-6) answer(inv, *cfg_->find_model("cls"));
    auto replies = net->client_replies();
    EXPECT_EQ(replies.size(), id);
    return replies.empty() ? msg::client_reply{} : replies.back();
  };
  auto in_time = serve(1, 100ms);
  EXPECT_EQ(in_time.code, msg::status::ok);
  EXPECT_TRUE(in_time.late_paths.empty());
  auto late = serve(2, 130ms);
  EXPECT_EQ(late.code, msg::status::ok);
  EXPECT_LT(late.total_ms, 400);
  EXPECT_EQ(late.late_paths, std::vector<std::string>{"alert"});
  auto text = net->metrics.render("fe", std::chrono::duration<double>(now().time_since_epoch()).count());
  EXPECT_NE(text.find(R"(sloserve_slo_attainment_ratio{pipeline="alarm"} 0.5)"), std::string::npos) << text;
}

// A client may hold runtime.max_client_in_flight requests at once; past it, OVERLOADED at once,
// while other clients are served; a reply frees its slot.
TEST_F(frontend_fixture, one_client_cannot_hold_more_than_its_share_of_requests_in_flight) {
  auto capped = testing::parse_or_die(std::string(yaml) + "runtime: {max_client_in_flight: 2}\n");
  auto link2 = std::make_shared<recording_link>("fe");
  auto fe2 = spawn_routed(capped, link2);
  auto send = [&](const std::string& client, uint64_t id) {
    caf::anon_send(fe2, ingress{client, msg::client_request{"traffic", id, {make_tensor({dtype::float32, {4}}, 1)}}});
    run();
  };
  send("greedy", 1);
  send("greedy", 2);
  send("greedy", 3);
  send("polite", 4);
  auto replies = link2->client_replies();
  ASSERT_EQ(replies.size(), 1u);
  EXPECT_EQ(replies[0].request_id, 3u);
  EXPECT_EQ(replies[0].code, msg::status::overloaded);
  EXPECT_NE(replies[0].reason.find("2 requests in flight (runtime.max_client_in_flight)"), std::string::npos)
      << replies[0].reason;
  auto invs = link2->take<msg::invocation>();
  ASSERT_EQ(invs.size(), 3u);  // 1, 2 and the polite client's 4
  // Request 1 fails at its device: its slot is free again.
  msg::invocation_result r;
  r.id = invs[0].second.id;
  r.code = msg::status::error;
  r.reason = "test says no";
  caf::anon_send(fe2, r);
  run();
  link2->replies.clear();
  send("greedy", 5);
  EXPECT_TRUE(link2->client_replies().empty()) << "admitted";
  EXPECT_EQ(link2->take<msg::invocation>().size(), 1u);
  auto text = link2->metrics.render("fe", 0);
  EXPECT_NE(text.find("sloserve_drops_total{reason=\"client_in_flight\"} 1\n"), std::string::npos) << text;
}

TEST_F(frontend_fixture, a_full_payload_budget_answers_overloaded_and_finishing_frees_it) {
  route({"w1"});
  int64_t limit = int64_t{cfg_->runtime.max_queued_mb} << 20;
  ASSERT_TRUE(net->queued.try_charge(limit - 10, limit));        // the node's devices hold the rest
  request("traffic", 1, make_tensor({dtype::float32, {4}}, 1));  // 16 bytes: over
  auto replies = net->client_replies();
  ASSERT_EQ(replies.size(), 1u);
  EXPECT_EQ(replies[0].code, msg::status::overloaded);
  EXPECT_NE(replies[0].reason.find("runtime.max_queued_mb"), std::string::npos) << replies[0].reason;
  EXPECT_TRUE(net->take<msg::invocation>().empty());
  net->queued.release(limit - 10);
  net->replies.clear();
  request("traffic", 2, make_tensor({dtype::float32, {4}}, 1));
  EXPECT_EQ(net->queued.used(), 16);  // held while the query is in flight
  auto inv = net->take<msg::invocation>();
  ASSERT_EQ(inv.size(), 1u);
  answer(inv[0].second, *cfg_->find_model("det"));
  for (auto& [node, x] : net->take<msg::invocation>()) answer(x, *cfg_->find_model("cls"));
  EXPECT_EQ(net->client_replies().at(0).code, msg::status::ok);
  EXPECT_EQ(net->queued.used(), 0);
}

TEST_F(frontend_fixture, join_waits_for_every_parent) {
  route({"w1"});
  request("diamond", 1, make_tensor({dtype::float32, {4}}, 1));
  auto a = net->take<msg::invocation>();
  ASSERT_EQ(a.size(), 1u);
  answer(a[0].second, *cfg_->find_model("det"));
  auto bc = net->take<msg::invocation>();
  ASSERT_EQ(bc.size(), 2u);  // b and c in parallel
  // c's model wants [5, 5]: it gets a tensor of its own shape derived from a's output.
  auto& c = bc[0].second.model == "big" ? bc[0].second : bc[1].second;
  auto& b = bc[0].second.model == "big" ? bc[1].second : bc[0].second;
  EXPECT_EQ(c.inputs[0].shape, (std::vector<int64_t>{5, 5}));
  answer(b, *cfg_->find_model("cls"));
  EXPECT_TRUE(net->take<msg::invocation>().empty());  // d waits for c
  answer(c, *cfg_->find_model("big"));
  auto d = net->take<msg::invocation>();
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].second.model, "cls");
  answer(d[0].second, *cfg_->find_model("cls"));
  auto replies = net->client_replies();
  ASSERT_EQ(replies.size(), 1u);
  EXPECT_EQ(replies[0].code, msg::status::ok);
}

TEST_F(frontend_fixture, rejects_bad_input_with_a_reason) {
  route({"w1"});
  request("nope", 1, make_tensor({dtype::float32, {4}}, 1));
  request("traffic", 2, make_tensor({dtype::float32, {5}}, 1));
  request("traffic", 3, make_tensor({dtype::int32, {4}}, 1));
  request("traffic", 4, make_tensor({dtype::float32, {4}}, 1), 150);  // network ate the SLO
  auto r = net->client_replies();
  ASSERT_EQ(r.size(), 4u);
  EXPECT_NE(r[0].reason.find("unknown pipeline 'nope'"), std::string::npos);
  EXPECT_NE(r[1].reason.find("float32[5] does not match the model's declared input float32[4]"), std::string::npos)
      << r[1].reason;
  EXPECT_NE(r[2].reason.find("int32[4] does not match"), std::string::npos);
  EXPECT_EQ(r[3].code, msg::status::dropped);
  EXPECT_TRUE(net->take<msg::invocation>().empty());
}

// The deadline starts when the client meant to send: time spent in the client's queues and on
// the way counts against the SLO, and work already past it is not started.
TEST_F(frontend_fixture, the_deadline_starts_at_the_clients_send_time) {
  route({"w1"});
  request_sent_at("client-1", 1, wall_us - 30'000);  // 30 ms ago: 70 ms left, the first stage half
  EXPECT_DOUBLE_EQ(first_budget_ms(), 35);
  request_sent_at("client-1", 2, wall_us - 150'000);  // 150 ms ago, SLO 100 ms
  EXPECT_EQ(first_budget_ms(), -1);
  auto replies = net->client_replies();
  ASSERT_EQ(replies.size(), 1u);
  EXPECT_EQ(replies[0].request_id, 2u);
  EXPECT_EQ(replies[0].code, msg::status::dropped);
  EXPECT_NE(replies[0].reason.find("stale on arrival: sent 150.0 ms ago"), std::string::npos) << replies[0].reason;
}

// A client whose clock differs from the frontend's by seconds: its least delay is taken as the
// offset between the clocks, and only what a request took beyond it counts.
TEST_F(frontend_fixture, a_client_clock_off_by_seconds_counts_only_delay_beyond_the_offset) {
  route({"w1"});
  int64_t behind = 5'000'000;  // the client's clock is 5 s behind
  request_sent_at("slow-clock", 1, wall_us - behind);
  EXPECT_DOUBLE_EQ(first_budget_ms(), 50);
  request_sent_at("slow-clock", 2, wall_us - behind - 40'000);  // sat 40 ms in its queues
  EXPECT_DOUBLE_EQ(first_budget_ms(), 30);
  int64_t ahead = -3'000'000;  // another client's clock is 3 s ahead: requests seem to arrive early
  request_sent_at("fast-clock", 3, wall_us - ahead);
  EXPECT_DOUBLE_EQ(first_budget_ms(), 50);
  request_sent_at("fast-clock", 4, wall_us - ahead - 20'000);
  EXPECT_DOUBLE_EQ(first_budget_ms(), 40);
  EXPECT_TRUE(net->client_replies().empty());
}

TEST_F(frontend_fixture, network_time_shortens_the_deadline) {
  route({"w1"});
  request("traffic", 1, make_tensor({dtype::float32, {4}}, 1), 40);
  auto inv = net->take<msg::invocation>();
  ASSERT_EQ(inv.size(), 1u);
  // 100 ms SLO - 40 ms network = 60 ms; the first of two stages gets half.
  EXPECT_EQ(inv[0].second.budget_ns, std::chrono::nanoseconds(30ms).count());
  // A request that reports no network time is charged what the same client reported before.
  request("traffic", 2, make_tensor({dtype::float32, {4}}, 1));
  inv = net->take<msg::invocation>();
  ASSERT_EQ(inv.size(), 1u);
  EXPECT_EQ(inv[0].second.budget_ns, std::chrono::nanoseconds(30ms).count());
  // Another client has reported nothing: it gets the whole SLO.
  caf::anon_send(fe,
                 ingress{"client-2", msg::client_request{"traffic", 3, {make_tensor({dtype::float32, {4}}, 1)}, -1}});
  run();
  inv = net->take<msg::invocation>();
  ASSERT_EQ(inv.size(), 1u);
  EXPECT_EQ(inv[0].second.budget_ns, std::chrono::nanoseconds(50ms).count());
}

TEST_F(frontend_fixture, a_failed_stage_fails_the_query_once) {
  route({"w1"});
  request("traffic", 1, make_tensor({dtype::float32, {4}}, 1));
  auto inv = net->take<msg::invocation>();
  answer(inv[0].second, *cfg_->find_model("det"), msg::status::dropped);
  answer(inv[0].second, *cfg_->find_model("det"));  // a duplicate result is ignored
  auto r = net->client_replies();
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].code, msg::status::dropped);
  EXPECT_NE(r[0].reason.find("stage 'detect' on w1: test says no"), std::string::npos) << r[0].reason;
}

TEST_F(frontend_fixture, silence_past_deadline_and_grace_is_answered) {
  route({"w1"});
  request("traffic", 1, make_tensor({dtype::float32, {4}}, 1));
  advance(300ms);  // before 100 ms + 250 ms grace
  EXPECT_TRUE(net->client_replies().empty());
  for (int i = 0; i < 10; ++i) advance(10ms);
  auto r = net->client_replies();
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].code, msg::status::error);
  EXPECT_NE(r[0].reason.find("waiting on w1"), std::string::npos) << r[0].reason;
}

// A path that holds every invocation past its deadline returns nothing in time: the replies that
// come late, to queries already answered, still tell the controller what the path takes, once
// there are enough of them to judge by (or the window is 2 s old).
TEST_F(frontend_fixture, late_replies_to_answered_queries_still_measure_the_path) {
  auto c = testing::parse_or_die(one_stage_cluster);
  auto link = std::make_shared<recording_link>("fe");
  auto f = spawn_routed(c, link);
  auto transfer = [&] {
    std::vector<msg::link_load> seen;
    for (auto& [node, r] : link->take<msg::load_report>())
      for (auto& l : r.links)
        if (l.node == "w1" && !l.unheard) seen.push_back(l);
    return seen;
  };
  auto ticks = [&](int n) {
    for (int i = 0; i < n; ++i) advance(10ms);
  };
  for (uint64_t id = 1; id <= 7; ++id)
    caf::anon_send(f, ingress{"client-1", {"p", id, {make_tensor({dtype::float32, {4}}, 1)}}});
  run();
  auto sent = link->take<msg::invocation>();
  ASSERT_EQ(sent.size(), 7u);
  ticks(40);  // past 100 ms and the 250 ms grace
  ASSERT_EQ(link->client_replies().size(), 7u);
  for (auto& r : link->client_replies()) EXPECT_NE(r.reason.find("waiting on w1"), std::string::npos) << r.reason;
  transfer();
  // Two come back 400 ms after they went: not enough to judge by yet.
  auto& m = c->models[0];
  answer(sent[0].second, m, msg::status::ok, f);
  answer(sent[1].second, m, msg::status::ok, f);
  ticks(60);
  EXPECT_TRUE(transfer().empty());
  // Three more: five, reported at the next beacon with what the path took.
  for (size_t i = 2; i < 5; ++i) answer(sent[i].second, m, msg::status::ok, f);
  ticks(60);
  auto five = transfer();
  ASSERT_EQ(five.size(), 1u);
  EXPECT_EQ(five[0].results, 5u);
  EXPECT_GT(five[0].transfer_ms, 400.0);
  EXPECT_EQ(link->client_replies().size(), 7u) << "no query is answered twice";
  // Fewer than five go once their window is 2 s old.
  answer(sent[5].second, m, msg::status::ok, f);
  ticks(100);
  EXPECT_TRUE(transfer().empty());
  ticks(150);
  auto one = transfer();
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].results, 1u);
}

// Piccolo's padding: an instance the table gives a dummy rate gets this frontend's share of it,
// evenly spaced, as invocations of the model's input marked dummy under the model's tightest
// stage budget; their results reach no client and count apart in the metrics.
TEST_F(frontend_fixture, sends_its_share_of_an_instances_dummies_and_counts_them_apart) {
  msg::routing_table t;
  t.epoch = 1;
  t.frontends = 2;
  for (auto& m : cfg_->models) t.routes.push_back({m.name, {{"w1", 0, 1, m.name == "det" ? 20.0 : 0.0}}});
  for (auto& p : cfg_->pipelines) {
    auto s = even_split(p);
    for (size_t i = 0; i < p.stages.size(); ++i)
      t.budgets.push_back({p.name, p.stages[i].name, s.budget_ms[i], p.stages[i].model});
  }
  caf::anon_send(fe, t);
  run();
  for (int i = 0; i < 100; ++i) advance(10ms);
  auto sent = net->take<msg::invocation>();
  EXPECT_GE(sent.size(), 9u) << "10/s: its half of 20/s";
  EXPECT_LE(sent.size(), 10u);
  for (auto& [node, inv] : sent) {
    EXPECT_EQ(node, "w1");
    EXPECT_TRUE(inv.dummy);
    EXPECT_EQ(inv.model, "det");
    EXPECT_EQ(inv.inputs.at(0).shape, std::vector<int64_t>{4});
    EXPECT_EQ(inv.budget_ns, std::chrono::nanoseconds(40ms).count()) << "diamond's first stage: 120/3 ms";
  }
  for (size_t i = 0; i < sent.size(); ++i)
    answer(sent[i].second, *cfg_->find_model("det"), i == 0 ? msg::status::dropped : msg::status::ok);
  EXPECT_TRUE(net->client_replies().empty());
  auto text = net->metrics.render("fe", std::chrono::duration<double>(now().time_since_epoch()).count());
  auto has = [&](const std::string& line) { return text.find(line + "\n") != std::string::npos; };
  EXPECT_TRUE(has("sloserve_dummy_requests_total{outcome=\"sent\"} " + std::to_string(sent.size()))) << text;
  EXPECT_TRUE(has("sloserve_dummy_requests_total{outcome=\"ok\"} " + std::to_string(sent.size() - 1))) << text;
  EXPECT_TRUE(has("sloserve_dummy_requests_total{outcome=\"dropped\"} 1")) << text;
  EXPECT_EQ(text.find("sloserve_requests_total{"), std::string::npos) << "no request was answered";
  // A table without dummy rates stops them.
  t.epoch = 2;
  for (auto& r : t.routes) r.instances[0].dummy_rate = 0;
  caf::anon_send(fe, t);
  run();
  for (int i = 0; i < 50; ++i) advance(10ms);
  EXPECT_TRUE(net->take<msg::invocation>().empty());
}

TEST_F(frontend_fixture, reroutes_when_a_node_goes_down) {
  route({"w1", "w2"});
  request("traffic", 1, make_tensor({dtype::float32, {4}}, 1));
  auto inv = net->take<msg::invocation>();
  ASSERT_EQ(inv.size(), 1u);
  auto failed = inv[0].first;
  auto survivor = failed == "w1" ? "w2" : "w1";
  caf::anon_send(fe, peer_down_atom::value, failed);
  run();
  auto again = net->take<msg::invocation>();
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].first, survivor);
  EXPECT_EQ(again[0].second.id, inv[0].second.id);
  answer(again[0].second, *cfg_->find_model("det"));
  auto next = net->take<msg::invocation>();
  ASSERT_EQ(next.size(), 3u);
  for (auto& [node, i] : next) EXPECT_EQ(node, survivor);  // the dead node gets no new work
  for (auto& [node, i] : next) answer(i, *cfg_->find_model("cls"));
  auto r = net->client_replies();
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].code, msg::status::ok);
}

TEST_F(frontend_fixture, node_down_with_no_survivor_answers_error) {
  route({"w1"});
  request("traffic", 1, make_tensor({dtype::float32, {4}}, 1));
  caf::anon_send(fe, peer_down_atom::value, std::string("w1"));
  run();
  auto r = net->client_replies();
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].code, msg::status::error);
  EXPECT_NE(r[0].reason.find("worker node 'w1' failed"), std::string::npos);
}

// Graft: a request of a partitioned model that starts at a layer runs its fragment's ranges in
// turn, each by its share of the time left, on what the one before made; a start no route covers
// runs the model's rest; bad starts are refused; the frontend reports the fragments it saw.
const std::string partitioned_yaml = std::string(R"(
nodes:
  - {name: ctl, address: tcp://127.0.0.1:0, roles: [controller]}
  - {name: fe, address: tcp://127.0.0.1:0, roles: [frontend]}
  - {name: w1, address: tcp://127.0.0.1:0, roles: [worker], devices: [{kind: emulated}]}
)") + testing::partitioned_model_yaml +
                                     "runtime: {beacon_ms: 1000}\nscheduler: {policy: graft}\n";

struct graft_frontend_fixture : caf_fixture, ::testing::Test {
  graft_frontend_fixture() {
    cfg_ = testing::parse_or_die(partitioned_yaml);
    net = std::make_shared<recording_link>("fe");
    fe = keep(spawn_frontend(*sys, {cfg_, net, 1, [] { return int64_t{0}; }}));
    net->actors.frontend = fe;
    caf::anon_send(fe, start_atom::value);
    run();
    msg::routing_table t;
    t.epoch = 1;
    for (auto* name : {"m", "m[1,2)", "m[2,3)", "m[1,3)"}) t.routes.push_back({name, {{"w1", 0, 1}}});
    t.budgets.push_back({"ph", "rest", 200, "m"});
    t.fragments.push_back({"ph", 1, 100, {"m[1,2)", "m[2,3)"}, {10, 30}, 5});
    t.fragments.push_back({"ph", 1, 300, {"m[1,3)"}, {100}, 5});
    caf::anon_send(fe, t);
    run();
  }
  void request(uint64_t id, uint32_t start, double slo_ms, std::vector<int64_t> shape) {
    msg::client_request r{"ph", id, {make_tensor({dtype::float32, shape}, 1)}};
    r.start_layer = start;
    r.slo_ms = slo_ms;
    caf::anon_send(fe, ingress{"phone-" + std::to_string(id % 2), std::move(r)});
    run();
  }
  void answer(const msg::invocation& inv) {
    msg::invocation_result r;
    r.id = inv.id;
    r.code = msg::status::ok;
    r.node = "w1";
    r.batch = 1;
    r.outputs.push_back(make_tensor(cfg_->find_model(inv.model)->output, inv.id, "output"));
    caf::anon_send(fe, r);
    run();
  }
  std::shared_ptr<const cluster_config> cfg_;
  std::shared_ptr<recording_link> net;
  frontend_actor fe;
};

TEST_F(graft_frontend_fixture, a_fragment_runs_its_ranges_in_turn_within_their_shares_of_the_time) {
  // Start 1 with 150 ms: the route planned for 100 ms (the largest not above), 10 + 30 ms.
  request(1, 1, 150, {6});
  auto first = net->take<msg::invocation>();
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0].second.model, "m[1,2)");
  EXPECT_EQ(first[0].second.budget_ns, std::chrono::nanoseconds(150ms).count() / 4) << "10 of 40 ms";
  advance(5ms);
  answer(first[0].second);
  auto second = net->take<msg::invocation>();
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(second[0].second.model, "m[2,3)");
  EXPECT_EQ(second[0].second.inputs.at(0).shape, std::vector<int64_t>{2}) << "what the first range made";
  // What is left of the 150 ms, less half the 5 ms the first range's round trip spent on the way.
  EXPECT_EQ(second[0].second.budget_ns, std::chrono::nanoseconds(145ms - 2500us).count());
  EXPECT_TRUE(net->client_replies().empty());
  answer(second[0].second);
  auto replies = net->client_replies();
  ASSERT_EQ(replies.size(), 1u);
  EXPECT_EQ(replies[0].code, msg::status::ok);
  ASSERT_EQ(replies[0].outputs.size(), 1u);
  EXPECT_EQ(replies[0].outputs[0].shape, std::vector<int64_t>{3});
  ASSERT_EQ(replies[0].timings.size(), 2u);
  EXPECT_EQ(replies[0].timings[1].model, "m[2,3)");
  // With 400 ms left the route planned for 300 ms: one range.
  request(2, 1, 400, {6});
  auto one = net->take<msg::invocation>();
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].second.model, "m[1,3)");
  answer(one[0].second);
  ASSERT_EQ(net->client_replies().size(), 2u);
  EXPECT_EQ(net->client_replies().at(1).code, msg::status::ok);
  // No route starts at 2 yet: the model's rest from there. Start 0: the whole model.
  request(3, 2, 150, {2});
  request(4, 0, 0, {4});
  auto rest = net->take<msg::invocation>();
  ASSERT_EQ(rest.size(), 2u);
  EXPECT_EQ(rest[0].second.model, "m[2,3)");
  EXPECT_EQ(rest[1].second.model, "m");
  EXPECT_EQ(rest[1].second.budget_ns, std::chrono::nanoseconds(200ms).count()) << "the pipeline's SLO";
  for (auto& [node, inv] : rest) answer(inv);
  ASSERT_EQ(net->client_replies().size(), 4u);
  for (auto& r : net->client_replies()) EXPECT_EQ(r.code, msg::status::ok) << r.reason;
  // Refused with the reason: a start beyond the layers, and an input that is not that layer's.
  request(5, 3, 100, {4});
  request(6, 1, 100, {4});
  auto refused = net->client_replies();
  ASSERT_EQ(refused.size(), 6u);
  EXPECT_EQ(refused[4].code, msg::status::error);
  EXPECT_NE(refused[4].reason.find("startLayer 3 is not below the 3 layers"), std::string::npos) << refused[4].reason;
  EXPECT_NE(refused[5].reason.find("float32[6]"), std::string::npos) << refused[5].reason;
  EXPECT_TRUE(net->take<msg::invocation>().empty());
  // The beacon's load report: queries by start and SLO, with the clients that sent them.
  for (int i = 0; i < 100; ++i) advance(10ms);
  auto reports = net->take<msg::load_report>();
  ASSERT_FALSE(reports.empty());
  std::map<std::pair<uint32_t, double>, std::pair<uint64_t, uint32_t>> seen;
  for (auto& [node, r] : reports)
    for (auto& pl : r.pipelines)
      for (auto& f : pl.fragments) seen[{f.start_layer, f.slo_ms}] = {f.queries, f.clients};
  EXPECT_EQ(seen.size(), 4u);
  using tally = std::pair<uint64_t, uint32_t>;
  EXPECT_EQ(seen[std::make_pair(1u, 150.0)], tally(1, 1));
  EXPECT_EQ(seen[std::make_pair(0u, 200.0)], tally(1, 1)) << "no SLO of its own: the pipeline's";
}

}  // namespace
}  // namespace sloserve
