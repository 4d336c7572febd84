#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <nlohmann/json.hpp>
#include <tuple>

#include "messages/kserve_v2.hpp"

namespace sloserve::kserve {
namespace {

using json = nlohmann::json;

template <class T>
std::vector<T> values_of(const tensor& t) {
  std::vector<T> out(t.data.size() / sizeof(T));
  std::memcpy(out.data(), t.data.data(), t.data.size());
  return out;
}

TEST(kserve, grpc_codes_are_named_as_grpc_names_them) {
  EXPECT_EQ(grpc_code_name(0), "OK");
  EXPECT_EQ(grpc_code_name(3), "INVALID_ARGUMENT");
  EXPECT_EQ(grpc_code_name(8), "RESOURCE_EXHAUSTED");
  EXPECT_EQ(grpc_code_name(9), "FAILED_PRECONDITION");
  EXPECT_EQ(grpc_code_name(16), "UNAUTHENTICATED");
  EXPECT_EQ(grpc_code_name(17), "UNKNOWN");
  EXPECT_EQ(grpc_code_name(-1), "UNKNOWN");
}

TEST(kserve, json_data_becomes_tensors_of_each_datatype) {
  auto body = json{{"id", "r1"},
                   {"inputs",
                    {{{"name", "input"}, {"shape", {2, 2}}, {"datatype", "FP32"}, {"data", {{1.5, -2}, {3, 4.25}}}},
                     {{"name", "ids"}, {"shape", {3}}, {"datatype", "INT64"}, {"data", {1, -2, 9007199254740993LL}}},
                     {{"name", "px"}, {"shape", {2}}, {"datatype", "UINT8"}, {"data", {0, 255}}},
                     {{"name", "h"}, {"shape", {2}}, {"datatype", "FP16"}, {"data", {1.0, -0.5}}},
                     {{"name", "i"}, {"shape", {1}}, {"datatype", "INT32"}, {"data", {-7}}}}}}
                  .dump();
  auto r = parse_infer_request(body, std::nullopt);
  ASSERT_TRUE(r) << r.error();
  EXPECT_EQ(r->id, "r1");
  ASSERT_EQ(r->inputs.size(), 5u);
  EXPECT_EQ(r->inputs[0].shape, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(values_of<float>(r->inputs[0]), (std::vector<float>{1.5f, -2, 3, 4.25f}));
  EXPECT_EQ(values_of<int64_t>(r->inputs[1]), (std::vector<int64_t>{1, -2, 9007199254740993LL}));
  EXPECT_EQ(values_of<uint8_t>(r->inputs[2]), (std::vector<uint8_t>{0, 255}));
  EXPECT_EQ(values_of<uint16_t>(r->inputs[3]), (std::vector<uint16_t>{0x3c00, 0xb800}));
  EXPECT_EQ(values_of<int32_t>(r->inputs[4]), (std::vector<int32_t>{-7}));
  EXPECT_FALSE(r->binary_outputs);
  // Out and back: the response carries the same values.
  auto out = make_infer_response("p", "r1", r->inputs, false);
  auto j = json::parse(out.body);
  EXPECT_EQ(j["model_name"], "p");
  EXPECT_EQ(j["id"], "r1");
  EXPECT_EQ(j["outputs"][0]["data"], json({1.5, -2, 3, 4.25}));
  EXPECT_EQ(j["outputs"][3]["data"], json({1.0, -0.5}));
  EXPECT_EQ(j["outputs"][2]["datatype"], "UINT8");
  EXPECT_FALSE(out.header_length);
}

// The wider datatypes: FP64, the signed and unsigned integers of every width, BOOL; each value
// must fit its type, out and back the same values.
TEST(kserve, json_data_of_the_wider_datatypes_round_trips_and_values_must_fit) {
  auto input = [](const char* type, json data) {
    return json{{"name", "x"}, {"shape", {data.size()}}, {"datatype", type}, {"data", data}};
  };
  auto body = json{{"inputs",
                    {input("FP64", {0.1, -1e300}), input("INT8", {-128, 127}), input("INT16", {-32768, 32767}),
                     input("UINT16", {0, 65535}), input("UINT32", {0, 4294967295LL}),
                     input("UINT64", {0, 18446744073709551615ULL}), input("BOOL", {true, false})}}}
                  .dump();
  auto r = parse_infer_request(body, std::nullopt);
  ASSERT_TRUE(r) << r.error();
  ASSERT_EQ(r->inputs.size(), 7u);
  EXPECT_EQ(values_of<double>(r->inputs[0]), (std::vector<double>{0.1, -1e300}));
  EXPECT_EQ(values_of<int8_t>(r->inputs[1]), (std::vector<int8_t>{-128, 127}));
  EXPECT_EQ(values_of<int16_t>(r->inputs[2]), (std::vector<int16_t>{-32768, 32767}));
  EXPECT_EQ(values_of<uint16_t>(r->inputs[3]), (std::vector<uint16_t>{0, 65535}));
  EXPECT_EQ(values_of<uint32_t>(r->inputs[4]), (std::vector<uint32_t>{0, 4294967295u}));
  EXPECT_EQ(values_of<uint64_t>(r->inputs[5]), (std::vector<uint64_t>{0, 18446744073709551615ULL}));
  EXPECT_EQ(values_of<uint8_t>(r->inputs[6]), (std::vector<uint8_t>{1, 0}));
  EXPECT_EQ(r->inputs[6].type, dtype::boolean);
  auto j = json::parse(make_infer_response("p", "", r->inputs, false).body);
  EXPECT_EQ(j["outputs"][0]["data"], json({0.1, -1e300}));
  EXPECT_EQ(j["outputs"][5]["data"], json({0, 18446744073709551615ULL}));
  EXPECT_EQ(j["outputs"][6]["data"], json({true, false}));
  EXPECT_EQ(j["outputs"][6]["datatype"], "BOOL");
  for (auto [type, data, says] :
       {std::tuple{"INT8", json{128}, "out of INT8 range"}, std::tuple{"UINT16", json{-1}, "out of UINT16 range"},
        std::tuple{"UINT32", json{4294967296LL}, "out of UINT32 range"},
        std::tuple{"BOOL", json{1}, "not true or false"}, std::tuple{"INT16", json{1.5}, "not an integer"},
        std::tuple{"FP64", json{"x"}, "must hold exactly 1 numbers"}}) {
    auto bad = parse_infer_request(json{{"inputs", {input(type, data)}}}.dump(), std::nullopt);
    ASSERT_FALSE(bad) << type;
    EXPECT_NE(bad.error().find(says), std::string::npos) << bad.error();
  }
  auto bytes_numbers = parse_infer_request(json{{"inputs", {input("BYTES", {1})}}}.dump(), std::nullopt);
  ASSERT_FALSE(bytes_numbers);
  EXPECT_NE(bytes_numbers.error().find("exactly 1 strings"), std::string::npos) << bytes_numbers.error();
}

// BYTES: strings in JSON, each a 4-byte little-endian length and its bytes in binary; the tensor
// carries the binary form, and a response gives the strings back.
// Binary inputs are views of the body they came in: no copy between the socket's buffer and
// the batch.
TEST(kserve, binary_inputs_share_the_body_they_arrive_in) {
  std::string raw(24, '\x07');
  auto header =
      json{{"inputs",
            {{{"name", "a"}, {"shape", {3}}, {"datatype", "FP64"}, {"parameters", {{"binary_data_size", 24}}}},
             {{"name", "b"}, {"shape", {2}}, {"datatype", "FP32"}, {"data", {1, 2}}}}}}
          .dump();
  bytes body(header + raw);
  auto r = parse_infer_body(body, header.size());
  ASSERT_TRUE(r) << r.error();
  auto& a = r->inputs[0].data;
  EXPECT_EQ(a.data(), body.data() + header.size()) << "the binary input points into the body";
  EXPECT_EQ(a.owner(), body.owner()) << "and keeps it alive";
  EXPECT_EQ(a.view(), raw);
  EXPECT_NE(r->inputs[1].data.owner(), body.owner()) << "JSON data is made anew";
}

// Triton's shared-memory parameters: an input names a region, an offset and a size instead of
// carrying data; an output asks to be written into one. What is missing or doubled is refused.
TEST(kserve, shared_memory_parameters_name_where_inputs_lie_and_outputs_go) {
  auto in = json{{"name", "input"},
                 {"shape", {2, 2}},
                 {"datatype", "FP32"},
                 {"parameters",
                  {{"shared_memory_region", "frames"}, {"shared_memory_offset", 64}, {"shared_memory_byte_size", 16}}}};
  auto plain = json{{"name", "other"}, {"shape", {1}}, {"datatype", "INT32"}, {"data", {5}}};
  auto out =
      json{{"name", "output"}, {"parameters", {{"shared_memory_region", "res"}, {"shared_memory_byte_size", 400}}}};
  auto r = parse_infer_request(json{{"inputs", {plain, in}}, {"outputs", {out}}}.dump(), std::nullopt);
  ASSERT_TRUE(r) << r.error();
  ASSERT_EQ(r->inputs.size(), 2u);
  EXPECT_TRUE(r->inputs[1].data.empty());
  EXPECT_EQ(r->inputs[1].shape, (std::vector<int64_t>{2, 2}));
  ASSERT_EQ(r->shm_inputs.size(), 1u);
  EXPECT_EQ(r->shm_inputs[0].first, 1u);
  EXPECT_EQ(r->shm_inputs[0].second, (shm_ref{"frames", 64, 16}));
  ASSERT_EQ(r->shm_outputs.count("output"), 1u);
  EXPECT_EQ(r->shm_outputs.at("output"), (shm_ref{"res", 0, 400}));

  auto refused = [&](json input, const std::string& why) {
    auto bad = parse_infer_request(json{{"inputs", {input}}}.dump(), std::nullopt);
    ASSERT_FALSE(bad) << input;
    EXPECT_NE(bad.error().find(why), std::string::npos) << bad.error();
  };
  auto both = in;
  both["data"] = {1, 2, 3, 4};
  refused(both, "also carries data");
  auto no_size = in;
  no_size["parameters"].erase("shared_memory_byte_size");
  refused(no_size, "must both be given");
  auto offset_only = in;
  offset_only["parameters"] = {{"shared_memory_offset", 0}};
  refused(offset_only, "must both be given");
  auto negative = in;
  negative["parameters"]["shared_memory_offset"] = -1;
  refused(negative, "shared_memory_offset must be a non-negative integer");
  auto number = in;
  number["parameters"]["shared_memory_region"] = 7;
  refused(number, "shared_memory_region must be a string");

  // The response: the output written into its region carries the region's parameters, no data.
  tensor t;
  t.name = "output";
  t.type = dtype::float32;
  t.shape = {2};
  t.data = std::string(8, '\0');
  std::map<std::string, shm_ref> into{{"output", {"res", 32, 400}}};
  auto j = json::parse(make_infer_response("p", "", {t}, false, nullptr, &into).body);
  auto& o = j["outputs"][0];
  EXPECT_FALSE(o.contains("data")) << o;
  EXPECT_EQ(o["parameters"],
            json({{"shared_memory_region", "res"}, {"shared_memory_offset", 32}, {"shared_memory_byte_size", 8}}));
  auto bin = make_infer_response("p", "", {t}, true, nullptr, &into);
  EXPECT_FALSE(bin.header_length) << "nothing travels as binary: the output is in shared memory";
  EXPECT_EQ(json::parse(bin.body)["outputs"][0]["parameters"]["shared_memory_byte_size"], 8);
}

TEST(kserve, bytes_inputs_are_strings_in_json_and_length_prefixed_in_binary) {
  auto in = json{{"name", "input"}, {"shape", {2}}, {"datatype", "BYTES"}, {"data", {"ab", ""}}};
  auto r = parse_infer_request(json{{"inputs", {in}}}.dump(), std::nullopt);
  ASSERT_TRUE(r) << r.error();
  auto& t = r->inputs.front();
  EXPECT_EQ(t.type, dtype::bytes);
  EXPECT_EQ(t.data.view(), std::string("\x02\0\0\0ab\0\0\0\0", 10));
  // The same through the binary extension.
  auto header =
      json{{"inputs",
            {{{"name", "input"}, {"shape", {2}}, {"datatype", "BYTES"}, {"parameters", {{"binary_data_size", 10}}}}}}}
          .dump();
  auto b = parse_infer_request(header + std::string(t.data.view()), header.size());
  ASSERT_TRUE(b) << b.error();
  EXPECT_EQ(b->inputs.front().data.view(), t.data.view());
  // A length past the end, or bytes after the last element, are refused.
  for (auto data : {std::string("\x05\0\0\0ab\0\0\0\0", 10), std::string("\x02\0\0\0ab\0\0\0\0\0", 11)}) {
    auto h = json::parse(header);
    h["inputs"][0]["parameters"]["binary_data_size"] = data.size();
    auto bad = parse_infer_request(h.dump() + data, h.dump().size());
    ASSERT_FALSE(bad);
    EXPECT_NE(bad.error().find("4-byte little-endian length"), std::string::npos) << bad.error();
  }
  // A response: the strings again over JSON, the binary form with binary outputs.
  t.name = "output";
  auto j = json::parse(make_infer_response("p", "", {t}, false, nullptr).body);
  EXPECT_EQ(j["outputs"][0]["datatype"], "BYTES");
  EXPECT_EQ(j["outputs"][0]["data"], json({"ab", ""}));
  auto bin = make_infer_response("p", "", {t}, true, nullptr);
  ASSERT_TRUE(bin.header_length);
  EXPECT_EQ(bin.body.substr(*bin.header_length), t.data.view());
}

// The server's timing travels in a response's parameters, as JSON or before binary outputs, and
// a client turns it back into the reply's total and one stage's queue and compute times.
TEST(kserve, a_responses_parameters_carry_the_servers_timing) {
  msg::stage_timing a, b, c;
  a.stage = "detect", a.queue_ms = 1.5, a.exec_ms = 10;
  b.stage = "classify", b.queue_ms = 0.25, b.exec_ms = 4.0004;
  c.stage = "classify", c.queue_ms = 0.5, c.exec_ms = 3;  // a fan-out's second invocation
  msg::client_reply served;
  served.total_ms = 20.0004;
  served.timings = {a, b, c};
  auto t = timing_of(served);
  EXPECT_TRUE(t.late_paths.empty());
  EXPECT_EQ(t.total_us, 20000);
  EXPECT_EQ(t.queue_us, 2250);
  EXPECT_EQ(t.compute_us, 17000);
  ASSERT_EQ(t.stages.size(), 2u);
  EXPECT_EQ(t.stages[0].name, "detect");
  EXPECT_EQ(t.stages[0].compute_us, 10000);
  EXPECT_EQ(t.stages[1].name, "classify");
  EXPECT_EQ(t.stages[1].queue_us, 750);
  EXPECT_EQ(t.stages[1].compute_us, 7000);
  std::vector<tensor> outputs{make_tensor({dtype::float32, {2}}, 1, "y")};
  for (bool binary : {false, true}) {
    auto out = make_infer_response("p", "7", outputs, binary, &t);
    auto back = response_timing(out.body, out.header_length);
    ASSERT_TRUE(back) << out.body;
    EXPECT_EQ(back->total_us, 20000);
    EXPECT_EQ(back->queue_us, 2250);
    EXPECT_EQ(back->compute_us, 17000);
    EXPECT_NE(out.body.find("\"sloserve_stage_classify_compute_us\":7000"), std::string::npos) << out.body;
    EXPECT_NE(out.body.find("\"sloserve_stage_detect_queue_us\":1500"), std::string::npos) << out.body;
    msg::client_reply r;
    apply_timing(*back, r);
    EXPECT_DOUBLE_EQ(r.total_ms, 20);
    ASSERT_EQ(r.timings.size(), 1u);
    EXPECT_DOUBLE_EQ(r.timings[0].queue_ms, 2.25);
    EXPECT_DOUBLE_EQ(r.timings[0].exec_ms, 17);
    EXPECT_TRUE(r.late_paths.empty());
    EXPECT_EQ(out.body.find("sloserve_late_paths"), std::string::npos) << "absent when none";
  }
  // Leaves past their own SLO travel as one string parameter, and come back as the reply's.
  served.late_paths = {"alert", "report"};
  auto late = timing_of(served);
  for (bool binary : {false, true}) {
    auto out = make_infer_response("p", "7", outputs, binary, &late);
    EXPECT_NE(out.body.find(R"("sloserve_late_paths":"alert,report")"), std::string::npos) << out.body;
    auto back = response_timing(out.body, out.header_length);
    ASSERT_TRUE(back) << out.body;
    msg::client_reply r;
    apply_timing(*back, r);
    EXPECT_EQ(r.late_paths, (std::vector<std::string>{"alert", "report"}));
  }
  EXPECT_FALSE(response_timing(make_infer_response("p", "", outputs, false).body, std::nullopt)) << "none sent";
  EXPECT_FALSE(response_timing("not json", std::nullopt));
  // Only the top-level parameters count, and only integers; a torn header is no timing.
  EXPECT_FALSE(response_timing(R"({"outputs":[{"parameters":{"sloserve_total_us":1,"sloserve_queue_us":2,)"
                               R"("sloserve_compute_us":3}}]})",
                               std::nullopt));
  EXPECT_FALSE(response_timing(
      R"({"parameters":{"sloserve_total_us":1.5,"sloserve_queue_us":2,"sloserve_compute_us":3}})", std::nullopt));
  auto whole = std::string(R"({"parameters":{"x":{"sloserve_total_us":9},"sloserve_total_us":1,"sloserve_queue_us":2,)"
                           R"("sloserve_compute_us":3},"id":"a"})");
  auto t1 = response_timing(whole, std::nullopt);
  ASSERT_TRUE(t1);
  EXPECT_EQ(t1->total_us, 1);
  EXPECT_EQ(t1->compute_us, 3);
  EXPECT_FALSE(response_timing(whole, whole.size() - 3)) << "cut short";
}

TEST(kserve, a_binary_request_header_reads_back_as_its_tensor) {
  auto t = make_tensor({dtype::int16, {2, 3}}, 1, "ignored");
  auto header = binary_request_header("17", "in\"put", t);
  auto body = header + std::string(t.data.view());
  auto back = parse_infer_request(body, header.size());
  ASSERT_TRUE(back) << back.error() << " " << header;
  EXPECT_EQ(back->id, "17");
  EXPECT_TRUE(back->binary_outputs);
  ASSERT_EQ(back->inputs.size(), 1u);
  EXPECT_EQ(back->inputs[0].name, "in\"put");
  EXPECT_EQ(back->inputs[0].type, dtype::int16);
  EXPECT_EQ(back->inputs[0].shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(back->inputs[0].data.view(), t.data.view());
}

TEST(kserve, the_binary_extension_carries_tensors_after_the_json_both_ways) {
  float xs[3] = {0.25f, 8, -1};
  std::string raw(reinterpret_cast<const char*>(xs), sizeof xs);
  auto header = json{{"inputs",
                      {{{"name", "input"},
                        {"shape", {3}},
                        {"datatype", "FP32"},
                        {"parameters", {{"binary_data_size", raw.size()}}}}}},
                     {"outputs", {{{"name", "output"}, {"parameters", {{"binary_data", true}}}}}}}
                    .dump();
  auto r = parse_infer_request(header + raw, header.size());
  ASSERT_TRUE(r) << r.error();
  EXPECT_EQ(values_of<float>(r->inputs[0]), (std::vector<float>{0.25f, 8, -1}));
  EXPECT_FALSE(r->binary_outputs) << "asked of one output, not of all";
  EXPECT_EQ(r->binary_of, (std::map<std::string, bool>{{"output", true}}));
  auto outputs = r->inputs;
  outputs[0].name = "output";
  auto out = make_infer_response("p", "", outputs, false, nullptr, nullptr, &r->binary_of);
  ASSERT_TRUE(out.header_length);
  auto j = json::parse(out.body.substr(0, *out.header_length));
  EXPECT_EQ(j["outputs"][0]["parameters"]["binary_data_size"], raw.size());
  EXPECT_EQ(out.body.substr(*out.header_length), raw);
  EXPECT_FALSE(j.contains("id"));
}

TEST(kserve, a_bad_request_is_refused_with_what_is_wrong) {
  auto input = [](json in) { return json{{"inputs", {in}}}.dump(); };
  json ok{{"name", "input"}, {"shape", {2}}, {"datatype", "FP32"}, {"data", {1, 2}}};
  struct bad {
    std::string body;
    std::optional<size_t> header;
    std::string says;
  };
  auto with = [&](const char* key, json v) {
    auto x = ok;
    x[key] = v;
    return input(x);
  };
  std::vector<bad> cases{
      {"{\"inputs\": [", std::nullopt, "bad JSON"},
      {"[1, 2]", std::nullopt, "JSON object"},
      {"{}", std::nullopt, "\"inputs\""},
      {json{{"inputs", json::array()}}.dump(), std::nullopt, "\"inputs\""},
      {with("datatype", "BF16"), std::nullopt, "not one of"},
      {with("shape", {-1}), std::nullopt, "non-negative"},
      {with("shape", "2"), std::nullopt, "\"shape\""},
      {with("data", {1, 2, 3}), std::nullopt, "exactly 2 numbers"},
      {with("data", {1, "x"}), std::nullopt, "exactly 2 numbers"},
      {with("shape", {1LL << 40, 1LL << 40}), std::nullopt, "too large"},
      {input(json{{"shape", {2}}, {"datatype", "FP32"}, {"data", {1, 2}}}), std::nullopt, "\"name\""},
      {input(json{{"name", "input"}, {"shape", {2}}, {"datatype", "FP32"}}), std::nullopt, "neither"},
      {input(json{{"name", "u"}, {"shape", {1}}, {"datatype", "UINT8"}, {"data", {256}}}), std::nullopt, "UINT8 range"},
      {input(json{{"name", "u"}, {"shape", {1}}, {"datatype", "INT32"}, {"data", {1.5}}}), std::nullopt, "integer"},
      {with("parameters", {{"binary_data_size", 8}}), std::nullopt, "no Inference-Header-Content-Length"},
      {input(ok), 9999, "beyond the body"},
      // Found by fuzz_kserve: a number beyond double, a flag of the wrong type.
      {"{\"inputs\": [{\"name\": \"x\", \"shape\": [1], \"datatype\": \"FP32\", \"data\": [1e999]}]}", std::nullopt,
       "bad JSON"},
      {json{{"inputs", {ok}}, {"parameters", {{"binary_data_output", "yes"}}}}.dump(), std::nullopt, "bad request"},
  };
  // Binary sizes that do not add up.
  json bin{{"name", "input"}, {"shape", {2}}, {"datatype", "FP32"}, {"parameters", {{"binary_data_size", 8}}}};
  auto h = input(bin);
  cases.push_back({h + std::string(4, 'x'), h.size(), "ends after"});
  cases.push_back({h + std::string(12, 'x'), h.size(), "bytes after the inputs"});
  bin["parameters"]["binary_data_size"] = 4;
  cases.push_back({input(bin) + "xxxx", input(bin).size(), "is not the 8 bytes"});
  for (auto& c : cases) {
    auto r = parse_infer_request(c.body, c.header);
    ASSERT_FALSE(r) << c.body;
    EXPECT_NE(r.error().find(c.says), std::string::npos) << c.body << " -> " << r.error();
  }
}

// Request parameters sloserve reads: a partitioned model's start layer and the request's own SLO.
TEST(kserve, request_parameters_give_a_start_layer_and_an_slo) {
  json in{{"name", "input"}, {"shape", {2}}, {"datatype", "FP32"}, {"data", {1, 2}}};
  auto r = parse_infer_request(json{{"inputs", {in}}, {"parameters", {{"start_layer", 2}, {"slo_ms", 150.5}}}}.dump(),
                               std::nullopt);
  ASSERT_TRUE(r) << r.error();
  EXPECT_EQ(r->start_layer, 2u);
  EXPECT_DOUBLE_EQ(r->slo_ms, 150.5);
  auto plain = parse_infer_request(json{{"inputs", {in}}}.dump(), std::nullopt);
  ASSERT_TRUE(plain);
  EXPECT_EQ(plain->start_layer, 0u);
  EXPECT_EQ(plain->slo_ms, 0);
  for (auto [params, says] : {std::pair{json{{"start_layer", -1}}, "start_layer"},
                              {json{{"start_layer", "2"}}, "start_layer"},
                              {json{{"slo_ms", -5}}, "slo_ms"},
                              {json{{"slo_ms", "fast"}}, "slo_ms"},
                              {json::array(), "\"parameters\" must be an object"}}) {
    auto bad = parse_infer_request(json{{"inputs", {in}}, {"parameters", params}}.dump(), std::nullopt);
    ASSERT_FALSE(bad) << params;
    EXPECT_NE(bad.error().find(says), std::string::npos) << bad.error();
  }
}

TEST(kserve, datatype_names_round_trip) {
  for (auto t : all_dtypes) {
    EXPECT_EQ(parse_datatype(datatype_name(t)), t);
    EXPECT_EQ(parse_dtype(dtype_name(t)), t);
  }
  EXPECT_EQ(datatype_name(dtype::boolean), "BOOL");
  EXPECT_FALSE(parse_datatype("fp32"));
  EXPECT_EQ(parse_datatype("BYTES"), dtype::bytes);
  EXPECT_EQ(json::parse(error_body("no \"such\" thing"))["error"], "no \"such\" thing");
}

// Each output's own binary_data decides how it travels, over the request's binary_data_output.
TEST(kserve, each_outputs_binary_data_decides_over_the_requests) {
  auto body = json{{"inputs", {{{"name", "input"}, {"shape", {1}}, {"datatype", "FP32"}, {"data", {1}}}}},
                   {"outputs",
                    {{{"name", "scores"}, {"parameters", {{"binary_data", false}}}},
                     {{"name", "boxes"}, {"parameters", {{"binary_data", true}}}},
                     {{"name", "count"}}}},
                   {"parameters", {{"binary_data_output", true}}}}
                  .dump();
  auto r = parse_infer_request(body, std::nullopt);
  ASSERT_TRUE(r) << r.error();
  EXPECT_TRUE(r->binary_outputs);
  std::vector<tensor> outs{make_tensor({dtype::float32, {2}}, 1, "scores"),
                           make_tensor({dtype::float32, {3}}, 2, "boxes"),
                           make_tensor({dtype::int64, {1}}, 3, "count")};
  auto res = make_infer_response("p", "", outs, r->binary_outputs, nullptr, nullptr, &r->binary_of);
  ASSERT_TRUE(res.header_length);
  auto j = json::parse(res.body.substr(0, *res.header_length));
  EXPECT_TRUE(j["outputs"][0].contains("data")) << "scores: JSON, as it asked";
  EXPECT_EQ(j["outputs"][1]["parameters"]["binary_data_size"], 12) << "boxes: binary";
  EXPECT_EQ(j["outputs"][2]["parameters"]["binary_data_size"], 8) << "count: the request's binary_data_output";
  EXPECT_EQ(res.body.substr(*res.header_length), std::string(outs[1].data.view()) + std::string(outs[2].data.view()));
  // All as JSON: no header length.
  std::map<std::string, bool> none_binary{{"scores", false}, {"boxes", false}, {"count", false}};
  auto plain = make_infer_response("p", "", outs, true, nullptr, nullptr, &none_binary);
  EXPECT_FALSE(plain.header_length);
  EXPECT_EQ(json::parse(plain.body)["outputs"].size(), 3u);
  // A binary_data that is not a boolean is refused.
  auto bad = json::parse(body);
  bad["outputs"][0]["parameters"]["binary_data"] = "yes";
  auto refused = parse_infer_request(bad.dump(), std::nullopt);
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().find("output 'scores': parameter binary_data must be true or false"), std::string::npos)
      << refused.error();
}

std::vector<std::string> strings_of(const tensor& t) {
  std::vector<std::string> out;
  auto items = bytes_elements(t.data.view(), t.spec().elements().value_or(0));
  if (items)
    for (auto x : *items) out.emplace_back(x);
  return out;
}

// The classification extension: the top k of the last dimension, highest first and the lower
// index among equals, as "value:index[:label]"; a batch keeps its leading dimensions; k beyond
// the classes gives them all; what has no scores is refused with the reason.
TEST(kserve, classification_ranks_the_last_dimension_into_labelled_strings) {
  tensor t;
  t.name = "probs";
  t.type = dtype::float32;
  t.shape = {2, 4};
  float xs[8] = {0.1f, 0.7f, 0.2f, 0.7f, 3, -1, std::nanf(""), 5};
  t.data = std::string(reinterpret_cast<const char*>(xs), sizeof xs);
  auto c = classify(t, 2, {"cat", "dog", "eel"});
  ASSERT_TRUE(c) << c.error();
  EXPECT_EQ(c->type, dtype::bytes);
  EXPECT_EQ(c->shape, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(strings_of(*c), (std::vector<std::string>{"0.700000:1:dog", "0.700000:3", "5.000000:3", "3.000000:0:cat"}));
  auto all = classify(t, 9, {});
  ASSERT_TRUE(all);
  EXPECT_EQ(all->shape, (std::vector<int64_t>{2, 4}));
  EXPECT_EQ(strings_of(*all)[7], "nan:2") << "NaN ranks last";
  auto ints = classify(make_tensor({dtype::int64, {3}}, 0, "n"), 1, {});
  ASSERT_TRUE(ints);
  EXPECT_EQ(ints->shape, (std::vector<int64_t>{1}));
  auto scalar = classify(make_tensor({dtype::float32, {}}, 1, "s"), 1, {});
  ASSERT_FALSE(scalar);
  EXPECT_NE(scalar.error().find("output 's' (float32[]): classification needs a vector of class scores"),
            std::string::npos)
      << scalar.error();
  tensor words;
  words.name = "w";
  words.type = dtype::bytes;
  words.shape = {1};
  words.data = std::string("\x01\0\0\0a", 5);
  EXPECT_FALSE(classify(words, 1, {}));
  // Asked for in a request: a count per output, or refused.
  auto body = [](json k) {
    return json{{"inputs", {{{"name", "input"}, {"shape", {1}}, {"datatype", "FP32"}, {"data", {1}}}}},
                {"outputs", {{{"name", "probs"}, {"parameters", {{"classification", k}}}}}}}
        .dump();
  };
  auto r = parse_infer_request(body(3), std::nullopt);
  ASSERT_TRUE(r) << r.error();
  EXPECT_EQ(r->classification, (std::map<std::string, uint32_t>{{"probs", 3}}));
  for (auto bad : {json(0), json(-2), json(1.5), json("3")}) {
    auto refused = parse_infer_request(body(bad), std::nullopt);
    ASSERT_FALSE(refused) << bad;
    EXPECT_NE(refused.error().find("output 'probs': parameter classification must be the number of classes"),
              std::string::npos)
        << refused.error();
  }
}

}  // namespace
}  // namespace sloserve::kserve
