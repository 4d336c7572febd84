#include <gtest/gtest.h>

#include "pipelines/pipeline.hpp"

namespace sloserve {
namespace {

model_spec linear(std::string name, double alpha, double beta) {
  model_spec m;
  m.name = std::move(name);
  m.max_batch = 16;
  m.profile.alpha_ms = alpha;
  m.profile.beta_ms = beta;
  return m;
}

pipeline diamond() {
  pipeline p;
  p.name = "d";
  p.slo_ms = 90;
  p.stages = {{"a", "m1", {}, {}}, {"b", "m2", {"a"}, 2.0}, {"c", "m1", {"a"}, {}}, {"d", "m2", {"b", "c"}, {}}};
  return p;
}

TEST(pipeline, resolve_orders_topologically) {
  std::vector<model_spec> models{linear("m1", 1, 4), linear("m2", 2, 1)};
  auto p = diamond();
  ASSERT_TRUE(resolve(p, models).empty());
  std::vector<size_t> pos(4);
  for (size_t i = 0; i < p.topo.size(); ++i) pos[p.topo[i]] = i;
  EXPECT_LT(pos[0], pos[1]);
  EXPECT_LT(pos[0], pos[2]);
  EXPECT_LT(pos[1], pos[3]);
  EXPECT_LT(pos[2], pos[3]);
  EXPECT_EQ(p.roots(), std::vector<size_t>{0});
  EXPECT_EQ(p.leaves(), std::vector<size_t>{3});
  EXPECT_EQ(depth(p), 3u);
}

TEST(pipeline, fastest_path_takes_the_slowest_branch) {
  std::vector<model_spec> models{linear("m1", 1, 4), linear("m2", 2, 1)};
  auto p = diamond();
  ASSERT_TRUE(resolve(p, models).empty());
  // l(1): m1 = 5, m2 = 3. Paths a-b-d = 11, a-c-d = 13.
  EXPECT_DOUBLE_EQ(fastest_path_ms(p, models), 13);
}

TEST(pipeline, even_split_keeps_every_path_within_the_slo) {
  std::vector<model_spec> models{linear("m1", 1, 4), linear("m2", 2, 1)};
  auto p = diamond();
  ASSERT_TRUE(resolve(p, models).empty());
  auto s = even_split(p);
  for (auto b : s.budget_ms) EXPECT_DOUBLE_EQ(b, 30);
  EXPECT_DOUBLE_EQ(s.finish_offset_ms[0], 30);
  EXPECT_DOUBLE_EQ(s.finish_offset_ms[1], 60);
  EXPECT_DOUBLE_EQ(s.finish_offset_ms[3], 90);
}

// a -> b (an alarm, its own SLO 40 ms) and a -> c -> d (the pipeline's 90 ms).
pipeline fork_with_a_short_path() {
  pipeline p;
  p.name = "f";
  p.slo_ms = 90;
  p.stages = {{"a", "m1", {}, {}}, {"b", "m2", {"a"}, {}}, {"c", "m1", {"a"}, {}}, {"d", "m2", {"c"}, {}}};
  p.stages[1].slo_ms = 40;
  return p;
}

TEST(pipeline, per_path_slos_bound_the_paths_to_their_leaves) {
  std::vector<model_spec> models{linear("m1", 1, 4), linear("m2", 2, 1)};
  auto p = fork_with_a_short_path();
  ASSERT_TRUE(resolve(p, models).empty());
  EXPECT_TRUE(has_path_slos(p));
  EXPECT_DOUBLE_EQ(path_slo_ms(p, 1), 40);
  EXPECT_DOUBLE_EQ(path_slo_ms(p, 3), 90);
  // Even split: a stage leading to the alarm splits the alarm's SLO.
  auto even = even_split(p);
  EXPECT_DOUBLE_EQ(even.budget_ms[0], 40.0 / 3);
  EXPECT_DOUBLE_EQ(even.budget_ms[1], 40.0 / 3);
  EXPECT_DOUBLE_EQ(even.budget_ms[2], 30);
  EXPECT_LE(even.finish_offset_ms[1], 40);
  EXPECT_LE(even.finish_offset_ms[3], 90);
  // Budgets that would finish the alarm late are scaled down on its path alone.
  auto s = offsets_from_budgets(p, {30, 30, 30, 30});
  EXPECT_DOUBLE_EQ(s.budget_ms[0], 20);
  EXPECT_DOUBLE_EQ(s.budget_ms[1], 20);
  EXPECT_DOUBLE_EQ(s.budget_ms[2], 30);
  EXPECT_DOUBLE_EQ(s.finish_offset_ms[1], 40);
  EXPECT_DOUBLE_EQ(s.finish_offset_ms[3], 80);
  // Without the leaf's SLO the same budgets stand.
  p.stages[1].slo_ms.reset();
  EXPECT_FALSE(has_path_slos(p));
  EXPECT_DOUBLE_EQ(offsets_from_budgets(p, {30, 30, 30, 30}).finish_offset_ms[1], 60);
}

TEST(pipeline, tabular_profile_is_linear_between_listed_sizes) {
  latency_profile p;
  p.batch = {2, 4, 8};
  p.latency_ms = {12, 16, 24};
  EXPECT_DOUBLE_EQ(p.latency_ms_at(1), 12);  // below the first size: its cost
  EXPECT_DOUBLE_EQ(p.latency_ms_at(3), 14);
  EXPECT_DOUBLE_EQ(p.latency_ms_at(5), 18);
  EXPECT_DOUBLE_EQ(p.latency_ms_at(12), 32);  // beyond the table: the last slope goes on
  EXPECT_EQ(p.max_batch(32), 8);
  EXPECT_EQ(p.plannable_batches(5), (std::vector<int>{2, 3, 4, 5}));
}

TEST(pipeline, a_step_profile_charges_the_next_listed_size) {
  latency_profile p;
  p.batch = {1, 2, 4, 8};
  p.latency_ms = {10, 12, 16, 24};
  p.step = true;  // a device that pads batches (cuda)
  EXPECT_DOUBLE_EQ(p.latency_ms_at(3), 16);
  EXPECT_DOUBLE_EQ(p.latency_ms_at(5), 24);
  EXPECT_EQ(p.max_batch(32), 8);
  EXPECT_EQ(p.plannable_batches(4), (std::vector<int>{1, 2, 4}));
}

TEST(tensor, rows_and_checks) {
  auto t = make_tensor({dtype::float32, {3, 2}}, 7, "x");
  EXPECT_EQ(t.data.size(), 24u);
  EXPECT_EQ(row_count(t), 3);
  auto r = row_of(t, 2);
  EXPECT_EQ(r.shape, std::vector<int64_t>{2});
  EXPECT_EQ(r.data, t.data.substr(16, 8));
  EXPECT_TRUE(check_tensor(r, {dtype::float32, {2}}));
  EXPECT_NE(check_tensor(r, {dtype::float32, {3}}).error().find("does not match"), std::string::npos);
  r.data.resize(r.data.size() - 1);
  EXPECT_NE(check_tensor_bytes(r).error().find("needs 8 bytes but carries 7"), std::string::npos);
  EXPECT_EQ(make_tensor({dtype::float32, {3, 2}}, 7).data, t.data);  // deterministic
}

// Bytes elements vary in length: rows are found by walking the lengths, and a tensor whose data
// is not exactly its elements is refused.
TEST(tensor, bytes_rows_walk_their_elements) {
  tensor t{"x", dtype::bytes, {3, 2}, bytes_data({"a", "", "bcd", "ef", "ghij", "k"})};
  EXPECT_TRUE(check_tensor_bytes(t));
  EXPECT_FALSE(t.spec().byte_size());
  EXPECT_EQ(t.spec().zero_size(), 24u);
  auto r = row_of(t, 1);
  EXPECT_EQ(r.shape, std::vector<int64_t>{2});
  EXPECT_EQ(r.data.view(), bytes_data({"bcd", "ef"}));
  EXPECT_EQ(row_of(t, 2).data.view(), bytes_data({"ghij", "k"}));
  auto items = bytes_elements(row_of(t, 0).data.view(), 2);
  ASSERT_TRUE(items);
  EXPECT_EQ(*items, (std::vector<std::string_view>{"a", ""}));
  auto torn = t;
  torn.data.resize(t.data.size() - 1);
  EXPECT_NE(check_tensor_bytes(torn).error().find("end before them"), std::string::npos);
  auto longer = t;
  longer.shape = {2, 2};
  EXPECT_NE(check_tensor_bytes(longer).error().find("go on after them"), std::string::npos);
  auto made = make_tensor({dtype::bytes, {4}}, 9);
  EXPECT_TRUE(check_tensor_bytes(made));
  EXPECT_EQ(make_tensor({dtype::bytes, {4}}, 9).data, made.data);
  EXPECT_NE(make_tensor({dtype::bytes, {4}}, 10).data, made.data);
}

}  // namespace
}  // namespace sloserve

