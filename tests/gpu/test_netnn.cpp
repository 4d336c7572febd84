// NetNN's DNN on a chain of switches: the emulated data plane bit-exact with the integer
// reference on random models, its costs per layer as the thesis reports them, refusals of models
// that do not fit, and flows voting over their power-of-two packets.

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <regex>
#include <set>

#include "config/cluster_config.hpp"
#include "gpu/executor.hpp"
#include "gpu/netnn/dataset.hpp"
#include "gpu/netnn/p4.hpp"

namespace sloserve::netnn {
namespace {

// A layer of random weights and biases, its shift set so that outputs spread over 0-255.
layer random_layer(std::mt19937_64& rng, layer_kind kind, int inputs, int outputs, int kernel = 1, int stride = 1,
                   int pool = 1, int spread = 6) {
  layer l;
  l.kind = kind;
  l.inputs = inputs;
  l.outputs = outputs;
  l.kernel = kernel;
  l.stride = stride;
  l.pool = pool;
  int fan = inputs * kernel;
  for (int k = 0; k < outputs * fan; ++k) l.weights.push_back(static_cast<int8_t>(static_cast<int>(rng() % 256) - 128));
  for (int k = 0; k < outputs; ++k) l.bias.push_back(static_cast<int32_t>(rng() % 4001) - 1000);
  int bits = 0;
  while ((1 << bits) < fan) ++bits;
  l.shift = std::max(0, bits / 2 + spread);
  return l;
}

// The model of the thesis's Figure P6.1 on this input: two convolutions with max pooling, three
// dense layers (50, 100, two classes).
model paper_model(std::mt19937_64& rng) {
  model m;
  m.input_channels = 1;
  m.input_length = input_bits;                                                 // 560 bits
  m.layers.push_back(random_layer(rng, layer_kind::conv, 1, 32, 8, 8, 2, 0));  // 70 windows -> 35
  m.layers.push_back(random_layer(rng, layer_kind::conv, 32, 64, 3, 1, 3));    // 33 -> 11
  m.layers.push_back(random_layer(rng, layer_kind::dense, 64 * 11, 50));
  m.layers.push_back(random_layer(rng, layer_kind::dense, 50, 100));
  m.layers.push_back(random_layer(rng, layer_kind::dense, 100, 2));
  return m;
}

std::vector<uint8_t> random_input(std::mt19937_64& rng, const model& m, bool bits) {
  std::vector<uint8_t> x(static_cast<size_t>(m.input_channels * m.input_length));
  for (auto& v : x) v = static_cast<uint8_t>(bits ? rng() % 2 : rng() % 256);
  return x;
}

// Random chains of convolutions and dense layers, random inputs: the switches give the
// reference's logits exactly, and no pipeline spends more on a packet than the plan says.
TEST(netnn, the_switch_chain_is_bit_exact_with_the_integer_reference) {
  std::mt19937_64 rng(2406);
  int models = 60, inputs = 0, distinct_models = 0;
  for (int n = 0; n < models; ++n) {
    model m;
    m.input_channels = 1 + static_cast<int>(rng() % 3);
    m.input_length = 12 + static_cast<int>(rng() % 40);
    int convs = static_cast<int>(rng() % 3), denses = 1 + static_cast<int>(rng() % 3);
    int channels = m.input_channels, positions = m.input_length;
    for (int c = 0; c < convs; ++c) {
      int kernel = 1 + static_cast<int>(rng() % 4), stride = 1 + static_cast<int>(rng() % 2),
          pool = 1 + static_cast<int>(rng() % 2);
      int out = (positions - kernel) / stride + 1;
      if (out / pool < 2) break;
      int filters = 1 + static_cast<int>(rng() % 20);
      m.layers.push_back(random_layer(rng, layer_kind::conv, channels, filters, kernel, stride, pool));
      channels = filters, positions = out / pool;
    }
    int fan = channels * positions;
    for (int d = 0; d < denses; ++d) {
      int outputs = d + 1 == denses ? 2 + static_cast<int>(rng() % 3) : 1 + static_cast<int>(rng() % 40);
      m.layers.push_back(random_layer(rng, layer_kind::dense, fan, outputs));
      fan = outputs;
    }
    ASSERT_EQ(check(m), "") << n;
    auto plan = map_model(m, switch_limits{});
    ASSERT_TRUE(plan) << plan.error();
    switch_chain chain(m, switch_limits{});
    std::set<std::vector<int32_t>> seen;
    for (int k = 0; k < 8; ++k, ++inputs) {
      auto x = random_input(rng, m, k % 2 == 0);
      auto want = reference(m, x);
      ASSERT_EQ(chain.infer(x), want) << "model " << n << " input " << k;
      seen.insert(want);
    }
    distinct_models += seen.size() > 1;
    for (size_t i = 0; i < m.layers.size(); ++i) {
      EXPECT_LE(chain.counters().max_ops_per_packet[i], plan->layers[i].ops_per_packet) << n << " layer " << i;
      EXPECT_EQ(chain.counters().packets[i], 8 * plan->layers[i].packets) << n << " layer " << i;
    }
  }
  std::printf("netnn: %d random models, %d inputs, bit-exact; %d models told inputs apart\n", models, inputs,
              distinct_models);
  EXPECT_GE(distinct_models, models * 3 / 4) << "the random models compute something";
}

// The thesis's model: 18 switches; per layer the packets, operations per packet and memory, as
// Table P6.1 lists them; bit-exact on bit inputs; and the planned worst case per packet is what
// the busiest pipeline spends.
TEST(netnn, the_papers_model_takes_18_switches_and_reports_its_costs_per_layer) {
  std::mt19937_64 rng(7);
  auto m = paper_model(rng);
  auto plan = map_model(m, switch_limits{});
  ASSERT_TRUE(plan) << plan.error();
  EXPECT_EQ(plan->switches, 18);
  switch_chain chain(m, switch_limits{});
  for (int k = 0; k < 3; ++k) {
    auto x = random_input(rng, m, true);
    ASSERT_EQ(chain.infer(x), reference(m, x));
  }
  std::printf("%-8s %9s %12s %12s %14s %12s %7s\n", "layer", "packets", "ops/packet", "seen max", "weights (B)",
              "regs/pipe", "stages");
  for (size_t i = 0; i < plan->layers.size(); ++i) {
    auto& c = plan->layers[i];
    std::printf("%-8s %9llu %12lld %12lld %14lld %12lld %7d\n", c.name.c_str(),
                static_cast<unsigned long long>(c.packets), static_cast<long long>(c.ops_per_packet),
                static_cast<long long>(chain.counters().max_ops_per_packet[i]), static_cast<long long>(c.weight_bytes),
                static_cast<long long>(c.register_bytes), c.stages);
  }
  EXPECT_EQ(plan->layers[0].name, "conv1");
  EXPECT_EQ(plan->layers[0].packets, 70u) << "one window of 8 bits a packet";
  EXPECT_EQ(plan->layers[1].packets, 32u * 35) << "one packet a pooled value";
  EXPECT_EQ(plan->layers[2].packets, 64u * 11);
  EXPECT_EQ(plan->layers[3].packets, 50u);
  EXPECT_EQ(plan->layers[4].packets, 100u);
  EXPECT_EQ(plan->layers[0].outputs_per_pipeline, 2) << "32 filters on 16 pipelines, as the thesis has it";
  EXPECT_EQ(plan->layers[1].outputs_per_pipeline, 4);
  // As in the thesis, the second convolution costs the most operations a packet, the first dense
  // layer the most weight memory.
  for (size_t i = 0; i < plan->layers.size(); ++i) {
    if (i != 1) {
      EXPECT_GT(plan->layers[1].ops_per_packet, plan->layers[i].ops_per_packet) << i;
    }
    if (i != 2) {
      EXPECT_GT(plan->layers[2].weight_bytes, plan->layers[i].weight_bytes) << i;
    }
  }
  // Conv1's and the dense layers' busiest pipelines reach the planned worst case.
  EXPECT_EQ(chain.counters().max_ops_per_packet[0], plan->layers[0].ops_per_packet);
  EXPECT_EQ(chain.counters().max_ops_per_packet[2], plan->layers[2].ops_per_packet);
}

TEST(netnn, a_model_that_does_not_fit_the_switches_is_refused_with_the_layer_and_the_limit) {
  std::mt19937_64 rng(7);
  auto m = paper_model(rng);
  switch_limits tofino;  // stages and budgets of a hardware pipeline
  tofino.stages = 12;
  tofino.ops_per_packet = 1000;
  auto r = map_model(m, tofino);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().find("conv2"), std::string::npos) << r.error();
  EXPECT_NE(r.error().find("operations per packet"), std::string::npos) << r.error();
  switch_limits small;
  small.register_bytes_per_stage = 1024;
  small.flow_slots = 64;
  r = map_model(m, small);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().find("register array"), std::string::npos) << r.error();
  switch_limits tables;
  tables.table_bytes_per_stage = 64 << 10;  // the product table is 128 KiB
  r = map_model(m, tables);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().find("a table of 131072 bytes"), std::string::npos) << r.error();
  switch_limits few;  // the product table fills a stage: the weights need another
  few.stages = 1;
  few.table_bytes_per_stage = 131072;
  few.flow_slots = 64;
  r = map_model(m, few);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().find("stages"), std::string::npos) << r.error();
  // A model whose shapes do not chain is refused before any switch.
  auto broken = m;
  broken.layers[2].inputs = 100;
  r = map_model(broken, switch_limits{});
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().find("layer 3: fan-in 100"), std::string::npos) << r.error();
}

