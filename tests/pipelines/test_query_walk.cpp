// The per-query DAG walk alone: chains, fan-out edges, joins, several roots, and adapted inputs.

#include <gtest/gtest.h>

#include <cstring>

#include "pipelines/query_walk.hpp"

namespace sloserve {
namespace {

model_spec model(const std::string& name, std::vector<int64_t> in, std::vector<int64_t> out) {
  model_spec m;
  m.name = name;
  m.input = {dtype::float32, std::move(in)};
  m.output = {dtype::float32, std::move(out)};
  return m;
}

stage make_stage(const std::string& name, const std::string& m, std::vector<std::string> after = {},
                 std::optional<double> fanout = std::nullopt) {
  stage s;
  s.name = name;
  s.model = m;
  s.after = std::move(after);
  s.fanout = fanout;
  return s;
}

struct walk_test : ::testing::Test {
  void SetUp() override { models = {model("det", {4}, {3, 2}), model("cls", {2}, {5}), model("big", {7}, {1})}; }
  pipeline make(std::vector<stage> stages) {
    pipeline p;
    p.name = "p";
    p.slo_ms = 100;
    p.stages = std::move(stages);
    EXPECT_TRUE(resolve(p, models).empty());
    return p;
  }
  tensor of(const std::string& m, uint64_t seed) {
    for (auto& x : models)
      if (x.name == m) return make_tensor(x.output, seed);
    return {};
  }
  std::vector<model_spec> models;
};

std::vector<size_t> stages_of(const std::vector<query_walk::spawn>& s) {
  std::vector<size_t> out;
  for (auto& x : s) out.push_back(x.stage);
  return out;
}

TEST_F(walk_test, a_chain_runs_stage_after_stage_and_names_the_leaf_output) {
  auto p = make({make_stage("a", "det"), make_stage("b", "det", {"a"})});
  query_walk w(p, models, 1);
  auto in = make_tensor(models[0].input, 3);
  auto first = w.start({in});
  ASSERT_EQ(stages_of(first), std::vector<size_t>{0});
  EXPECT_EQ(first[0].inputs[0].data, in.data) << "a root runs on the request's own tensor";
  EXPECT_FALSE(w.done());
  auto next = w.on_result(0, {of("det", 1)});
  ASSERT_EQ(stages_of(next), std::vector<size_t>{1});
  EXPECT_EQ(next[0].inputs[0].shape, models[0].input.shape) << "adapted to the stage's declared input";
  EXPECT_FALSE(w.done());
  EXPECT_TRUE(w.on_result(1, {of("det", 2)}).empty());
  ASSERT_TRUE(w.done());
  auto results = w.take_results();
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].name, "b");
}

TEST_F(walk_test, a_fan_out_edge_spawns_one_invocation_per_row_and_waits_for_all) {
  auto p = make({make_stage("det", "det"), make_stage("cls", "cls", {"det"}, 2.0)});
  query_walk w(p, models, 7);
  w.start({make_tensor(models[0].input, 1)});
  auto rows = w.on_result(0, {of("det", 1)});  // det emits 3 rows; the edge forwards 2
  ASSERT_EQ(stages_of(rows), (std::vector<size_t>{1, 1}));
  EXPECT_EQ(rows[0].inputs[0].shape, (std::vector<int64_t>{2})) << "one row of the parent's output";
  w.on_result(1, {of("cls", 1)});
  EXPECT_FALSE(w.done()) << "one row is still out";
  w.on_result(1, {of("cls", 2)});
  EXPECT_TRUE(w.done());
  EXPECT_EQ(w.take_results().size(), 2u);
}

// A float32 [rows, columns] tensor holding `v` row by row.
tensor rows_of(std::vector<std::vector<float>> v) {
  tensor t;
  t.type = dtype::float32;
  t.shape = {static_cast<int64_t>(v.size()), static_cast<int64_t>(v.front().size())};
  std::string data;
  for (auto& row : v) data.append(reinterpret_cast<const char*>(row.data()), row.size() * sizeof(float));
  t.data = bytes(std::move(data));
  return t;
}