namespace sloserve {
namespace {

// A model that preprocesses takes its declared tensor, a raw uint8 image of any size, or encoded
// bytes; anything else is refused with the forms it would take.
TEST(input_form, images_are_accepted_only_where_the_model_preprocesses) {
  model_spec m;
  m.input = {dtype::float32, {3, 8, 8}};
  auto why = [&](const tensor& t) {
    auto f = input_form_of(t, m);
    EXPECT_FALSE(f);
    return f ? std::string() : f.error();
  };
  auto form = [&](const tensor& t) {
    auto f = input_form_of(t, m);
    EXPECT_TRUE(f) << f.error();
    return f ? *f : input_form::tensor;
  };
  auto image = make_tensor({dtype::uint8, {30, 40, 3}}, 1);
  EXPECT_NE(why(image).find("does not match"), std::string::npos);
  m.preprocess = image_preprocess{};
  EXPECT_EQ(form(image), input_form::raw_image);
  EXPECT_EQ(form(make_tensor({dtype::uint8, {500}}, 1)), input_form::encoded_image);
  EXPECT_EQ(form(make_tensor(m.input, 1)), input_form::tensor);
  EXPECT_NE(why(make_tensor({dtype::uint8, {30, 40, 4}}, 1)).find("nor an image"), std::string::npos);
  why(make_tensor({dtype::float32, {30, 40, 3}}, 1));
  EXPECT_NE(why(make_tensor({dtype::uint8, {20000, 2, 3}}, 1)).find("larger than 16384"), std::string::npos);
  auto short_bytes = make_tensor({dtype::uint8, {500}}, 1);
  short_bytes.data.resize(499);
  EXPECT_NE(why(short_bytes).find("needs 500 bytes but carries 499"), std::string::npos);
}

}  // namespace
}  // namespace sloserve

namespace sloserve {
namespace {

TEST(fingerprint, samples_large_inputs_and_hashes_small_ones_whole) {
  auto small = make_tensor({dtype::uint8, {1000}}, 1);
  EXPECT_EQ(sample_fingerprint(small.data), fingerprint(small.data));
  auto big = make_tensor({dtype::uint8, {600000}}, 2).data.str();
  auto a = sample_fingerprint(big);
  EXPECT_EQ(a, sample_fingerprint(big));  // deterministic
  big[0] ^= 1;                            // the first block is sampled
  EXPECT_NE(sample_fingerprint(big), a);
  big[0] ^= 1;
  big.back() ^= 1;  // so is the last
  EXPECT_NE(sample_fingerprint(big), a);
  EXPECT_NE(sample_fingerprint(big.substr(1)), a);  // and the size
}

}  // namespace
}  // namespace sloserve
