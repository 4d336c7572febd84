// One request path: the simulator and the real frontend give every query the same stage deadlines.
// A seeded workload runs through the simulator, which records each invocation's deadline after
// its query's arrival; the same queries then go through a frontend actor on a deterministic
// scheduler, fed the table the controller publishes, and their invocations' budgets must match
// to the nanosecond.

#include <gtest/gtest.h>

#include <map>
#include <set>

#include "actors/roles.hpp"
#include "scheduling/placement.hpp"
#include "sim/simulator.hpp"
#include "tests/actors/caf_fixture.hpp"

namespace sloserve {
namespace {

using testing::caf_fixture;
using testing::recording_link;

// A fan-out, a diamond whose two `cls` stages have budgets of their own, and a cascade whose first
// model answers nothing itself (its share of the stage's budget, then the second's deadline).
const char* yaml = R"(
nodes:
  - {name: fe, address: tcp://127.0.0.1:0, roles: [controller, frontend]}
  - {name: w1, address: tcp://127.0.0.1:0, roles: [worker], devices: [{kind: emulated, count: 4}]}
models:
  - {name: det, input: {dtype: float32, shape: [4]}, output: {dtype: float32, shape: [8, 3]}, max_batch: 4, profile: {alpha_ms: 1, beta_ms: 2}}
  - {name: cls, input: {dtype: float32, shape: [3]}, output: {dtype: float32, shape: [2]}, max_batch: 4, profile: {alpha_ms: 1, beta_ms: 2}}
  - {name: big, input: {dtype: float32, shape: [3]}, output: {dtype: float32, shape: [2]}, max_batch: 4, profile: {alpha_ms: 2, beta_ms: 6}}
  - {name: unsure, input: {dtype: float32, shape: [3]}, output: {dtype: float32, shape: [2]}, max_batch: 4, profile: {alpha_ms: 1, beta_ms: 1}, pass_rate: 0}
pipelines:
  - name: traffic
    slo_ms: 100
    stages:
      - {name: detect, model: det}
      - {name: classify, model: cls, after: [detect], fanout: 3}
  - name: diamond
    slo_ms: 130
    stages:
      - {name: a, model: det}
      - {name: b, model: cls, after: [a]}
      - {name: c, model: big, after: [a]}
      - {name: d, model: cls, after: [b, c]}
  - name: sure
    slo_ms: 90
    stages:
      - {name: first, model: det}
      - {name: pick, cascade: {models: [unsure, big]}, after: [first]}
scheduler: {policy: static}
)";

// Per query: its pipeline and the (model, deadline after arrival) pairs of its invocations.
struct seen {
  size_t pipeline = 0;
  std::set<std::pair<std::string, int64_t>> deadlines;
};

struct same_path : caf_fixture, ::testing::Test {
  std::shared_ptr<const cluster_config> cfg = testing::parse_or_die(yaml);
};

TEST_F(same_path, the_simulator_and_the_frontend_give_every_query_the_same_stage_deadlines) {
  // The simulator, with a network of exactly 0.5 ms a hop: each query's span is its SLO less 0.5 ms.
  std::map<uint64_t, seen> sim;
  sim::options o;
  o.rate = 30;
  o.duration_s = 3;
  o.warmup_s = 0;
  o.seed = 11;
  o.network_ms = 0.5;
  o.network_jitter = 0;
  o.on_invocation = [&](uint64_t q, size_t pipeline, const std::string& model, int64_t deadline_ns) {
    sim[q].pipeline = pipeline;
    sim[q].deadlines.insert({model, deadline_ns});
  };
  auto ran = sim::simulate(*cfg, o);
  ASSERT_TRUE(ran) << ran.error();
  ASSERT_GT(sim.size(), 50u);

  // The frontend, with the table the controller publishes for the same file.
  auto net = std::make_shared<recording_link>("fe");
  auto fe = keep(spawn_frontend(*sys, {cfg, net, 1, [] { return int64_t{0}; }}));
  net->actors.frontend = fe;
  caf::anon_send(fe, start_atom::value);
  run();
  caf::anon_send(fe, static_placement(*cfg, 1).table);
  run();
  std::set<size_t> pipelines;
  size_t compared = 0;
  for (auto& [q, want] : sim) {
    auto& p = cfg->pipelines[want.pipeline];
    auto& root = cfg->models[p.stages.front().model_index];
    msg::client_request r{p.name, q, {make_tensor(root.input, q, "input")}, 0.5};
    caf::anon_send(fe, ingress{"client", std::move(r)});
    run();
    // Every invocation is answered at once (the clock stands still: its budget is its deadline
    // after the query's arrival).
    std::set<std::pair<std::string, int64_t>> got;
    for (auto invs = net->take<msg::invocation>(); !invs.empty(); invs = net->take<msg::invocation>())
      for (auto& [node, inv] : invs) {
        got.insert({inv.model, inv.budget_ns});
        auto& m = *cfg->find_model(inv.model);
        msg::invocation_result res;
        res.id = inv.id;
        res.code = msg::status::ok;
        res.node = node;
        res.batch = 1;
        res.outputs.push_back(make_tensor(m.output, 0, "output"));
        caf::anon_send(fe, res);
        run();
      }
    // What the simulator sent of this query (it may have dropped a query before its later
    // stages) the frontend sent with the same deadlines.
    for (auto& d : want.deadlines) {
      EXPECT_TRUE(got.count(d)) << "query " << q << " of " << p.name << ": the simulator's " << d.first << " by "
                                << d.second << " ns, the frontend's not";
      ++compared;
    }
    pipelines.insert(want.pipeline);
  }
  EXPECT_EQ(pipelines.size(), cfg->pipelines.size());
  EXPECT_GT(compared, 2 * sim.size());
}

}  // namespace
}  // namespace sloserve
