// NetNN's DNN on a chain of switches: the emulated data plane bit-exact with the integer
// reference on random models, its costs per layer as the thesis reports them, refusals of models
// that do not fit, and flows voting over their power-of-two packets.

#include <fmt/format.h>
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
#include <sstream>
#include <tuple>

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

// One switch's simple_switch_CLI commands, read back: exact and longest-prefix entries per table,
// multicast groups as (replication id, ports) per node.
struct cli_switch {
  std::map<std::string, std::map<std::string, std::vector<int64_t>>> exact;    // table -> key -> action data
  std::map<std::string, std::vector<std::tuple<uint32_t, int, int64_t>>> lpm;  // table -> (value, length, data)
  std::map<int, std::vector<std::pair<int, std::string>>> groups;              // group -> (rid, ports)

  explicit cli_switch(const std::string& text) {
    std::istringstream in(text);
    std::string line;
    std::vector<std::pair<int, std::string>> nodes;
    while (std::getline(in, line)) {
      std::istringstream words(line);
      std::string command;
      words >> command;
      if (command == "table_add") {
        std::string table, action, key, word;
        words >> table >> action;
        bool data = false;
        std::vector<int64_t> values;
        while (words >> word) {
          if (word == "=>") {
            data = true;
          } else if (data) {
            values.push_back(std::stoll(word, nullptr, 0));
          } else if (auto slash = word.find('/'); slash != std::string::npos) {
            lpm[table].emplace_back(static_cast<uint32_t>(std::stoul(word.substr(0, slash), nullptr, 0)),
                                    std::stoi(word.substr(slash + 1)), 0);
          } else {
            key += (key.empty() ? "" : " ") + word;
          }
        }
        if (values.empty()) {
          ADD_FAILURE() << "no action data: " << line;
          continue;
        }
        if (lpm.count(table) && !lpm[table].empty() && key.empty())
          std::get<2>(lpm[table].back()) = values[0];
        else
          EXPECT_TRUE(exact[table].emplace(key, values).second) << "a key written twice: " << line;
      } else if (command == "mc_node_create") {
        int rid = 0;
        words >> rid;
        std::string ports;
        std::getline(words, ports);
        nodes.emplace_back(rid, ports.substr(1));
      } else if (command == "mc_node_associate") {
        int group = 0, handle = 0;
        words >> group >> handle;
        if (handle < 0 || static_cast<size_t>(handle) >= nodes.size()) {
          ADD_FAILURE() << "no such node: " << line;
          continue;
        }
        groups[group].push_back(nodes[static_cast<size_t>(handle)]);
      } else if (command == "mc_mgrp_create") {
        int group = 0;
        words >> group;
        groups[group];
      } else {
        ADD_FAILURE() << "not a simple_switch_CLI command this writer uses: " << line;
      }
    }
  }
  // The longest prefix of `table` that matches `v`.
  int64_t longest(const std::string& table, uint32_t v) const {
    int best = -1;
    int64_t data = -1;
    for (auto& [value, length, d] : lpm.at(table)) {
      uint32_t mask = length == 0 ? 0 : ~0u << (32 - length);
      if ((v & mask) == (value & mask) && length > best) best = length, data = d;
    }
    return data;
  }
  const std::vector<int64_t>& at(const std::string& table, const std::string& key) const {
    static const std::vector<int64_t> none;
    auto t = exact.find(table);
    if (t == exact.end()) return none;
    auto e = t->second.find(key);
    return e == t->second.end() ? none : e->second;
  }
};

