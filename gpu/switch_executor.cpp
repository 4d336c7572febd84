// The switch device: a chain of programmable switches running a NetNN model in its data plane
// (gpu/netnn/switch_chain.hpp), within the device's limits. Each request is one packet; the chain
// keeps its flows' state across requests, as a switch's registers do.

#include <fmt/format.h>

#include <cstring>
#include <map>

#include "config/cluster_config.hpp"
#include "gpu/executor.hpp"
#include "gpu/netnn/dataset.hpp"

namespace sloserve {

namespace {

class switch_executor final : public device_executor {
 public:
  explicit switch_executor(netnn::switch_limits limits, int tier_switches)
      : limits_(limits), tier_switches_(tier_switches) {}
  device_kind kind() const override { return device_kind::network_switch; }

  void unload(const std::string& model) override { chains_.erase(model); }

  status load(const model_spec& m) override {
    if (chains_.count(m.name)) return {};
    if (m.netnn.empty())
      return fail("model '" + m.name + "' is no NetNN model (models[].netnn): a switch runs only those");
    auto model = netnn::read_model(m.netnn);
    if (!model) return fail("model '" + m.name + "': " + model.error());
    auto plan = netnn::map_model(*model, limits_, tier_switches_);
    if (!plan) return fail("model '" + m.name + "' does not fit this switch device: " + plan.error());
    auto classes = model->layers.back().outputs;
    if (m.output.shape != std::vector<int64_t>{classes + 3})
      return fail(
          fmt::format("model '{}' has {} classes: its output must be float32 [{}]", m.name, classes, classes + 3));
    chains_.emplace(m.name, netnn::switch_chain(std::move(*model), limits_, tier_switches_));
    return {};
  }

  batch_outcome execute(const model_spec& m, const std::vector<const std::vector<tensor>*>& inputs) override {
    batch_outcome out;
    if (auto loaded = load(m); !loaded) {
      out.error = loaded.error();
      return out;
    }
    auto& chain = chains_.at(m.name);
    auto width = m.output.shape[0];
    for (auto* in : inputs) {
      auto p = netnn::packet_of(reinterpret_cast<const uint8_t*>(in->front().data.data()));
      std::vector<float> row(static_cast<size_t>(width), 0.0f);
      if (auto v = chain.process(p)) {
        for (size_t k = 0; k < v->logits.size(); ++k) row[k] = static_cast<float>(v->logits[k]);
        row[static_cast<size_t>(width - 3)] = static_cast<float>(v->label);
        row[static_cast<size_t>(width - 2)] = static_cast<float>(v->majority);
        row[static_cast<size_t>(width - 1)] = static_cast<float>(v->point);
      } else {
        row[static_cast<size_t>(width - 3)] = -1;
        row[static_cast<size_t>(width - 2)] = static_cast<float>(chain.majority(p));
        row[static_cast<size_t>(width - 1)] = 0;
      }
      char* at = nullptr;
      auto data = bytes::allocate(row.size() * sizeof(float), at);
      std::memcpy(at, row.data(), row.size() * sizeof(float));
      out.outputs.push_back({tensor{m.output_name, dtype::float32, m.output.shape, std::move(data)}});
    }
    // A switch runs at line rate: the device is busy for the model's profile.
    out.busy =
        std::chrono::nanoseconds(static_cast<int64_t>(m.profile.latency_ms_at(static_cast<int>(inputs.size())) * 1e6));
    return out;
  }

 private:
  netnn::switch_limits limits_;
  int tier_switches_;
  std::map<std::string, netnn::switch_chain> chains_;
};

}  // namespace

std::unique_ptr<device_executor> make_switch_executor(const device_group& g) {
  netnn::switch_limits l;
  l.pipelines = g.pipelines;
  l.stages = g.stages;
  l.register_bytes_per_stage = static_cast<int64_t>(g.register_kb_per_stage) << 10;
  l.table_bytes_per_stage = static_cast<int64_t>(g.table_kb_per_stage) << 10;
  l.ops_per_packet = g.ops_per_packet;
  l.flow_slots = g.flow_slots;
  return std::make_unique<switch_executor>(l, g.tier_switches);
}

}  // namespace sloserve
