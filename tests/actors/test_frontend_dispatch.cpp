// Piccolo's central dispatcher with two frontends on a deterministic scheduler: the frontend a
// model's route names places both frontends' invocations in one turn of whole batches and relays
// the results; the other forwards to it while it hears it and dispatches itself once it does not.

#include <gtest/gtest.h>

#include "actors/roles.hpp"
#include "caf_fixture.hpp"

namespace sloserve {
namespace {

using namespace std::chrono_literals;
using testing::caf_fixture;
using testing::recording_link;

const char* yaml = R"(
nodes:
  - {name: fe, address: tcp://127.0.0.1:0, roles: [controller, frontend]}
  - {name: fe2, address: tcp://127.0.0.1:0, roles: [frontend]}
  - {name: w1, address: tcp://127.0.0.1:0, roles: [worker], devices: [{kind: emulated, count: 2}]}
  - {name: w2, address: tcp://127.0.0.1:0, roles: [worker], devices: [{kind: emulated}]}
models:
  - {name: det, input: {dtype: float32, shape: [4]}, output: {dtype: float32, shape: [2]}, max_batch: 8, profile: {alpha_ms: 1, beta_ms: 2}}
  - {name: cls, input: {dtype: float32, shape: [3]}, output: {dtype: float32, shape: [2]}, max_batch: 8, profile: {alpha_ms: 1, beta_ms: 2}}
pipelines:
  - name: p
    slo_ms: 1000
    stages:
      - {name: detect, model: det}
  - name: q
    slo_ms: 1000
    stages:
      - {name: classify, model: cls}
scheduler: {policy: piccolo, piccolo: {whole_batches: true}}
)";

struct dispatch_fixture : caf_fixture, ::testing::Test {
  dispatch_fixture() {
    cfg_ = testing::parse_or_die(yaml);
    for (auto name : {"fe", "fe2"}) {
      auto net = std::make_shared<recording_link>(name);
      auto f = keep(spawn_frontend(*sys, {cfg_, net, 1, [] { return int64_t{1'800'000'000'000'000}; }}));
      net->actors.frontend = f;
      caf::anon_send(f, start_atom::value);
      nets.push_back(net);
      fes.push_back(f);
    }
    run();
  }

  // A table that runs det on w1's two devices and cls on w2, whole batches of 4 (cls: one at a
  // time), det dispatched by `dispatcher`; sent to both frontends.
  void route(const std::string& dispatcher) {
    msg::routing_table t;
    t.epoch = 1;
    t.frontends = 2;
    msg::model_route det{"det", {}, dispatcher};
    for (uint32_t d = 0; d < 2; ++d) {
      msg::route_instance i{"w1", d, 1};
      i.batch = 4;
      i.duration_ms = 10;
      det.instances.push_back(i);
    }
    t.routes.push_back(det);
    t.routes.push_back({"cls", {{"w2", 0, 1}}});
    t.budgets.push_back({"p", "detect", 1000});
    t.budgets.push_back({"q", "classify", 1000});
    for (auto& f : fes) caf::anon_send(f, t);
    run();
  }
  void hear(size_t at, const std::string& node, bool up) {
    if (up)
      caf::anon_send(fes[at], peer_up_atom::value, node);
    else
      caf::anon_send(fes[at], peer_down_atom::value, node);
    run();
  }
  void request(size_t at, const std::string& pipeline, uint64_t id) {
    auto shape = pipeline == "p" ? std::vector<int64_t>{4} : std::vector<int64_t>{3};
    msg::client_request r{pipeline, id, {make_tensor({dtype::float32, shape}, id)}, -1};
    caf::anon_send(fes[at], ingress{"client", std::move(r)});
    run();
  }
  // Delivers what frontend `from` sent to the other frontend (forwarded invocations, relayed
  // results), as the link would.
  void deliver(size_t from) {
    auto& net = *nets[from];
    for (auto it = net.sent.begin(); it != net.sent.end();) {
      auto to = it->first == "fe" ? 0 : it->first == "fe2" ? 1 : 2;
      if (to == 2) {
        ++it;
        continue;
      }
      dispatch(*nets[static_cast<size_t>(to)], std::move(it->second), {});
      it = net.sent.erase(it);
    }
    run();
  }
  // A worker's answer to `inv` from (node, device), to the frontend that sent it.
  void answer(const msg::invocation& inv, const std::string& node, msg::status code = msg::status::ok) {
    msg::invocation_result r;
    r.id = inv.id;
    r.code = code;
    r.node = node;
    r.device = inv.device;
    r.batch = 4;
    if (code == msg::status::ok)
      r.outputs.push_back(make_tensor({dtype::float32, {2}}, inv.id, "output"));
    else
      r.reason = "test says no";
    caf::anon_send(fes[inv.frontend == "fe" ? 0 : 1], r);
    run();
  }

  std::shared_ptr<const cluster_config> cfg_;
  std::vector<std::shared_ptr<recording_link>> nets;
  std::vector<frontend_actor> fes;
};

TEST_F(dispatch_fixture, the_dispatcher_places_both_frontends_invocations_in_one_turn_and_relays_results) {
  route("fe2");
  hear(0, "fe2", true);
  // Requests come to the two frontends in turn: fe forwards its own to fe2.
  for (uint64_t i = 1; i <= 8; ++i) {
    request(i % 2 ? 0 : 1, "p", i);
    deliver(0);
  }
  auto direct = nets[0]->take<msg::invocation>();
  EXPECT_TRUE(direct.empty()) << "fe sends det nowhere but to its dispatcher";
  auto placed = nets[1]->take<msg::invocation>();
  ASSERT_EQ(placed.size(), 8u);
  // One turn: the first machine takes the first whole batch of 4, whichever frontend each came
  // to, the second the next.
  for (size_t k = 0; k < placed.size(); ++k) {
    EXPECT_EQ(placed[k].first, "w1");
    EXPECT_EQ(placed[k].second.frontend, "fe2") << "results come back through the dispatcher";
    EXPECT_EQ(placed[k].second.device, k < 4 ? 0u : 1u) << k;
    EXPECT_GT(placed[k].second.budget_ns, 0);
  }
  for (auto& [node, inv] : placed) answer(inv, node);
  deliver(1);
  auto fe_replies = nets[0]->client_replies(), fe2_replies = nets[1]->client_replies();
  ASSERT_EQ(fe_replies.size(), 4u);
  ASSERT_EQ(fe2_replies.size(), 4u);
  for (auto& r : fe_replies) {
    EXPECT_EQ(r.code, msg::status::ok) << r.reason;
    EXPECT_EQ(r.request_id % 2, 1u);
    ASSERT_EQ(r.timings.size(), 1u);
    EXPECT_EQ(r.timings[0].node, "w1") << "the worker that ran it, not the dispatcher";
    ASSERT_EQ(r.outputs.size(), 1u);
  }
  for (auto& r : fe2_replies) EXPECT_EQ(r.code, msg::status::ok) << r.reason;
  auto text = [&](size_t f) { return nets[f]->metrics.render(f ? "fe2" : "fe", 0); };
  EXPECT_NE(text(0).find("sloserve_forwarded_invocations_total{way=\"sent\"} 4"), std::string::npos) << text(0);
  EXPECT_NE(text(1).find("sloserve_forwarded_invocations_total{way=\"placed\"} 4"), std::string::npos) << text(1);
  // A model with no dispatcher goes straight from each frontend.
  request(0, "q", 20);
  auto cls = nets[0]->take<msg::invocation>();
  ASSERT_EQ(cls.size(), 1u);
  EXPECT_EQ(cls[0].first, "w2");
}

TEST_F(dispatch_fixture, each_frontend_keeps_its_own_turn_of_half_batches_without_a_dispatcher) {
  route("");
  hear(0, "fe2", true);
  for (uint64_t i = 1; i <= 8; ++i) request(i % 2 ? 0 : 1, "p", i);
  // Each frontend sends batch / frontends = 2 to a machine, then 2 to the other: the machines'
  // batches mix halves from two turns that fill at different times.
  for (size_t f = 0; f < 2; ++f) {
    auto sent = nets[f]->take<msg::invocation>();
    ASSERT_EQ(sent.size(), 4u);
    for (size_t k = 0; k < 4; ++k) EXPECT_EQ(sent[k].second.device, k < 2 ? 0u : 1u) << f << " " << k;
  }
}

TEST_F(dispatch_fixture, a_frontend_dispatches_itself_while_it_does_not_hear_the_dispatcher) {
  route("fe2");
  // Never heard: fe sends its own, whole batches of its own turn.
  request(0, "p", 1);
  auto sent = nets[0]->take<msg::invocation>();
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].first, "w1");
  answer(sent[0].second, "w1");
  // Heard: forwarded. Then fe2 goes down with the invocation: fe sends it to w1 itself.
  hear(0, "fe2", true);
  request(0, "p", 2);
  auto forwarded = nets[0]->take<msg::invocation>();
  ASSERT_EQ(forwarded.size(), 1u);
  EXPECT_EQ(forwarded[0].first, "fe2");
  EXPECT_EQ(forwarded[0].second.device, msg::forwarded_device);
  hear(0, "fe2", false);
  auto again = nets[0]->take<msg::invocation>();
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].first, "w1");
  answer(again[0].second, "w1");
  auto replies = nets[0]->client_replies();
  ASSERT_EQ(replies.size(), 2u);
  for (auto& r : replies) EXPECT_EQ(r.code, msg::status::ok) << r.reason;
}

TEST_F(dispatch_fixture, the_dispatcher_fails_back_what_it_cannot_place_and_reroutes_around_a_failed_worker) {
  route("fe2");
  hear(0, "fe2", true);
  request(0, "p", 1);
  request(0, "p", 2);
  deliver(0);
  auto placed = nets[1]->take<msg::invocation>();
  ASSERT_EQ(placed.size(), 2u);
  // w1 fails at the dispatcher: no other instance of det, so both fail back to fe, which answers
  // each once, with the reason.
  hear(1, "w1", false);
  deliver(1);
  auto replies = nets[0]->client_replies();
  ASSERT_EQ(replies.size(), 2u);
  for (auto& r : replies) {
    EXPECT_EQ(r.code, msg::status::error);
    EXPECT_NE(r.reason.find("worker node 'w1' failed"), std::string::npos) << r.reason;
  }
  // A late result from w1 for one of them reaches nobody twice.
  answer(placed[0].second, "w1");
  deliver(1);
  EXPECT_EQ(nets[0]->client_replies().size(), 2u);
  EXPECT_TRUE(nets[1]->client_replies().empty());
  // A forwarded invocation of a model the dispatcher routes nowhere fails back at once.
  msg::invocation inv;
  inv.id = 99;
  inv.frontend = "fe";
  inv.model = "nothing";
  inv.device = msg::forwarded_device;
  inv.budget_ns = 1'000'000'000;
  dispatch(*nets[1], {"fe", std::move(inv)}, {});
  run();
  auto failed = nets[1]->take<msg::invocation_result>();
  ASSERT_EQ(failed.size(), 1u);
  EXPECT_EQ(failed[0].first, "fe");
  EXPECT_EQ(failed[0].second.id, 99u);
  EXPECT_NE(failed[0].second.reason.find("no live instance serves model 'nothing'"), std::string::npos);
}

TEST(dispatch_node, a_forwarded_invocation_to_a_node_without_a_frontend_fails_back_with_the_reason) {
  recording_link worker("w1");
  msg::invocation inv;
  inv.id = 7;
  inv.frontend = "fe";
  inv.device = msg::forwarded_device;
  EXPECT_FALSE(dispatch(worker, {"fe", std::move(inv)}, {}));
  auto r = worker.take<msg::invocation_result>();
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].first, "fe");
  EXPECT_EQ(r[0].second.id, 7u);
  EXPECT_EQ(r[0].second.code, msg::status::error);
  EXPECT_NE(r[0].second.reason.find("not a frontend"), std::string::npos);
}

}  // namespace
}  // namespace sloserve