std::vector<float> floats(const tensor& t) {
  std::vector<float> v(t.data.size() / sizeof(float));
  std::memcpy(v.data(), t.data.data(), t.data.size());
  return v;
}

// A detector's candidates, a score in column 1: the rows above 0.5 are the items, each the row
// without its score, in row order; the results come back in that order whatever order the
// invocations end in.
TEST_F(walk_test, a_data_dependent_fan_out_runs_once_per_row_scoring_above_the_threshold_in_row_order) {
  models = {model("det", {4}, {4, 3}), model("cls", {2}, {1})};
  auto cls = make_stage("cls", "cls", {"det"});
  cls.items = output_items{"output", 0.5, 1, 2.5};
  auto p = make({make_stage("det", "det"), cls});
  EXPECT_EQ(p.stages[1].fanout, 2.5) << "the planner's estimate";
  query_walk w(p, models, 1);
  w.start({make_tensor(models[0].input, 1)});
  auto det = rows_of({{1, 0.9f, 2}, {3, 0.2f, 4}, {5, 0.5f, 6}, {7, 0.51f, 8}});
  auto spawned = w.on_result(0, {det});
  ASSERT_EQ(stages_of(spawned), (std::vector<size_t>{1, 1})) << "0.9 and 0.51 are above 0.5; 0.5 is not";
  EXPECT_EQ(floats(spawned[0].inputs[0]), (std::vector<float>{1, 2}));
  EXPECT_EQ(floats(spawned[1].inputs[0]), (std::vector<float>{7, 8}));
  EXPECT_EQ(spawned[1].inputs[0].shape, (std::vector<int64_t>{2}));
  auto out = [](float v) { return bytes(std::string(reinterpret_cast<const char*>(&v), sizeof v)); };
  tensor second{"", dtype::float32, {1}, out(20)}, first{"", dtype::float32, {1}, out(10)};
  w.on_result(1, {second}, spawned[1].item);
  EXPECT_FALSE(w.done());
  w.on_result(1, {first}, spawned[0].item);
  ASSERT_TRUE(w.done());
  auto results = w.take_results();
  ASSERT_EQ(results.size(), 2u);
  EXPECT_EQ(floats(results[0]), std::vector<float>{10}) << "the first item's, though it ended last";
  EXPECT_EQ(floats(results[1]), std::vector<float>{20});

  // No row above the threshold: the stage has nothing to run and the query is done.
  query_walk none(p, models, 2);
  none.start({make_tensor(models[0].input, 1)});
  EXPECT_TRUE(none.on_result(0, {rows_of({{0, 0.1f, 0}, {0, -3, 0}})}).empty());
  EXPECT_TRUE(none.done());
  EXPECT_TRUE(none.take_results().empty());
}

// An item with other than the input's element count becomes a tensor of the input's shape
// derived from it; a parent output other than the float32 [G, F] the config checked has no items.
TEST(output_items, an_item_that_does_not_fill_the_input_is_adapted_and_a_malformed_output_has_none) {
  output_items items{"output", 0.5, 0, std::nullopt};
  auto t = rows_of({{0.9f, 1, 2, 3}, {0.7f, 4, 5, 6}});
  auto same = output_items_of(t, items, {dtype::float32, {3}});
  ASSERT_EQ(same.size(), 2u);
  EXPECT_EQ(floats(same[1]), (std::vector<float>{4, 5, 6}));
  auto square = output_items_of(t, items, {dtype::float32, {1, 3}});
  ASSERT_EQ(square.size(), 2u);
  EXPECT_EQ(square[0].shape, (std::vector<int64_t>{1, 3})) << "reshaped: as many elements";
  auto other = output_items_of(t, items, {dtype::float32, {5}});
  ASSERT_EQ(other.size(), 2u);
  EXPECT_EQ(other[0].shape, (std::vector<int64_t>{5}));
  EXPECT_EQ(other[0].data, output_items_of(t, items, {dtype::float32, {5}})[0].data) << "deterministic";
  EXPECT_NE(other[0].data, other[1].data);
  auto torn = t;
  torn.shape = {3, 4};
  EXPECT_TRUE(output_items_of(torn, items, {dtype::float32, {3}}).empty());
  auto flat = t;
  flat.shape = {8};
  EXPECT_TRUE(output_items_of(flat, items, {dtype::float32, {3}}).empty());
  items.score_column = 4;
  EXPECT_TRUE(output_items_of(t, items, {dtype::float32, {3}}).empty());
}

