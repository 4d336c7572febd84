#include <capnp/message.h>
#include <capnp/serialize.h>
#include <gtest/gtest.h>

#include <cstring>

#include "messages/codec.hpp"
#include "messages/sloserve.capnp.h"
#include "pipelines/copy_tally.hpp"

namespace sloserve::msg {
namespace {

decode_limits limits{1 << 20};

envelope round_trip(const envelope& e) {
  auto d = decode(encode(e), limits);
  EXPECT_TRUE(d.value) << d.error.reason;
  return d.value ? *d.value : envelope{};
}

client_request sample_request() {
  client_request r;
  r.pipeline = "traffic";
  r.request_id = 42;
  r.network_ms = 12.5;
  r.sent_at_us = 1795000000123456;
  r.inputs.push_back(make_tensor({dtype::float32, {3, 4}}, 1, "image"));
  return r;
}

TEST(codec, client_request_round_trip) {
  auto e = round_trip({"", sample_request()});
  auto& r = std::get<client_request>(e.content);
  EXPECT_EQ(r.pipeline, "traffic");
  EXPECT_EQ(r.request_id, 42u);
  EXPECT_DOUBLE_EQ(r.network_ms, 12.5);
  EXPECT_EQ(r.sent_at_us, 1795000000123456);
  ASSERT_EQ(r.inputs.size(), 1u);
  EXPECT_EQ(r.inputs[0].name, "image");
  EXPECT_EQ(r.inputs[0].shape, (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(r.inputs[0].data, sample_request().inputs[0].data);
}

// Every dtype crosses the wire as itself.
TEST(codec, tensors_of_every_dtype_round_trip) {
  auto r = sample_request();
  r.inputs.clear();
  for (auto t : all_dtypes) r.inputs.push_back(make_tensor({t, {3}}, 7, std::string(dtype_name(t))));
  auto e = round_trip({"", r});
  auto& back = std::get<client_request>(e.content);
  ASSERT_EQ(back.inputs.size(), std::size(all_dtypes));
  for (size_t i = 0; i < back.inputs.size(); ++i) {
    EXPECT_EQ(back.inputs[i].type, all_dtypes[i]) << back.inputs[i].name;
    EXPECT_EQ(back.inputs[i].data, r.inputs[i].data) << back.inputs[i].name;
  }
}

// Image-sized tensors travel by reference: the frame holds their bytes once, and decoding
// leaves them in the frame. Small, odd-sized and unaligned tensors are copied and equal too.
TEST(codec, large_tensors_are_shared_with_the_frame_and_small_ones_copied) {
  client_request r;
  r.request_id = 7;
  r.pipeline = "p";
  auto big = make_tensor({dtype::float32, {3, 32, 32}}, 2, "image");
  auto odd = make_tensor({dtype::uint8, {13}}, 3, "odd");
  auto rows = make_tensor({dtype::uint8, {3, 4097}}, 4, "rows");
  r.inputs = {big, odd, row_of(rows, 1)};  // row 1 starts 4097 bytes in: unaligned
  auto frame = encode_frame({"", r});
  auto d = decode_frame(frame, limits);
  ASSERT_TRUE(d.value) << d.error.reason;
  auto& back = std::get<client_request>(d.value->content);
  ASSERT_EQ(back.inputs.size(), 3u);
  EXPECT_EQ(back.inputs[0].data, big.data);
  EXPECT_EQ(back.inputs[1].data, odd.data);
  EXPECT_EQ(back.inputs[2].data, row_of(rows, 1).data);
  for (auto& t : back.inputs) {
    EXPECT_GE(t.data.data(), frame.data());
    EXPECT_LE(t.data.data() + t.data.size(), frame.data() + frame.size());
  }
  // The decoded tensors keep the frame alive on their own.
  auto kept = back.inputs[0];
  frame = bytes();
  d = {};
  EXPECT_EQ(kept.data, big.data);
}

// As parts, an invocation's large tensors are segments of their own that share the tensors'
// bytes: nothing is copied on either side, and the decoded tensors point into the parts.
TEST(codec, parts_reference_large_tensors_and_decode_without_a_copy) {
  auto big = make_tensor({dtype::float32, {3, 32, 32}}, 2, "image");
  auto big2 = make_tensor({dtype::uint8, {8192}}, 5, "mask");
  auto odd = make_tensor({dtype::uint8, {13}}, 3, "odd");
  invocation inv{5, "fe", "m", 0, 2, {big, odd, big2}};
  auto before = copy_tally::total();
  auto parts = encode_parts({"fe", inv});
  ASSERT_EQ(parts.size(), 3u);  // the message's own segment, then one per large tensor
  EXPECT_EQ(parts[1].data(), big.data.data());
  EXPECT_EQ(parts[2].data(), big2.data.data());
  auto d = decode_parts(parts, limits);
  EXPECT_EQ(copy_tally::total() - before, odd.data.size());  // only the small tensor, into the message
  ASSERT_TRUE(d.value) << d.error.reason;
  auto& back = std::get<invocation>(d.value->content);
  ASSERT_EQ(back.inputs.size(), 3u);
  EXPECT_EQ(back.inputs[0].data.data(), big.data.data());
  EXPECT_EQ(back.inputs[1].data, odd.data);
  EXPECT_EQ(back.inputs[2].data, big2.data);
  EXPECT_EQ(back.inputs[2].name, "mask");
  // The decoded tensors keep what they point into alive on their own.
  auto kept = back.inputs[0];
  parts.clear();
  d = {};
  big = tensor{};
  EXPECT_EQ(kept.data, make_tensor({dtype::float32, {3, 32, 32}}, 2, "image").data);
  // Flattened into one frame, the same message costs one copy of each tensor.
  before = copy_tally::total();
  auto frame = encode_frame({"fe", inv});
  EXPECT_EQ(copy_tally::total() - before, kept.data.size() + odd.data.size() + big2.data.size());
  // A message without large tensors is one part, a frame as encode_frame's.
  auto small = encode_parts({"fe", invocation{6, "fe", "m", 0, 1, {odd}}});
  ASSERT_EQ(small.size(), 1u);
  EXPECT_TRUE(decode_frame(small[0], limits).value);
}

TEST(codec, rejects_bad_parts_with_the_reason) {
  auto big = make_tensor({dtype::float32, {3, 32, 32}}, 2, "image");
  auto parts = encode_parts({"fe", invocation{5, "fe", "m", 0, 1, {big}}});
  ASSERT_EQ(parts.size(), 2u);
  // A part that is not whole words.
  auto cut = parts;
  cut[1] = cut[1].substr(0, 100);
  auto d = decode_parts(cut, limits);
  ASSERT_FALSE(d.value);
  EXPECT_NE(d.error.reason.find("a part of 100 bytes is not a whole number"), std::string::npos) << d.error.reason;
  // A tensor segment shorter than the message says: malformed, the invocation id kept.
  cut[1] = parts[1].substr(0, 1024);
  d = decode_parts(cut, limits);
  ASSERT_FALSE(d.value);
  EXPECT_EQ(d.error.kind, "malformed");
  EXPECT_EQ(d.error.invocation_id, 5u);
  // Missing segments, and too many parts.
  d = decode_parts({parts[0], bytes(std::string(8, '\0'))}, limits);
  EXPECT_FALSE(d.value);
  std::vector<bytes> many(max_parts + 1, parts[0]);
  d = decode_parts(many, limits);
  ASSERT_FALSE(d.value);
  EXPECT_NE(d.error.reason.find("1025 parts"), std::string::npos) << d.error.reason;
  EXPECT_FALSE(decode_parts({}, limits).value);
  // Over the frame limit in sum, though each part is under it.
  decode_limits tight{8 * 1024};
  auto a = make_tensor({dtype::uint8, {40 * 1024}}, 1, "a");
  auto over = encode_parts({"fe", invocation{7, "fe", "m", 0, 1, {a, a}}});
  ASSERT_EQ(over.size(), 3u);
  d = decode_parts(over, tight);
  ASSERT_FALSE(d.value);
  EXPECT_EQ(d.error.kind, "too_large");
  // A part at an odd address is realigned (one copy) and read.
  std::string shifted(parts[1].size() + 1, '\0');
  std::memcpy(shifted.data() + 1, parts[1].data(), parts[1].size());
  auto owner = std::make_shared<std::string>(std::move(shifted));
  std::vector<bytes> odd_parts{parts[0], bytes(owner->data() + 1, parts[1].size(), owner)};
  auto before = copy_tally::total();
  d = decode_parts(odd_parts, limits);
  ASSERT_TRUE(d.value) << d.error.reason;
  EXPECT_EQ(copy_tally::total() - before, parts[1].size());
  EXPECT_EQ(std::get<invocation>(d.value->content).inputs[0].data, big.data);
}

TEST(codec, unset_network_time_stays_unknown) {
  auto r = sample_request();
  r.network_ms = -1;
  EXPECT_LT(std::get<client_request>(round_trip({"", r}).content).network_ms, 0);
}

TEST(codec, reply_invocation_and_result_round_trip) {
  client_reply rep{
      7,  status::dropped, "late", {make_tensor({dtype::int64, {2}}, 3, "out")}, {{"detect", "w1", 2, 8, 1.5, 3.25}},
      9.5};
  auto r = std::get<client_reply>(round_trip({"fe", rep}).content);
  EXPECT_EQ(r.code, status::dropped);
  EXPECT_EQ(r.reason, "late");
  EXPECT_EQ(r.outputs[0].type, dtype::int64);
  EXPECT_EQ(r.timings[0].node, "w1");
  EXPECT_EQ(r.timings[0].batch, 8u);
  EXPECT_DOUBLE_EQ(r.timings[0].exec_ms, 3.25);

  invocation inv{99, "fe", "ssd", 3, 123456789, {make_tensor({dtype::uint8, {5}}, 2)}};
  auto e = round_trip({"fe", inv});
  EXPECT_EQ(e.from, "fe");
  auto& i = std::get<invocation>(e.content);
  EXPECT_EQ(i.id, 99u);
  EXPECT_EQ(i.model, "ssd");
  EXPECT_EQ(i.device, 3u);
  EXPECT_EQ(i.budget_ns, 123456789);
  // Node-local fields (`#!` lines of the schema) never travel.
  inv.received_ns = 42;
  inv.checked = true;
  auto local = std::get<invocation>(round_trip({"fe", inv}).content);
  EXPECT_EQ(local.received_ns, 0);
  EXPECT_FALSE(local.checked);

  invocation_result res{99, status::overloaded, "full", {}, "w2", 1, 4, 1000, 2000};
  auto x = std::get<invocation_result>(round_trip({"w2", res}).content);
  EXPECT_EQ(x.code, status::overloaded);
  EXPECT_EQ(x.node, "w2");
  EXPECT_EQ(x.exec_ns, 2000);
}

TEST(codec, control_messages_round_trip) {
  auto reg = std::get<register_node>(
      round_trip({"w", register_node{"w", {"worker"}, 4, 77, 3, {{"det", {1, 4}, {2.5, 6}, true}}}}).content);
  EXPECT_EQ(reg.roles, std::vector<std::string>{"worker"});
  EXPECT_EQ(reg.incarnation, 77u);
  EXPECT_EQ(reg.schedule_epoch, 3u);
  ASSERT_EQ(reg.profiles.size(), 1u);
  EXPECT_EQ(reg.profiles[0].model, "det");
  EXPECT_EQ(reg.profiles[0].batch, (std::vector<uint32_t>{1, 4}));
  EXPECT_EQ(reg.profiles[0].latency_ms, (std::vector<double>{2.5, 6}));
  EXPECT_TRUE(reg.profiles[0].step);

  auto hb = std::get<heartbeat>(round_trip({"w", heartbeat{"w", 5, 6, 4}}).content);
  EXPECT_EQ(hb.seq, 6u);

  load_report lr{"w", 1.0, {{"ssd", 1, 10, 9, 1, 3, 4.5}}, {{"traffic", 100, {100, 150}}}, {{"w2", 81.5, 20}}};
  auto l = std::get<load_report>(round_trip({"w", lr}).content);
  ASSERT_EQ(l.links.size(), 1u);
  EXPECT_EQ(l.links[0].node, "w2");
  EXPECT_DOUBLE_EQ(l.links[0].transfer_ms, 81.5);
  EXPECT_EQ(l.links[0].results, 20u);
  EXPECT_EQ(l.sessions[0].dropped, 1u);
  EXPECT_EQ(l.pipelines[0].stage_invocations, (std::vector<uint64_t>{100, 150}));
  EXPECT_DOUBLE_EQ(l.sessions[0].mean_latency_ms, 4.5);

  routing_table t{5, {{"ssd", {{"w1", 0, 1.0}, {"w2", 1, 0.5}}}}, {{"traffic", "detect", 50}}};
  auto tt = std::get<routing_table>(round_trip({"c", t}).content);
  EXPECT_EQ(tt.routes[0].instances[1].node, "w2");
  EXPECT_DOUBLE_EQ(tt.routes[0].instances[1].weight, 0.5);
  EXPECT_EQ(tt.budgets[0].stage, "detect");

  schedule s{2, {{0, 40, {{"ssd", 8}}}}};
  auto ss = std::get<schedule>(round_trip({"c", s}).content);
  EXPECT_EQ(ss.devices[0].sessions[0].batch, 8u);
  EXPECT_DOUBLE_EQ(ss.devices[0].duty_cycle_ms, 40);

  auto rs = std::get<resize>(round_trip({"c", resize{1, 4}}).content);
  EXPECT_EQ(rs.device, 1u);
  EXPECT_EQ(rs.threads, 4u);

  EXPECT_EQ(std::get<status_request>(round_trip({"", status_request{9}}).content).token, 9u);
  auto sr = std::get<status_reply>(round_trip({"", status_reply{9, true, "ready"}}).content);
  EXPECT_TRUE(sr.ready);
}

TEST(codec, rejects_frames_that_are_not_whole_words) {
  auto d = decode("abc", limits);
  EXPECT_FALSE(d.value);
  EXPECT_NE(d.error.reason.find("not a whole number"), std::string::npos);
}

TEST(codec, rejects_truncated_and_garbage_frames) {
  auto frame = encode({"", sample_request()});
  auto d = decode(std::string_view(frame).substr(0, frame.size() / 2 / 8 * 8), limits);
  EXPECT_FALSE(d.value);
  EXPECT_NE(d.error.reason.find("malformed"), std::string::npos) << d.error.reason;
  std::string garbage(64, '\xff');
  auto g = decode(garbage, limits);
  EXPECT_FALSE(g.value);
  EXPECT_FALSE(g.error.reason.empty());
}

TEST(codec, rejects_wrong_tensor_byte_count_with_the_request_id) {
  auto r = sample_request();
  r.inputs[0].data.resize(40);  // shape [3, 4] float32 needs 48
  auto d = decode(encode({"", r}), limits);
  ASSERT_FALSE(d.value);
  EXPECT_EQ(d.error.request_id, 42u);
  EXPECT_NE(d.error.reason.find("needs 48 bytes but carries 40"), std::string::npos) << d.error.reason;
}

TEST(codec, rejects_an_enum_value_the_schema_does_not_define) {
  capnp::MallocMessageBuilder builder;
  auto reply = builder.initRoot<wire::Envelope>().initBody().initClientReply();
  reply.setRequestId(5);
  reply.setCode(static_cast<wire::Status>(9));
  auto words = capnp::messageToFlatArray(builder);
  auto b = words.asBytes();
  auto d = decode(std::string_view(reinterpret_cast<const char*>(b.begin()), b.size()), limits);
  ASSERT_FALSE(d.value);
  EXPECT_NE(d.error.reason.find("unknown Status 9"), std::string::npos) << d.error.reason;
}

TEST(codec, rejects_negative_dimensions) {
  auto r = sample_request();
  r.inputs[0].shape = {-3, -4};
  auto d = decode(encode({"", r}), limits);
  ASSERT_FALSE(d.value);
  EXPECT_NE(d.error.reason.find("invalid shape"), std::string::npos) << d.error.reason;
}

TEST(codec, rejects_oversize_payloads) {
  auto r = sample_request();
  // Within the frame limit (the payload and 64 KiB around it), over the payload limit: answered.
  r.inputs[0] = make_tensor({dtype::uint8, {520 * 1024}}, 1, "big");
  decode_limits small{512 * 1024};
  auto d = decode(encode({"", r}), small);
  ASSERT_FALSE(d.value);
  EXPECT_EQ(d.error.request_id, 42u);
  EXPECT_EQ(d.error.kind, "payload_too_large");
  EXPECT_NE(d.error.reason.find("exceeds the limit of 524288 bytes"), std::string::npos) << d.error.reason;
  // Over the frame limit: not read at all.
  EXPECT_EQ(small.max_frame_bytes(), 512u * 1024 + 64 * 1024);
  std::string huge(small.max_frame_bytes() + 8, '\0');
  auto h = decode(huge, small);
  ASSERT_FALSE(h.value);
  EXPECT_EQ(h.error.kind, "too_large");
  EXPECT_NE(h.error.reason.find("exceeds the limit"), std::string::npos);
}

TEST(codec, invocation_errors_carry_the_invocation_id) {
  invocation inv{5, "fe", "m", 0, 1, {make_tensor({dtype::float32, {2}}, 1)}};
  inv.inputs[0].data.resize(3);
  auto d = decode(encode({"fe", inv}), limits);
  ASSERT_FALSE(d.value);
  EXPECT_EQ(d.error.invocation_id, 5u);
  EXPECT_EQ(d.error.from, "fe");
}

}  // namespace
}  // namespace sloserve::msg

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "messages/curve.hpp"

namespace sloserve {
namespace {

TEST(curve, key_files_round_trip_and_errors_name_the_line) {
  auto dir = std::filesystem::temp_directory_path() / ("curve-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  auto k = generate_curve_pair();
  ASSERT_TRUE(k) << k.error();
  EXPECT_TRUE(is_z85_key(k->public_key) && is_z85_key(k->secret_key));
  auto written = write_curve_files(dir, "n", *k, false);
  ASSERT_TRUE(written) << written.error();
  auto again = write_curve_files(dir, "n", *k, false);
  EXPECT_FALSE(again);  // no silent overwrite
  EXPECT_NE(again.error().find("--force"), std::string::npos) << again.error();
  auto back = read_curve_file(dir / "n.key", true);
  ASSERT_TRUE(back) << back.error();
  EXPECT_EQ(back->public_key, k->public_key);
  EXPECT_EQ(back->secret_key, k->secret_key);
  auto pub_as_key = read_curve_file(dir / "n.pub", true);
  EXPECT_FALSE(pub_as_key);  // a .pub has no secret
  EXPECT_NE(pub_as_key.error().find("no secret key"), std::string::npos) << pub_as_key.error();
  auto pub = read_curve_file(dir / "n.pub", false);
  ASSERT_TRUE(pub) << pub.error();
  EXPECT_TRUE(pub->secret_key.empty());
  std::ofstream(dir / "bad.key") << "# comment\npublic: \"tooshort\"\n";
  auto bad = read_curve_file(dir / "bad.key", false);
  EXPECT_FALSE(bad);
  EXPECT_NE(bad.error().find("bad.key:2:"), std::string::npos) << bad.error();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace sloserve