TEST(netnn, a_flow_is_classified_at_its_power_of_two_packets_by_majority) {
  std::mt19937_64 rng(3);
  auto m = paper_model(rng);
  switch_chain chain(m, switch_limits{});
  packet p;
  for (size_t i = 0; i < p.head.size(); ++i) p.head[i] = static_cast<uint8_t>(i * 7);
  std::vector<uint32_t> points;
  std::vector<int> labels;
  flow_state mirror;
  for (int k = 0; k < 40; ++k) {
    p.arrival_us = 1000 + 250 * k + (k % 3) * 40;
    p.head[30] = static_cast<uint8_t>(rng());  // payload bytes vary, the 5-tuple does not
    bool point = observe(mirror, p);
    auto v = chain.process(p);
    ASSERT_EQ(v.has_value(), point) << k;
    if (!v) continue;
    points.push_back(v->point);
    EXPECT_EQ(v->logits, reference(m, features(p, mirror))) << k;
    labels.push_back(v->label);
    int votes1 = static_cast<int>(std::count(labels.begin(), labels.end(), 1));
    EXPECT_EQ(v->majority, votes1 > static_cast<int>(labels.size()) - votes1 ? 1 : 0) << k;
  }
  EXPECT_EQ(points, (std::vector<uint32_t>{1, 2, 4, 8, 16, 32}));
  EXPECT_EQ(chain.counters().inference_points, 6u);
  // The inter-arrival times on a log scale: 8 steps a power of two, saturating.
  EXPECT_EQ(log_time(0), 0);
  EXPECT_EQ(log_time(7), 7);
  EXPECT_EQ(log_time(8), 8);
  EXPECT_EQ(log_time(15), 15);
  EXPECT_EQ(log_time(16), 16);
  EXPECT_EQ(log_time(250), 8 * 5 + 7);  // 0b11111010: leading bit 7, then 111
  EXPECT_EQ(log_time(0xFFFFFFFFu), 255);
  EXPECT_EQ(mirror.min_iat_us, 170u);
  EXPECT_EQ(mirror.max_iat_us, 290u);
  auto x = features(p, mirror);
  ASSERT_EQ(x.size(), static_cast<size_t>(input_bits));
  EXPECT_EQ(x[8], (p.head[1] >> 7) & 1);
}