// The simulator's items: deterministic per query, and on average (1 - score_above) of the rows,
// as uniform scores give.
TEST(output_items, the_simulators_draw_is_the_same_for_a_query_and_keeps_the_share_above_the_score) {
  int64_t total = 0;
  for (uint64_t q = 0; q < 4000; ++q) {
    auto k = drawn_items(q, 1, 0.75, 8);
    EXPECT_EQ(k, drawn_items(q, 1, 0.75, 8));
    EXPECT_GE(k, 0);
    EXPECT_LE(k, 8);
    total += k;
  }
  EXPECT_NEAR(static_cast<double>(total) / 4000, 2.0, 0.1);
  EXPECT_EQ(drawn_items(5, 1, 0, 8), 8);
  EXPECT_EQ(drawn_items(5, 1, 1, 8), 0);
}

TEST_F(walk_test, fractional_fan_out_is_the_same_for_the_same_query) {
  for (uint64_t q = 0; q < 50; ++q) {
    auto k = fanout_rows(q, 1, 1.5, 10);
    EXPECT_TRUE(k == 1 || k == 2);
    EXPECT_EQ(k, fanout_rows(q, 1, 1.5, 10));
  }
  EXPECT_EQ(fanout_rows(3, 1, 8, 3), 3) << "never more rows than the parent emitted";
}

TEST_F(walk_test, a_join_runs_once_after_every_parent_on_its_first_parent_s_output) {
  auto p = make({make_stage("a", "det"), make_stage("b", "cls", {"a"}), make_stage("c", "big", {"a"}),
                 make_stage("j", "det", {"b", "c"})});
  query_walk w(p, models, 1);
  w.start({make_tensor(models[0].input, 1)});
  auto both = w.on_result(0, {of("det", 1)});
  ASSERT_EQ(stages_of(both), (std::vector<size_t>{1, 2}));
  EXPECT_TRUE(w.on_result(2, {of("big", 1)}).empty()) << "the join waits for b";
  auto join = w.on_result(1, {of("cls", 1)});
  ASSERT_EQ(stages_of(join), std::vector<size_t>{3});
  EXPECT_EQ(join[0].inputs[0].shape, models[0].input.shape);
  EXPECT_FALSE(w.done());
  EXPECT_TRUE(w.on_result(3, {of("det", 9)}).empty());
  EXPECT_TRUE(w.done());
  auto r = w.take_results();
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].name, "j");
}

TEST_F(walk_test, several_roots_all_start_and_a_stage_without_output_ends_its_branch) {
  auto p = make({make_stage("a", "det"), make_stage("b", "det"), make_stage("c", "cls", {"a"})});
  query_walk w(p, models, 1);
  auto first = w.start({make_tensor(models[0].input, 1)});
  ASSERT_EQ(stages_of(first), (std::vector<size_t>{0, 1}));
  EXPECT_TRUE(w.on_result(0, {}).empty()) << "no output: nothing for c to run on";
  EXPECT_FALSE(w.done());
  w.on_result(1, {of("det", 1)});
  EXPECT_TRUE(w.done());
  EXPECT_EQ(w.take_results().size(), 1u);
}