// The control plane's entries make the programs compute the model: on the feature switch the
// longest-prefix entries give log_time for every gap and the first layer's group a node a window;
// on every layer's switch each port names its pipeline's block and group, the blocks cover the
// layer's outputs once, and each output's accumulator computed by looking up its weights and
// products in the entries (as the program does) equals sum(x * w) + bias from the model, for random
// activations; every group sends each output to every pipeline downstream; no table holds more
// entries than the program declares.
TEST(netnn, the_p4_entries_make_the_programs_compute_the_model) {
  std::mt19937_64 rng(11);
  model m;
  m.input_channels = 1;
  m.input_length = input_bits;
  m.layers.push_back(random_layer(rng, layer_kind::conv, 1, 8, 8, 8, 2, 0));  // 70 windows, 8 filters on 16 pipelines
  m.layers.push_back(random_layer(rng, layer_kind::dense, 8 * 35, 6));
  m.layers.push_back(random_layer(rng, layer_kind::dense, 6, 2));
  auto plan = map_model(m, switch_limits{});
  ASSERT_TRUE(plan) << plan.error();
  auto programs = emit_p4(m, *plan, switch_limits{});
  auto entries = [&](int sw) {
    std::ostringstream out;
    write_p4_entries(m, *plan, sw, out);
    return cli_switch(out.str());
  };
  auto features = entries(0);
  for (uint32_t us : {0u, 1u, 7u, 8u, 9u, 15u, 16u, 100u, 1000u, 123456u, 0x7FFFFFFFu, 0xFFFFFFFEu, 0xFFFFFFFFu})
    for (const char* table : {"log_min", "log_max"}) EXPECT_EQ(features.longest(table, us), log_time(us)) << us;
  for (int k = 0; k < 2000; ++k) {
    auto us = static_cast<uint32_t>(rng() >> (rng() % 32));
    ASSERT_EQ(features.longest("log_min", us), log_time(us)) << us;
  }
  EXPECT_LE(features.lpm["log_min"].size(), 264u) << "the table's declared size";
  ASSERT_EQ(features.groups[1].size(), 70u) << "a node a window";
  for (int r = 0; r < 70; ++r) {
    EXPECT_EQ(features.groups[1][static_cast<size_t>(r)].first, r);
    EXPECT_EQ(features.groups[1][static_cast<size_t>(r)].second, "1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16");
  }
  int sw = 1;
  for (size_t i = 0; i < m.layers.size(); ++i) {
    auto& l = m.layers[i];
    auto& cost = plan->layers[i];
    int pipelines = cost.pipelines / cost.switches;
    int upstream = i == 0 ? 1 : plan->layers[i - 1].pipelines;
    int downstream = i + 1 < m.layers.size() ? plan->layers[i + 1].pipelines : 0;
    int taps = l.kind == layer_kind::conv ? l.inputs * l.kernel : 1;
    std::vector<int> covered(static_cast<size_t>(l.outputs), 0);
    for (int k = 0; k < cost.switches; ++k, ++sw) {
      auto cli = entries(sw);
      for (auto& [table, rows] : cli.exact) {
        size_t declared = table == "block"                 ? static_cast<size_t>(pipelines * upstream)
                          : table.rfind("product", 0) == 0 ? 65536u
                          : table.rfind("weight", 0) == 0 && l.kind == layer_kind::dense
                              ? 64u * static_cast<size_t>(l.inputs)
                              : 64u;
        EXPECT_LE(rows.size(), declared) << cost.name << " " << table;
      }
      EXPECT_NE(
          programs[i + 1].source.find(fmt::format("actions = {{ set_block; }} size = {}; }}", pipelines * upstream)),
          std::string::npos)
          << "the block table is declared a port for each upstream pipeline of each pipeline";
      for (int p = 0; p < pipelines; ++p) {
        auto& block = cli.at("block", std::to_string(p * upstream));
        ASSERT_EQ(block.size(), 2u) << cost.name << " pipeline " << p;
        for (int j = 1; j < upstream; ++j) EXPECT_EQ(cli.at("block", std::to_string(p * upstream + j)), block);
        EXPECT_EQ(block[1], p + 1) << "its group";
        auto first = static_cast<int>(block[0]);
        auto key = std::to_string(first);
        auto [lo, hi] = output_block(l.outputs, k * pipelines + p, cost.pipelines);
        EXPECT_EQ(first, lo);
        int count = hi - lo;  // may be none: a pipeline past the layer's outputs computes nothing it sends
        for (int o = 0; o < count; ++o) {
          auto f = static_cast<size_t>(first + o);
          ++covered.at(f);
          // The accumulator as the program forms it: a weight look-up and a product look-up a tap.
          for (int trial = 0; trial < 3; ++trial) {
            int64_t by_entries =
                static_cast<int32_t>(static_cast<uint32_t>(cli.at("bias" + std::to_string(o), key)[0]));
            int64_t by_model = l.bias[f];
            int fan = l.kind == layer_kind::conv ? taps : l.inputs;
            for (int t = 0; t < fan; ++t) {
              auto x = static_cast<uint8_t>(rng());
              int tap = l.kind == layer_kind::conv ? t : 0;
              auto wkey = l.kind == layer_kind::conv ? key : key + " " + std::to_string(t);
              auto& w = cli.at(fmt::format("weight{}_{}", o, tap), wkey);
              ASSERT_EQ(w.size(), 1u) << cost.name << " output " << f << " tap " << t;
              auto& px = cli.at(fmt::format("product{}_{}", o, tap), fmt::format("{} {}", x, w[0]));
              ASSERT_EQ(px.size(), 1u) << cost.name << " output " << f << " x " << int{x} << " w " << w[0];
              by_entries += static_cast<int16_t>(static_cast<uint16_t>(px[0]));
              by_model += int64_t{x} * l.weights[f * static_cast<size_t>(fan) + static_cast<size_t>(t)];
            }
            ASSERT_EQ(by_entries, by_model) << cost.name << " output " << f;
          }
        }
        if (downstream == 0) {
          EXPECT_TRUE(cli.groups.empty()) << "the final switch sends nothing on";
          continue;
        }
        auto& group = cli.groups[p + 1];
        ASSERT_EQ(static_cast<int>(group.size()), count) << "a node an output";
        std::string ports;
        for (int q = 0; q < downstream; ++q)
          ports += (q ? " " : "") + std::to_string(pipelines * upstream + p * downstream + q);
        for (int o = 0; o < count; ++o) {
          EXPECT_EQ(group[static_cast<size_t>(o)].first, o);
          EXPECT_EQ(group[static_cast<size_t>(o)].second, ports);
        }
      }
    }
    for (int f = 0; f < l.outputs; ++f) EXPECT_EQ(covered[static_cast<size_t>(f)], 1) << cost.name << " output " << f;
  }
  EXPECT_EQ(sw, plan->switches);
  // A replica carries the output its replication id names.
  EXPECT_NE(programs[1].source.find("if (sm.egress_rid == 0) { hdr.values[0].v = meta.out0; }"), std::string::npos);
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