TEST(netnn, a_model_round_trips_through_its_json_and_bad_files_are_refused_with_the_reason) {
  std::mt19937_64 rng(5);
  auto m = paper_model(rng);
  auto back = parse_model(model_json(m), "m.json");
  ASSERT_TRUE(back) << back.error();
  std::vector<uint8_t> x(input_bits, 1);
  EXPECT_EQ(reference(*back, x), reference(m, x));
  EXPECT_EQ(model_json(*back), model_json(m));
  auto bad = parse_model("[1]", "m.json");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error(), "m.json: not a JSON object");
  bad = parse_model(R"({"input_length": 4, "layers": [{"kind": "pool", "inputs": 4, "outputs": 1}]})", "m.json");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().find("conv or dense, not 'pool'"), std::string::npos) << bad.error();
  bad = parse_model(
      R"({"input_length": 2, "layers": [{"kind": "dense", "inputs": 2, "outputs": 1, "weights": [1, 300], "bias": [0]}]})",
      "m.json");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().find("outside [-128, 127]"), std::string::npos) << bad.error();
}

// P4_16 for bmv2 from the same split (no p4c here: the structure is checked): one program for
// the feature switch, one a tier, one for the final switch, covering the plan's 18 switches; each
// a v1model program whose braces balance, whose every table is declared once and applied once,
// and whose registers and per-tap tables are what the plan sizes.
TEST(netnn, the_p4_programs_follow_the_mapping) {
  std::mt19937_64 rng(7);
  auto m = paper_model(rng);
  auto plan = map_model(m, switch_limits{});
  ASSERT_TRUE(plan);
  auto programs = emit_p4(m, *plan, switch_limits{});
  ASSERT_EQ(programs.size(), m.layers.size() + 1);
  int switches = 0;
  for (auto& p : programs) {
    switches += p.switches;
    auto& src = p.source;
    EXPECT_NE(src.find("#include <v1model.p4>"), std::string::npos) << p.name;
    EXPECT_NE(src.find("main;"), std::string::npos) << p.name;
    EXPECT_NE(src.find("V1Switch(NetnnParser(), NetnnVerify(), "), std::string::npos) << p.name;
    EXPECT_EQ(std::count(src.begin(), src.end(), '{'), std::count(src.begin(), src.end(), '}')) << p.name;
    // The metadata precedes the parser that names it.
    EXPECT_LT(src.find("struct metadata"), src.find("parser NetnnParser")) << p.name;
    std::map<std::string, int> declared, applied;
    static const std::regex table(R"(\btable (\w+) \{)"), apply(R"(\b(\w+)\.apply\(\))");
    for (std::sregex_iterator it(src.begin(), src.end(), table), end; it != end; ++it) ++declared[(*it)[1]];
    for (std::sregex_iterator it(src.begin(), src.end(), apply), end; it != end; ++it) ++applied[(*it)[1]];
    for (auto& [name, n] : declared) {
      EXPECT_EQ(n, 1) << p.name << " " << name;
      EXPECT_EQ(applied[name], 1) << p.name << " " << name << " is applied once a pass";
    }
    for (auto& [name, n] : applied) EXPECT_TRUE(declared.count(name)) << p.name << " applies undeclared " << name;
  }
  EXPECT_EQ(switches, plan->switches);
  auto count = [](const std::string& src, const std::string& what) {
    size_t n = 0;
    for (auto at = src.find(what); at != std::string::npos; at = src.find(what, at + 1)) ++n;
    return n;
  };
  EXPECT_NE(programs[0].source.find("register<bit<64>>(4096) flow_key;"), std::string::npos);
  EXPECT_NE(programs[0].source.find("HashAlgorithm.crc32"), std::string::npos);
  EXPECT_EQ(count(programs[1].source, "table product"), 2u * 8) << "conv1: 2 filters x 8 taps a pipeline";
  EXPECT_NE(programs[1].source.find("register<bit<8>>(70) pool_max;"), std::string::npos);
  EXPECT_EQ(count(programs[2].source, "table product"), 4u * 96) << "conv2: 4 filters x 32 channels x 3 taps";
  EXPECT_NE(programs[2].source.find("register<bit<8>>(1120) buffer;"), std::string::npos);
  EXPECT_NE(programs[2].source.find("resubmit_preserving_field_list"), std::string::npos);
  EXPECT_EQ(count(programs[3].source, "table product"), 4u) << "dense1: 4 neurons, one input a packet";
  EXPECT_NE(programs[5].source.find("register<bit<32>>(8192) votes;"), std::string::npos);
  EXPECT_EQ(programs[5].name, "final");
}

