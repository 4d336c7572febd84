// The response cache alone (keys, least-recently-used eviction in bytes), and a frontend that
// answers from it: a pipeline's repeated request without a device, a model's repeated input
// without its invocation, the load it reports counting what devices ran, its statistics and
// metrics, and an apply that empties it.

#include <gtest/gtest.h>

#include "actors/response_cache.hpp"
#include "actors/roles.hpp"
#include "caf_fixture.hpp"

namespace sloserve {
namespace {

using namespace std::chrono_literals;
using testing::caf_fixture;
using testing::recording_link;

tensor named(std::string name, dtype type, std::vector<int64_t> shape, std::string data) {
  return tensor{std::move(name), type, std::move(shape), bytes(std::move(data))};
}

TEST(response_cache, keys_name_every_byte_name_type_and_shape_and_what_made_them) {
  response_cache c(1 << 20);
  auto in = named("x", dtype::uint8, {4}, "abcd");
  auto k = c.key_of("model m 1", {in});
  EXPECT_EQ(c.key_of("model m 1", {named("x", dtype::uint8, {4}, "abcd")}), k);
  EXPECT_NE(c.key_of("model m 2", {in}), k);
  EXPECT_NE(c.key_of("model m 1", {named("y", dtype::uint8, {4}, "abcd")}), k);
  EXPECT_NE(c.key_of("model m 1", {named("x", dtype::int8, {4}, "abcd")}), k);
  EXPECT_NE(c.key_of("model m 1", {named("x", dtype::uint8, {2, 2}, "abcd")}), k);
  EXPECT_NE(c.key_of("model m 1", {named("x", dtype::uint8, {4}, "abce")}), k);
  EXPECT_NE(c.key_of("model m 1", {in, in}), k);
  // Every bit of a long input counts, in both halves of the key.
  std::string big(100000, '\1');
  auto kb = c.key_of("m", {named("x", dtype::uint8, {100000}, big)});
  for (size_t at : {size_t{0}, size_t{7}, size_t{65536}, size_t{99999}}) {
    auto changed = big;
    changed[at] ^= 0x40;
    auto kc = c.key_of("m", {named("x", dtype::uint8, {100000}, changed)});
    EXPECT_NE(kc.a, kb.a) << at;
    EXPECT_NE(kc.b, kb.b) << at;
  }
  // A new generation: what the last one keyed is never found.
  c.clear();
  EXPECT_NE(c.key_of("model m 1", {in}), k);
}

TEST(response_cache, keeps_copies_within_its_bytes_and_evicts_the_least_recently_used) {
  auto out = [](char c) { return std::vector<tensor>{named("y", dtype::uint8, {1000}, std::string(1000, c))}; };
  auto charge = response_cache::charge_of(out('a'));
  response_cache c(3 * charge);
  cache_key a{1, 1}, b{2, 2}, d{3, 3}, e{4, 4};
  // A view of a larger message is kept as a copy of its own.
  auto message = std::make_shared<std::string>(5000, 'a');
  std::vector<tensor> view{tensor{"y", dtype::uint8, {1000}, bytes(message->data(), 1000, message)}};
  EXPECT_EQ(c.insert(a, view), response_cache::kept::inserted);
  EXPECT_EQ(c.insert(a, view), response_cache::kept::already);
  message->assign(5000, 'z');
  EXPECT_EQ(c.find(a)->at(0).data.view(), std::string(1000, 'a'));
  EXPECT_EQ(c.insert(b, out('b')), response_cache::kept::inserted);
  EXPECT_EQ(c.insert(d, out('d')), response_cache::kept::inserted);
  EXPECT_EQ(c.bytes(), 3 * charge);
  // a was used since b: b goes first.
  ASSERT_TRUE(c.find(a));
  EXPECT_EQ(c.insert(e, out('e')), response_cache::kept::inserted);
  EXPECT_FALSE(c.find(b));
  EXPECT_TRUE(c.find(a));
  EXPECT_TRUE(c.find(d));
  EXPECT_TRUE(c.find(e));
  EXPECT_EQ(c.entries(), 3u);
  EXPECT_EQ(c.counted().evictions, 1u);
  EXPECT_EQ(c.counted().hits, 5u);
  EXPECT_EQ(c.counted().misses, 1u);
  // Larger than the whole cache: not kept, and nothing evicted for it.
  EXPECT_EQ(c.insert(cache_key{5, 5}, {named("y", dtype::uint8, {10000}, std::string(10000, 'x'))}),
            response_cache::kept::too_large);
  EXPECT_EQ(c.entries(), 3u);
  EXPECT_EQ(c.counted().too_large, 1u);
  // Shrunk: the least recently used go; 0 turns it off.
  c.resize(charge);
  EXPECT_EQ(c.entries(), 1u);
  EXPECT_TRUE(c.find(e));
  c.resize(0);
  EXPECT_EQ(c.entries(), 0u);
  EXPECT_EQ(c.bytes(), 0u);
  EXPECT_EQ(c.insert(a, out('a')), response_cache::kept::off);
}

const char* yaml = R"(
nodes:
  - {name: ctl, address: tcp://127.0.0.1:0, roles: [controller]}
  - {name: fe, address: tcp://127.0.0.1:0, roles: [frontend]}
  - {name: w1, address: tcp://127.0.0.1:0, roles: [worker], devices: [{kind: emulated}]}
models:
  - {name: det, input: {dtype: float32, shape: [4]}, output: {dtype: float32, shape: [3]}, max_batch: 4, profile: {alpha_ms: 1, beta_ms: 2}}
  - {name: cls, input: {dtype: float32, shape: [3]}, output: {dtype: float32, shape: [2]}, max_batch: 4, profile: {alpha_ms: 1, beta_ms: 2}, response_cache: true}
pipelines:
  - {name: whole, slo_ms: 1000, response_cache: true, stages: [{name: s, model: det}]}
  - name: two
    slo_ms: 1000
    stages:
      - {name: detect, model: det}
      - {name: classify, model: cls, after: [detect]}
)";

struct cache_fixture : caf_fixture, ::testing::Test {
  cache_fixture() { start(testing::parse_or_die(yaml)); }

  void start(std::shared_ptr<const cluster_config> c) {
    cfg = std::move(c);
    net = std::make_shared<recording_link>("fe");
    fe = keep(spawn_frontend(*sys, {cfg, net, 1, [] { return int64_t{1'800'000'000'000'000}; }}));
    net->actors.frontend = fe;
    caf::anon_send(fe, start_atom::value);
    msg::routing_table t;
    t.epoch = 1;
    for (auto& m : cfg->models) t.routes.push_back({m.name, {{"w1", 0, 1}}});
    for (auto& p : cfg->pipelines)
      for (size_t i = 0; i < p.stages.size(); ++i) t.budgets.push_back({p.name, p.stages[i].name, 400});
    caf::anon_send(fe, t);
    run();
  }
  void request(const std::string& pipeline, uint64_t id, uint64_t seed) {
    caf::anon_send(fe, ingress{"client", {pipeline, id, {make_tensor({dtype::float32, {4}}, seed)}, -1}});
    run();
  }
  // Answers every invocation sent, each with outputs made from its inputs (as a model would);
  // how many there were of each model.
  std::map<std::string, int> answer_all() {
    std::map<std::string, int> seen;
    for (auto& [node, inv] : net->take<msg::invocation>()) {
      ++seen[inv.model];
      msg::invocation_result r;
      r.id = inv.id;
      r.code = msg::status::ok;
      r.node = node;
      r.batch = 1;
      auto& m = *cfg->find_model(inv.model);
      r.outputs.push_back(make_tensor(m.output, fingerprint(inv.inputs[0].data.view()), "output"));
      caf::anon_send(fe, r);
    }
    run();
    return seen;
  }
  // The load the frontend reports at its next beacon, by pipeline: queries and invocations of
  // each stage.
  std::map<std::string, std::pair<uint64_t, std::vector<uint64_t>>> load() {
    advance(std::chrono::milliseconds(cfg->runtime.beacon_ms + 10));
    std::map<std::string, std::pair<uint64_t, std::vector<uint64_t>>> out;
    for (auto& [node, r] : net->take<msg::load_report>())
      for (auto& p : r.pipelines) {
        auto& o = out[p.pipeline];
        o.first += p.queries;
        o.second.resize(p.stage_invocations.size());
        for (size_t i = 0; i < p.stage_invocations.size(); ++i) o.second[i] += p.stage_invocations[i];
      }
    return out;
  }

  std::shared_ptr<const cluster_config> cfg;
  std::shared_ptr<recording_link> net;
  frontend_actor fe;
};

TEST_F(cache_fixture, a_pipeline_answers_a_request_it_has_seen_without_a_device_and_plans_for_the_rest) {
  load();
  request("whole", 1, 7);
  EXPECT_EQ(answer_all()["det"], 1);
  request("whole", 2, 7);  // the same input: from the cache
  EXPECT_TRUE(net->take<msg::invocation>().empty());
  request("whole", 3, 8);  // another: to the device
  EXPECT_EQ(answer_all()["det"], 1);
  auto replies = net->client_replies();
  ASSERT_EQ(replies.size(), 3u);
  for (auto& r : replies) EXPECT_EQ(r.code, msg::status::ok) << r.reason;
  EXPECT_EQ(replies[0].request_id, 1u);
  EXPECT_EQ(replies[1].request_id, 2u);
  ASSERT_EQ(replies[1].outputs.size(), 1u);
  EXPECT_EQ(replies[1].outputs[0].data, replies[0].outputs[0].data);
  EXPECT_EQ(replies[1].outputs[0].shape, replies[0].outputs[0].shape);
  EXPECT_NE(replies[2].outputs[0].data, replies[0].outputs[0].data);
  // The plan sees the two the device ran.
  auto l = load();
  EXPECT_EQ(l["whole"].first, 2u);
  // Triton's statistics: one hit, two misses; three successes, two inferences.
  auto st = net->metrics.statistics({"whole"});
  EXPECT_EQ(st[0].cache_hit.count, 1u);
  EXPECT_EQ(st[0].cache_miss.count, 2u);
  EXPECT_EQ(st[0].success.count, 3u);
  EXPECT_EQ(st[0].inference_count, 2u);
  auto text = net->metrics.render("fe", 0);
  EXPECT_NE(text.find("sloserve_response_cache_lookups_total{of=\"whole\",kind=\"pipeline\",result=\"hit\"} 1"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("sloserve_response_cache_insertions_total 2"), std::string::npos) << text;
  EXPECT_NE(text.find("sloserve_response_cache_entries 2"), std::string::npos) << text;
}

TEST_F(cache_fixture, a_model_answers_an_input_it_has_seen_and_the_walk_goes_on_from_there) {
  load();
  request("two", 1, 7);
  EXPECT_EQ(answer_all()["det"], 1);
  EXPECT_EQ(answer_all()["cls"], 1);
  // Another request whose first stage gives the same output: its second stage is not sent.
  request("two", 2, 7);
  EXPECT_EQ(answer_all()["det"], 1);
  EXPECT_TRUE(net->take<msg::invocation>().empty());
  auto replies = net->client_replies();
  ASSERT_EQ(replies.size(), 2u);
  EXPECT_EQ(replies[1].code, msg::status::ok) << replies[1].reason;
  EXPECT_EQ(replies[1].outputs[0].data, replies[0].outputs[0].data);
  ASSERT_EQ(replies[1].timings.size(), 2u);
  EXPECT_EQ(replies[1].timings[1].node, "cache");
  // The plan sees two queries, two detections and one classification.
  auto l = load();
  EXPECT_EQ(l["two"].first, 2u);
  EXPECT_EQ(l["two"].second, (std::vector<uint64_t>{2, 1}));
  auto text = net->metrics.render("fe", 0);
  EXPECT_NE(text.find("sloserve_response_cache_lookups_total{of=\"cls\",kind=\"model\",result=\"hit\"} 1"),
            std::string::npos)
      << text;
}

TEST_F(cache_fixture, an_apply_empties_it_and_a_cache_of_no_bytes_keeps_nothing) {
  request("whole", 1, 7);
  answer_all();
  caf::anon_send(fe, new_config{cfg});
  run();
  request("whole", 2, 7);
  EXPECT_EQ(answer_all()["det"], 1) << "after an apply the same request runs again";
  request("whole", 3, 7);
  EXPECT_TRUE(net->take<msg::invocation>().empty());

  auto off = testing::parse_or_die(std::string(yaml) + "runtime: {response_cache_mb: 0}\n");
  start(off);
  request("whole", 1, 7);
  answer_all();
  request("whole", 2, 7);
  EXPECT_EQ(answer_all()["det"], 1);
  EXPECT_EQ(net->client_replies().size(), 2u);
}

}  // namespace
}  // namespace sloserve