// A cascade's first model stands when its top softmax probability reaches the confidence, or,
// declaring pass_rate, when the query's draw falls below it (deterministic, as fan-out's).
// The one stage-deadline arithmetic of the frontend and the simulator.
TEST_F(walk_test, stage_deadlines_scale_with_the_query_s_span_and_a_cascade_s_first_model_finishes_earlier) {
  auto p = make({make_stage("a", "det"), make_stage("b", "cls", {"a"})});
  auto split = offsets_from_budgets(p, {40, 60});
  const int64_t ms = 1'000'000;
  EXPECT_EQ(stage_finish_ns(p, split, 0, 100 * ms), 40 * ms);
  EXPECT_EQ(stage_finish_ns(p, split, 1, 100 * ms), 100 * ms);
  EXPECT_EQ(stage_finish_ns(p, split, 0, 50 * ms), 20 * ms) << "a client that asked for 50 ms";
  auto over = offsets_from_budgets(p, {70, 60});
  EXPECT_EQ(stage_finish_ns(p, over, 1, 100 * ms), 100 * ms) << "never past the query's deadline";
  EXPECT_EQ(first_model_finish_ns(p, models, split, 1, 100 * ms), 100 * ms) << "no cascade: the stage's";
  // Stage b a cascade of cls (l(1) = 1 ms) then big (3 ms): cls has a quarter of its 60 ms.
  models[1].profile.beta_ms = 1;
  models[2].profile.beta_ms = 3;
  p.stages[1].cascade = cascade_spec{{"cls", "big"}, 0.8, 2};
  EXPECT_EQ(first_model_finish_ns(p, models, split, 1, 100 * ms), 55 * ms) << "40 + 60 / 4";
  EXPECT_EQ(first_model_finish_ns(p, models, split, 1, 50 * ms), 27'500'000) << "scaled to the span";
  EXPECT_EQ(stage_finish_ns(p, split, 1, 100 * ms), 100 * ms) << "the second model: the stage's";
}

TEST(cascade, the_first_model_stands_when_confident_or_by_its_pass_rate) {
  auto floats = [](std::vector<float> v, std::vector<int64_t> shape) {
    std::string b(v.size() * 4, '\0');
    std::memcpy(b.data(), v.data(), b.size());
    return tensor{"y", dtype::float32, std::move(shape), bytes(b)};
  };
  // softmax([2, 0, 0]) tops at e^2 / (e^2 + 2) = 0.787; softmax([0, 0, 0]) at 1/3.
  EXPECT_NEAR(least_top_probability(floats({2, 0, 0}, {3})), 0.7869, 1e-4);
  EXPECT_NEAR(least_top_probability(floats({2, 0, 0, 0, 0, 0}, {2, 3})), 1.0 / 3, 1e-9) << "the least of the rows";
  EXPECT_EQ(least_top_probability(tensor{"y", dtype::int64, {3}, bytes(std::string(24, '\0'))}), 0);
  model_spec real;
  real.path = "m.pt";
  cascade_spec c{{"a", "b"}, 0.75, 1};
  EXPECT_TRUE(cascade_confident(real, c, {floats({2, 0, 0}, {3})}, 1, 0));
  c.confidence = 0.8;
  EXPECT_FALSE(cascade_confident(real, c, {floats({2, 0, 0}, {3})}, 1, 0));
  EXPECT_FALSE(cascade_confident(real, c, {}, 1, 0)) << "no output: unsure";
  model_spec emulated;
  emulated.pass_rate = 0.7;
  int passed = 0;
  for (uint64_t q = 1; q <= 10000; ++q) passed += cascade_confident(emulated, c, {}, q, 2);
  EXPECT_NEAR(passed / 10000.0, 0.7, 0.02);
  EXPECT_EQ(cascade_confident(emulated, c, {}, 42, 2), cascade_confident(emulated, c, {}, 42, 2));
  model_spec fast, slow;
  fast.profile.beta_ms = 1;
  slow.profile.beta_ms = 3;
  EXPECT_DOUBLE_EQ(cascade_first_share(fast, slow), 0.25);
}

}  // namespace
}  // namespace sloserve