// A switch device (`kind: switch`): each request one packet, its reply the chain's logits, class,
// flow majority and place; a model over the device's limits is refused when it loads.
TEST(netnn, a_switch_device_answers_each_packet_and_refuses_a_model_over_its_limits) {
  std::mt19937_64 rng(9);
  auto m = paper_model(rng);
  auto file = std::filesystem::temp_directory_path() / ("netnn-" + std::to_string(::getpid()) + ".json");
  std::ofstream(file) << model_json(m);
  model_spec spec;
  spec.name = "ids";
  spec.netnn = file.string();
  spec.input = {dtype::uint8, {76}};
  spec.output = {dtype::float32, {5}};
  spec.profile.alpha_ms = 0.001;
  spec.profile.beta_ms = 0.0005;
  device_group g;
  g.kind = device_kind::network_switch;
  auto ex = make_switch_executor(g);
  ASSERT_TRUE(ex->load(spec)) << "fits the default limits";
  switch_chain mirror(m, switch_limits{});
  packet p;
  for (size_t i = 0; i < p.head.size(); ++i) p.head[i] = static_cast<uint8_t>(3 * i + 1);
  std::vector<std::vector<tensor>> batch;
  std::vector<packet> sent;
  for (int k = 0; k < 5; ++k) {
    p.arrival_us = 100 + 300 * k;
    p.head[50] = static_cast<uint8_t>(rng());
    char* at = nullptr;
    auto data = bytes::allocate(76, at);
    std::memcpy(at, p.head.data(), head_bytes);
    for (int b = 0; b < 8; ++b) at[head_bytes + b] = static_cast<char>((p.arrival_us >> (8 * b)) & 0xFF);
    batch.push_back({tensor{"input", dtype::uint8, {76}, std::move(data)}});
    sent.push_back(p);
  }
  std::vector<const std::vector<tensor>*> inputs;
  for (auto& b : batch) inputs.push_back(&b);
  auto out = ex->execute(spec, inputs);
  ASSERT_EQ(out.error, "");
  ASSERT_EQ(out.outputs.size(), 5u);
  for (size_t k = 0; k < 5; ++k) {
    auto& t = out.outputs[k].at(0);
    ASSERT_EQ(t.shape, std::vector<int64_t>{5});
    std::vector<float> row(5);
    std::memcpy(row.data(), t.data.data(), sizeof(float) * 5);
    auto v = mirror.process(sent[k]);
    if (v) {
      EXPECT_EQ(row[0], static_cast<float>(v->logits[0])) << k;
      EXPECT_EQ(row[1], static_cast<float>(v->logits[1])) << k;
      EXPECT_EQ(row[2], static_cast<float>(v->label)) << k;
      EXPECT_EQ(row[3], static_cast<float>(v->majority)) << k;
      EXPECT_EQ(row[4], static_cast<float>(v->point)) << k;
    } else {
      EXPECT_EQ(row[2], -1) << k;
      EXPECT_EQ(row[3], static_cast<float>(mirror.majority(sent[k]))) << k;
      EXPECT_EQ(row[4], 0) << k << ": packet 3 and 5 are no inference points";
    }
  }
  EXPECT_EQ(out.busy, std::chrono::nanoseconds(static_cast<int64_t>(spec.profile.latency_ms_at(5) * 1e6)));
  device_group small = g;
  small.ops_per_packet = 1000;
  auto refused = make_switch_executor(small)->load(spec);
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().find("does not fit this switch device: conv2"), std::string::npos) << refused.error();
  auto plain = spec;
  plain.netnn.clear();
  EXPECT_FALSE(make_switch_executor(g)->load(plain));
  std::filesystem::remove(file);
}

