#include "gpu/netnn/switch_chain.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <deque>

namespace sloserve::netnn {

namespace {

// The product table: every 8-bit activation by every 8-bit weight (2^16 entries of 16 bits).
const std::array<int16_t, 65536>& products() {
  static const auto table = [] {
    std::array<int16_t, 65536> t{};
    for (int x = 0; x < 256; ++x)
      for (int w = -128; w < 128; ++w) t[static_cast<size_t>(x << 8 | (w & 0xFF))] = static_cast<int16_t>(x * w);
    return t;
  }();
  return table;
}

constexpr int64_t product_table_bytes = 65536 * 2;
constexpr int pool_ops = 7;      // pooling register read, compare, write; its count read, add, write; compare
constexpr int finish_ops = 5;    // bias look-up and add, shift, two compares (ReLU, saturation)
constexpr int multiply_ops = 3;  // weight look-up, product look-up, add

bool is_last(const model& m, size_t i) {
  return i + 1 == m.layers.size();
}
// Whether layer i's input comes as whole windows from the feature switch.
bool windowed(const model& m, size_t i) {
  return i == 0 && m.layers[0].kind == layer_kind::conv;
}
int windows_per_position(const layer& l) {
  return (l.kernel + l.stride - 1) / l.stride;
}

// The most operations one pipeline spends on one packet of layer i, holding `own` outputs.
int64_t worst_ops(const model& m, size_t i, int own) {
  auto& l = m.layers[i];
  int64_t fan = static_cast<int64_t>(l.inputs) * l.kernel;
  if (l.kind == layer_kind::conv) {
    int64_t per_filter = multiply_ops * fan + finish_ops + pool_ops + 1;
    if (windowed(m, i)) return own * per_filter;
    // Buffer write, its position's count read/add/write and compare; then per window the packet
    // may complete: its done flag read and write, each position's count read and compare, and
    // each filter's buffer reads and products.
    return 5 + windows_per_position(l) * (2 + 2 * l.kernel + own * (fan + per_filter));
  }
  // The count read/add/write and compare; per neuron the weight and product look-ups, register
  // read, add and write; on the last input, per neuron the register read, bias, shift, compares
  // and the packet out (the last layer: bias and add per class, the class and the flow's vote).
  int64_t accumulate = 4 + 5LL * own;
  if (is_last(m, i)) return accumulate + 3LL * own + 2LL * (own - 1) + 4;
  return accumulate + own * (1 + finish_ops + 1);
}

struct memory {
  std::vector<int64_t> registers, tables;  // arrays of one pipeline
};

memory memory_of(const model& m, const std::vector<shape>& s, size_t i, int own, int flow_slots) {
  auto& l = m.layers[i];
  memory out;
  out.tables = {product_table_bytes, static_cast<int64_t>(own) * l.inputs * l.kernel, 4LL * own};
  if (l.kind == layer_kind::conv) {
    int pooled = s[i + 1].positions;
    out.registers = {static_cast<int64_t>(own) * pooled, static_cast<int64_t>(own) * pooled};  // max, count
    if (!windowed(m, i)) {
      int positions = (s[i].positions - l.kernel) / l.stride + 1;
      out.registers.push_back(s[i].size());     // the input buffer
      out.registers.push_back(s[i].positions);  // channels arrived per position
      out.registers.push_back(positions);       // windows done
    }
  } else {
    out.registers = {4LL * own, 4};
    if (is_last(m, i)) out.registers.push_back(4LL * flow_slots * l.outputs);  // votes
  }
  return out;
}

// Stages first-fit packing needs for `arrays` of at most `per_stage` bytes each; -1 when one is larger.
int stages_for(std::vector<int64_t> arrays, int64_t per_stage) {
  std::sort(arrays.rbegin(), arrays.rend());
  std::vector<int64_t> room;
  for (auto a : arrays) {
    if (a <= 0) continue;
    if (a > per_stage) return -1;
    auto it = std::find_if(room.begin(), room.end(), [&](int64_t r) { return r >= a; });
    if (it == room.end())
      room.push_back(per_stage - a);
    else
      *it -= a;
  }
  return static_cast<int>(room.size());
}

std::string layer_name(const model& m, size_t i) {
  int conv = 0, dense = 0;
  for (size_t k = 0; k <= i; ++k) (m.layers[k].kind == layer_kind::conv ? conv : dense) += 1;
  return m.layers[i].kind == layer_kind::conv ? fmt::format("conv{}", conv) : fmt::format("dense{}", dense);
}

// Packets generated toward layer i per inference.
uint64_t packets_into(const model& m, const std::vector<shape>& s, size_t i) {
  if (windowed(m, i)) return static_cast<uint64_t>((s[0].positions - m.layers[0].kernel) / m.layers[0].stride + 1);
  return static_cast<uint64_t>(s[i].size());
}

}  // namespace

std::pair<int, int> output_block(int n, int u, int units) {
  return {n * u / units, n * (u + 1) / units};
}

int32_t product(uint8_t x, int8_t w) {
  return products()[static_cast<size_t>(x << 8 | static_cast<uint8_t>(w))];
}

expected<chain_plan> map_model(const model& m, const switch_limits& limits, int tier_switches) {
  if (auto why = check(m); !why.empty()) return fail(why);
  if (limits.pipelines <= 0 || limits.stages <= 0 || tier_switches <= 0)
    return fail("a switch needs pipelines and stages, a tier switches");
  auto s = shapes_of(m);
  chain_plan plan;
  plan.switches = 1 + tier_switches * static_cast<int>(m.layers.size() - 1) + 1;
  // The flow table: one register array a field (key, count, last arrival, min and max gap).
  std::vector<int64_t> flow_arrays;
  for (int bytes : {8, 4, 8, 4, 4}) flow_arrays.push_back(static_cast<int64_t>(bytes) * limits.flow_slots);
  plan.feature_register_bytes = 28LL * limits.flow_slots;
  auto flow_stages = stages_for(flow_arrays, limits.register_bytes_per_stage);
  if (flow_stages < 0 || flow_stages > limits.stages)
    return fail(
        fmt::format("the feature switch's flow table ({} slots, {} bytes) does not fit its stages ({} of {} "
                    "bytes of registers)",
                    limits.flow_slots, plan.feature_register_bytes, limits.stages, limits.register_bytes_per_stage));
  for (size_t i = 0; i < m.layers.size(); ++i) {
    auto& l = m.layers[i];
    layer_cost c;
    c.name = layer_name(m, i);
    c.switches = is_last(m, i) ? 1 : tier_switches;
    c.pipelines = is_last(m, i) ? 1 : tier_switches * limits.pipelines;
    c.outputs_per_pipeline = (l.outputs + c.pipelines - 1) / c.pipelines;
    c.packets = packets_into(m, s, i);
    c.ops_per_packet = worst_ops(m, i, c.outputs_per_pipeline);
    c.weight_bytes = static_cast<int64_t>(l.weights.size()) + 4LL * static_cast<int64_t>(l.bias.size());
    auto mem = memory_of(m, s, i, c.outputs_per_pipeline, limits.flow_slots);
    for (auto r : mem.registers) c.register_bytes += r;
    for (auto t : mem.tables) c.table_bytes += t;
    int reg = stages_for(mem.registers, limits.register_bytes_per_stage);
    int tab = stages_for(mem.tables, limits.table_bytes_per_stage);
    auto where = fmt::format("{} ({} outputs a pipeline on {} pipelines)", c.name, c.outputs_per_pipeline, c.pipelines);
    if (c.ops_per_packet > limits.ops_per_packet)
      return fail(fmt::format("{} needs {} operations per packet, over the {} a pipeline may spend", where,
                              c.ops_per_packet, limits.ops_per_packet));
    if (reg < 0)
      return fail(fmt::format("{}: a register array of {} bytes does not fit a stage's {} bytes", where,
                              *std::max_element(mem.registers.begin(), mem.registers.end()),
                              limits.register_bytes_per_stage));
    if (tab < 0)
      return fail(fmt::format("{}: a table of {} bytes does not fit a stage's {} bytes", where,
                              *std::max_element(mem.tables.begin(), mem.tables.end()), limits.table_bytes_per_stage));
    c.stages = std::max(reg, tab);
    if (c.stages > limits.stages)
      return fail(fmt::format("{} needs {} stages for its registers and tables, over the {} a pipeline has", where,
                              c.stages, limits.stages));
    plan.layers.push_back(std::move(c));
  }
  return plan;
}

switch_chain::switch_chain(model m, switch_limits limits, int tier_switches)
    : m_(std::move(m)), limits_(limits), tier_switches_(tier_switches), shapes_(shapes_of(m_)) {
  flows_.resize(static_cast<size_t>(std::max(1, limits_.flow_slots)));
  auto n = m_.layers.size();
  counters_.packets.assign(n, 0);
  counters_.deliveries.assign(n, 0);
  counters_.max_ops_per_packet.assign(n, 0);
  counters_.ops.assign(n, 0);
}

namespace {

// One pipeline's registers for one layer.
struct unit {
  int first = 0, count = 0;              // the outputs it holds
  std::vector<uint8_t> buffer, arrived;  // a convolution fed by values: its input, channels in per position
  std::vector<uint8_t> done;             // its windows computed
  std::vector<uint8_t> pool_max, pool_seen;
  std::vector<int32_t> acc;  // a dense layer's neurons
  uint32_t seen = 0;
};

// A packet between tiers: a window of the input (the first convolution) or one value.
struct message {
  size_t layer = 0;
  int position = 0;  // a window's; a value's within its channel
  int channel = 0;   // a value's channel (a dense layer's input: its index)
  std::vector<uint8_t> values;
};

}  // namespace

std::vector<int32_t> switch_chain::infer(const std::vector<uint8_t>& input) {
  auto& m = m_;
  size_t n = m.layers.size();
  int per_tier = tier_switches_ * limits_.pipelines;
  std::vector<std::vector<unit>> units(n);
  for (size_t i = 0; i < n; ++i) {
    auto& l = m.layers[i];
    int count = is_last(m, i) ? 1 : per_tier;
    for (int u = 0; u < count; ++u) {
      unit x;
      std::tie(x.first, x.count) = output_block(l.outputs, u, count);
      x.count -= x.first;
      if (l.kind == layer_kind::conv) {
        auto pooled = static_cast<size_t>(shapes_[i + 1].positions * x.count);
        x.pool_max.assign(pooled, 0);
        x.pool_seen.assign(pooled, 0);
        if (!windowed(m, i)) {
          x.buffer.assign(static_cast<size_t>(shapes_[i].size()), 0);
          x.arrived.assign(static_cast<size_t>(shapes_[i].positions), 0);
          x.done.assign(static_cast<size_t>((shapes_[i].positions - l.kernel) / l.stride + 1), 0);
        }
      } else {
        x.acc.assign(static_cast<size_t>(x.count), 0);
      }
      units[i].push_back(std::move(x));
    }
  }
  std::deque<message> queue;
  auto send = [&](message msg) {
    ++counters_.packets[msg.layer];
    queue.push_back(std::move(msg));
  };
  // The feature switch: windows for a first convolution, values for a first dense layer.
  auto& first = m.layers[0];
  if (windowed(m, 0)) {
    int positions = (shapes_[0].positions - first.kernel) / first.stride + 1;
    for (int p = 0; p < positions; ++p) {
      message w{0, p, 0, {}};
      for (int c = 0; c < first.inputs; ++c)
        for (int t = 0; t < first.kernel; ++t)
          w.values.push_back(input[static_cast<size_t>(c * shapes_[0].positions + p * first.stride + t)]);
      send(std::move(w));
    }
  } else {
    auto positions = shapes_[0].positions;
    for (size_t k = 0; k < input.size(); ++k)
      send({0, static_cast<int>(k) % positions, static_cast<int>(k) / positions, {input[k]}});
  }
  std::vector<int32_t> logits;
  while (!queue.empty()) {
    auto msg = std::move(queue.front());
    queue.pop_front();
    size_t i = msg.layer;
    auto& l = m.layers[i];
    int in_positions = shapes_[i].positions;
    for (auto& u : units[i]) {
      ++counters_.deliveries[i];
      int64_t ops = 0;
      // A convolution's value at (filter f, position p) of its output: requantized, then pooled.
      auto pool = [&](int f, int p, int64_t acc) {
        ops += finish_ops;
        uint8_t v = requantize(acc, l.shift);
        int pooled = shapes_[i + 1].positions;
        int q = p / l.pool;
        ops += 1;  // beyond the last whole window?
        if (q >= pooled) return;
        auto at = static_cast<size_t>((f - u.first) * pooled + q);
        ops += pool_ops - 1;
        u.pool_max[at] = std::max(u.pool_max[at], v);
        if (++u.pool_seen[at] < l.pool) return;
        ops += 1;
        send({i + 1, q, f, {u.pool_max[at]}});
      };
      auto window = [&](int p, auto&& value_at) {
        for (int f = u.first; f < u.first + u.count; ++f) {
          int64_t acc = 0;
          for (int c = 0; c < l.inputs; ++c)
            for (int t = 0; t < l.kernel; ++t)
              acc += product(value_at(c, t), l.weights[static_cast<size_t>((f * l.inputs + c) * l.kernel + t)]);
          ops += multiply_ops * static_cast<int64_t>(l.inputs) * l.kernel;
          pool(f, p, acc + l.bias[static_cast<size_t>(f)]);
        }
      };
      // What the pipeline does with the packet; `ops` counts it.
      auto handle = [&] {
        if (l.kind == layer_kind::conv && windowed(m, i))
          return window(msg.position, [&](int c, int t) { return msg.values[static_cast<size_t>(c * l.kernel + t)]; });
        if (l.kind == layer_kind::conv) {
          // A value of the layer before: stored; a position whose channels are all in may
          // complete the windows over it.
          u.buffer[static_cast<size_t>(msg.channel * in_positions + msg.position)] = msg.values[0];
          ops += 5;
          if (++u.arrived[static_cast<size_t>(msg.position)] < l.inputs) return;
          for (int p = std::max(0, (msg.position - l.kernel + l.stride) / l.stride);
               p * l.stride <= msg.position && p < static_cast<int>(u.done.size()); ++p) {
            ops += 2 + 2 * l.kernel;
            if (u.done[static_cast<size_t>(p)]) continue;
            bool complete = true;
            for (int t = 0; t < l.kernel; ++t)
              complete = complete && u.arrived[static_cast<size_t>(p * l.stride + t)] >= l.inputs;
            if (!complete) continue;
            u.done[static_cast<size_t>(p)] = 1;
            ops += static_cast<int64_t>(u.count) * l.inputs * l.kernel;  // buffer reads
            window(p, [&](int c, int t) { return u.buffer[static_cast<size_t>(c * in_positions + p * l.stride + t)]; });
          }
          return;
        }
        // A dense layer: every neuron accumulates the value; the last input finishes them.
        int index = msg.channel * in_positions + msg.position;
        for (int k = 0; k < u.count; ++k)
          u.acc[static_cast<size_t>(k)] +=
              product(msg.values[0], l.weights[static_cast<size_t>((u.first + k) * l.inputs + index)]);
        ops += 4 + 5LL * u.count;
        if (++u.seen < static_cast<uint32_t>(l.inputs)) return;
        if (is_last(m, i)) {
          for (int k = 0; k < u.count; ++k)
            logits.push_back(u.acc[static_cast<size_t>(k)] + l.bias[static_cast<size_t>(u.first + k)]);
          ops += 3LL * u.count + 2LL * (u.count - 1) + 4;
          return;
        }
        for (int k = 0; k < u.count; ++k) {
          ops += 1 + finish_ops + 1;
          auto acc = static_cast<int64_t>(u.acc[static_cast<size_t>(k)]) + l.bias[static_cast<size_t>(u.first + k)];
          send({i + 1, 0, u.first + k, {requantize(acc, l.shift)}});
        }
      };
      handle();
      counters_.ops[i] += static_cast<uint64_t>(ops);
      counters_.max_ops_per_packet[i] = std::max(counters_.max_ops_per_packet[i], ops);
    }
  }
  return logits;
}

std::optional<verdict> switch_chain::process(const packet& p) {
  auto key = flow_key(p);
  auto& slot = flows_[key % flows_.size()];
  if (slot.state.key != key) {
    if (slot.state.key != 0) ++counters_.flows_evicted;
    slot = {};
    slot.state.key = key;
  }
  if (!observe(slot.state, p)) return std::nullopt;
  ++counters_.inference_points;
  verdict v;
  v.point = slot.state.count;
  v.logits = infer(features(p, slot.state));
  v.label = argmax(v.logits);
  slot.votes.resize(v.logits.size(), 0);
  ++slot.votes[static_cast<size_t>(v.label)];
  v.majority = static_cast<int>(std::max_element(slot.votes.begin(), slot.votes.end()) - slot.votes.begin());
  return v;
}

int switch_chain::majority(const packet& p) const {
  auto key = flow_key(p);
  auto& slot = flows_[key % flows_.size()];
  if (slot.state.key != key || slot.votes.empty()) return -1;
  return static_cast<int>(std::max_element(slot.votes.begin(), slot.votes.end()) - slot.votes.begin());
}

}  // namespace sloserve::netnn
