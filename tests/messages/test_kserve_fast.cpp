// The fast readers of requests and replies against the full ones: on thousands of requests in
// the forms clients send, and spoiled in the ways clients spoil them, the fast reader reads what
// the full one reads or leaves the request to it, never anything else.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "messages/kserve_v2.hpp"

namespace sloserve::kserve {
namespace {

using json = nlohmann::json;

// One request, built of pieces that are each right or wrong in a way picked at random.
struct request_maker {
  std::mt19937_64 rng;
  explicit request_maker(uint64_t seed) : rng(seed) {}

  size_t pick(size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng); }
  bool chance(double p) { return std::bernoulli_distribution(p)(rng); }
  std::string ws() { return chance(0.2) ? std::string(" \n\t\r").substr(pick(4), 1 + pick(2)) : ""; }

  // `members` as a JSON object in a shuffled order, with white space here and there; now and
  // then one member twice.
  std::string object(std::vector<std::pair<std::string, std::string>> members) {
    std::shuffle(members.begin(), members.end(), rng);
    if (!members.empty() && chance(0.03)) members.push_back(members[pick(members.size())]);
    std::string out = "{" + ws();
    for (size_t i = 0; i < members.size(); ++i)
      out += (i ? "," + ws() : "") + "\"" + members[i].first + "\"" + ws() + ":" + ws() + members[i].second + ws();
    return out + "}";
  }

  // An input of `bytes_out` binary bytes (0: in a shared-memory region or as JSON data).
  std::string input(size_t index, size_t& bytes_out) {
    static const char* types[] = {"FP32", "INT64", "UINT8", "FP16", "BYTES", "fp32"};
    static const size_t widths[] = {4, 8, 1, 2, 0, 4};
    auto t = chance(0.85) ? pick(4) : pick(6);
    std::vector<std::string> shapes{"[16]", "[2,8]", "[1,3,4]", "[]", "[0]"};
    std::vector<size_t> counts{16, 16, 12, 1, 0};
    auto sh = pick(shapes.size());
    std::string shape = shapes[sh];
    if (chance(0.04)) shape = std::vector<std::string>{"[-1]", "[1.5]", "[\"2\"]", "[01]", "[1e1]", "16"}[pick(6)];
    size_t size = counts[sh] * widths[t];
    std::vector<std::pair<std::string, std::string>> m;
    m.push_back({"name", chance(0.97) ? "\"in" + std::to_string(index) + "\"" : "\"in\\u0030\""});
    m.push_back({"datatype", std::string("\"") + types[t] + "\""});
    m.push_back({"shape", shape});
    auto form = pick(10);
    if (form < 6) {  // binary
      auto n = chance(0.95) ? size : size + 4;
      std::vector<std::pair<std::string, std::string>> p{{"binary_data_size", std::to_string(n)}};
      if (chance(0.05)) p.push_back({"content_type", "\"x\""});
      m.push_back({"parameters", object(p)});
      bytes_out = n;
    } else if (form < 9) {  // shared memory
      std::vector<std::pair<std::string, std::string>> p{
          {"shared_memory_region", "\"r" + std::to_string(pick(3)) + "\""},
          {"shared_memory_byte_size", std::to_string(size)}};
      if (chance(0.6)) p.push_back({"shared_memory_offset", std::to_string(pick(4) * 64)});
      if (chance(0.05)) p.erase(p.begin() + static_cast<long>(pick(2)));
      if (chance(0.04)) p.push_back({"binary_data_size", std::to_string(size)});
      m.push_back({"parameters", object(p)});
      bytes_out = 0;
    } else {  // JSON data
      std::string data = "[";
      for (size_t i = 0; i < counts[sh]; ++i) data += (i ? "," : "") + std::to_string(i);
      m.push_back({"data", data + "]"});
      bytes_out = 0;
    }
    if (chance(0.03)) m.erase(m.begin() + static_cast<long>(pick(3)));
    return object(m);
  }

  std::string output(size_t i) {
    std::vector<std::pair<std::string, std::string>> m{{"name", "\"out" + std::to_string(i) + "\""}};
    std::vector<std::pair<std::string, std::string>> p;
    if (chance(0.4)) p.push_back({"binary_data", chance(0.95) ? (chance(0.5) ? "true" : "false") : "1"});
    if (chance(0.2))
      p.push_back({"classification", std::vector<std::string>{"3", "1", "0", "2000000", "2.5"}[pick(5)]});
    if (chance(0.2))
      p = {{"shared_memory_region", "\"o\""}, {"shared_memory_byte_size", "64"}, {"shared_memory_offset", "8"}};
    if (!p.empty() || chance(0.2)) m.push_back({"parameters", object(p)});
    return object(m);
  }