// The model tools/netnn.py trained and quantized: on its test flows the switch chain gives the
// integer reference's logits at every inference point, and scores exactly what Python's
// reference scored (one arithmetic, two languages); voting over a flow's points beats a packet.
TEST(netnn, the_trained_model_scores_on_the_switches_what_it_scored_in_python) {
#ifndef SLOSERVE_NETNN_DIR
  GTEST_SKIP() << "built without LibTorch: no trained model";
#else
  std::string dir = SLOSERVE_NETNN_DIR;
  auto m = read_model(dir + "/model.json");
  ASSERT_TRUE(m) << m.error();
  auto flows = read_flows(dir + "/test.bin");
  ASSERT_TRUE(flows) << flows.error();
  std::ifstream in(dir + "/meta.json");
  auto meta = nlohmann::json::parse(in);
  ASSERT_TRUE(map_model(*m, switch_limits{}));
  switch_chain chain(*m, switch_limits{});
  auto s = run_flows(chain, *m, *flows, true);
  std::printf("netnn trained: %llu flows, %llu points; packet accuracy %.4f (float %.4f), flow %.4f (float %.4f)\n",
              static_cast<unsigned long long>(s.flows), static_cast<unsigned long long>(s.points), s.packet_accuracy(),
              meta["float_packet_accuracy"].get<double>(), s.flow_accuracy(),
              meta["float_flow_accuracy"].get<double>());
  EXPECT_EQ(s.mismatches, 0u);
  EXPECT_EQ(s.flows, meta["test_flows"].get<uint64_t>());
  EXPECT_EQ(s.points, 11 * s.flows) << "packets 1, 2, 4, ..., 1024 of each";
  EXPECT_DOUBLE_EQ(s.packet_accuracy(), meta["quantized_packet_accuracy"].get<double>());
  EXPECT_DOUBLE_EQ(s.flow_accuracy(), meta["quantized_flow_accuracy"].get<double>());
  EXPECT_GE(s.packet_accuracy(), 0.75);
  EXPECT_GT(s.flow_accuracy(), s.packet_accuracy());
#endif
}

}  // namespace
}  // namespace sloserve::netnn