  // A request's body and its header's length (none: JSON only).
  std::pair<std::string, std::optional<size_t>> body() {
    std::vector<std::pair<std::string, std::string>> top;
    if (chance(0.7))
      top.push_back({"id", std::vector<std::string>{"\"42\"", "\"\"", "\"a\\\"b\"", "42"}[pick(4) * chance(0.3)]});
    size_t binary = 0;
    std::string inputs = "[";
    auto n = chance(0.97) ? 1 + pick(3) : 0;
    for (size_t i = 0; i < n; ++i) {
      size_t b = 0;
      inputs += (i ? "," : "") + input(i, b);
      binary += b;
    }
    top.push_back({"inputs", inputs + "]"});
    if (chance(0.4)) {
      std::string outputs = "[";
      for (size_t i = 0, k = 1 + pick(2); i < k; ++i) outputs += (i ? "," : "") + output(i);
      top.push_back({"outputs", outputs + "]"});
    }
    if (chance(0.5)) {
      std::vector<std::pair<std::string, std::string>> p;
      if (chance(0.6)) p.push_back({"binary_data_output", chance(0.95) ? "true" : "\"yes\""});
      if (chance(0.2)) p.push_back({"start_layer", std::vector<std::string>{"2", "0", "-1", "2000000"}[pick(4)]});
      if (chance(0.2)) p.push_back({"slo_ms", std::vector<std::string>{"50", "50.5", "-3", "5000000", "0"}[pick(5)]});
      top.push_back({"parameters", object(p)});
    }
    if (chance(0.03)) top.push_back({"sequence_id", "7"});
    auto header = object(top) + ws();
    if (chance(0.02)) header += "x";
    bool with_length = binary > 0 || chance(0.3);
    std::string tail(binary + (chance(0.03) ? 3 : 0), '\0');
    for (size_t i = 0; i < tail.size(); ++i) tail[i] = static_cast<char>(i * 7 + 1);
    if (!with_length) return {header, std::nullopt};
    return {header + tail, header.size()};
  }
};

void expect_same(const infer_request& fast, const infer_request& full, const std::string& body) {
  EXPECT_EQ(fast.id, full.id) << body;
  ASSERT_EQ(fast.inputs.size(), full.inputs.size()) << body;
  for (size_t i = 0; i < fast.inputs.size(); ++i) {
    EXPECT_EQ(fast.inputs[i].name, full.inputs[i].name) << body;
    EXPECT_EQ(fast.inputs[i].type, full.inputs[i].type) << body;
    EXPECT_EQ(fast.inputs[i].shape, full.inputs[i].shape) << body;
    EXPECT_EQ(fast.inputs[i].data.view(), full.inputs[i].data.view()) << body;
  }
  EXPECT_EQ(fast.binary_outputs, full.binary_outputs) << body;
  EXPECT_EQ(fast.outputs, full.outputs) << body;
  EXPECT_EQ(fast.binary_of, full.binary_of) << body;
  EXPECT_EQ(fast.classification, full.classification) << body;
  EXPECT_EQ(fast.shm_inputs, full.shm_inputs) << body;
  EXPECT_EQ(fast.shm_outputs, full.shm_outputs) << body;
  EXPECT_EQ(fast.start_layer, full.start_layer) << body;
  EXPECT_EQ(fast.slo_ms, full.slo_ms) << body;
}

TEST(kserve_fast, reads_what_the_full_reader_reads_or_leaves_the_request_to_it) {
  request_maker make(20261207);
  int read_fast = 0, full_only = 0, refused = 0;
  for (int i = 0; i < 20000; ++i) {
    auto [text, header_length] = make.body();
    bytes body(text);
    auto fast = parse_request_fast(body, header_length);
    auto full = parse_request_document(body, header_length);
    if (fast) {
      ++read_fast;
      ASSERT_TRUE(full) << "the fast reader took what the full one refuses (" << full.error() << "): " << text;
      expect_same(*fast, *full, text);
      if (HasFailure()) return;
    } else {
      full ? ++full_only : ++refused;
    }
    // What clients get is the same either way.
    auto either = parse_infer_body(body, header_length);
    ASSERT_EQ(bool(either), bool(full)) << text;
    if (!full) {
      EXPECT_EQ(either.error(), full.error()) << text;
    }
  }
  // Of this seed's requests the fast reader takes 5,239; 4,617 more are the full reader's (JSON
  // data, escapes, unknown keys, a fractional SLO, ...), and 10,144 are wrong.
  EXPECT_GT(read_fast, 4000);
  EXPECT_GT(full_only, 3000);
  EXPECT_GT(refused, 8000);
}

TEST(kserve_fast, a_binary_request_shares_its_body_and_the_one_sloserve_sends_is_read_fast) {
  tensor t;
  t.type = dtype::float32;
  t.shape = {2, 2};
  t.data = std::string(16, '\x01');
  auto header = binary_request_header("7", "x", t, "\"slo_ms\":50");
  bytes body(header + t.data.str());
  auto fast = parse_request_fast(body, header.size());
  ASSERT_TRUE(fast) << header;
  EXPECT_EQ(fast->id, "7");
  EXPECT_EQ(fast->slo_ms, 50);
  EXPECT_TRUE(fast->binary_outputs);
  ASSERT_EQ(fast->inputs.size(), 1u);
  EXPECT_EQ(fast->inputs[0].data.data(), body.data() + header.size()) << "a view of the body, not a copy";
  msg::shared_memory_tensor shm;
  shm.region = "frames";
  shm.offset = 64;
  shm.byte_size = 16;
  shm.type = dtype::float32;
  shm.shape = {2, 2};
  auto json_body = shared_memory_request_body("8", "x", shm, "");
  auto in_region = parse_request_fast(bytes(json_body), std::nullopt);
  ASSERT_TRUE(in_region) << json_body;
  ASSERT_EQ(in_region->shm_inputs.size(), 1u);
  EXPECT_EQ(in_region->shm_inputs[0].second, (shm_ref{"frames", 64, 16}));
}

// The timing a reply carries, read by the load client: the fast reader against a document.
TEST(kserve_fast, reply_timing_is_what_the_document_says) {
  std::mt19937_64 rng(7);
  auto pick = [&](uint64_t n) { return std::uniform_int_distribution<uint64_t>(0, n - 1)(rng); };
  for (int i = 0; i < 3000; ++i) {
    msg::client_reply r;
    r.total_ms = static_cast<double>(pick(100000)) / 7;
    msg::stage_timing st;
    st.stage = pick(2) ? "s" : "";
    st.queue_ms = static_cast<double>(pick(1000)) / 3;
    st.exec_ms = static_cast<double>(pick(1000)) / 3;
    r.timings = {st};
    if (pick(3) == 0) r.late_paths = {"a", "b"};
    tensor o;
    o.name = "out";
    o.shape = {1, 2};
    o.data = std::string(8, '\0');
    auto timing = timing_of(r);
    auto out = make_infer_response("p", pick(2) ? "id" : "", {o}, pick(2) == 0, &timing, nullptr, nullptr);
    auto header = out.body.substr(0, out.header_length.value_or(out.body.size()));
    // Spoiled now and then: a member twice, an escape, a negative number, no timing.
    switch (pick(12)) {
      case 0:
        header.insert(header.find("\"parameters\":{") + 14, "\"sloserve_total_us\":5,");
        break;
      case 1:
        header.insert(header.find("\"parameters\":{") + 14, "\"note\":\"a\\nb\",");
        break;
      case 2:
        header.insert(header.find("\"parameters\":{") + 14, "\"sloserve_queue_us\":-3,");
        break;
      case 3:
        header = "{\"outputs\":[]}";
        break;
      default:
        break;
    }
    auto got = response_timing(header, std::nullopt);
    auto doc = json::parse(header);
    auto& p = doc["parameters"];
    bool has = p.is_object() && p.contains(timing_keys[0]) && p.contains(timing_keys[1]) && p.contains(timing_keys[2]);
    ASSERT_EQ(bool(got), has) << header;
    if (!got) continue;
    EXPECT_EQ(got->total_us, p[timing_keys[0]].get<int64_t>()) << header;
    EXPECT_EQ(got->queue_us, p[timing_keys[1]].get<int64_t>()) << header;
    EXPECT_EQ(got->compute_us, p[timing_keys[2]].get<int64_t>()) << header;
    EXPECT_EQ(got->late_paths, split_late_paths(p.value(late_paths_key, ""))) << header;
  }
}

}  // namespace
}  // namespace sloserve::kserve
