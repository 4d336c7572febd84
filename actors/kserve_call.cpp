#include "actors/kserve_call.hpp"

#include <algorithm>

#include "config/start_layer.hpp"
#include "gpu/image.hpp"

namespace sloserve::kserve {

pipeline_signature signature_of(const cluster_config& cfg, const pipeline& p) {
  auto& root = cfg.models[p.stages[p.roots().front()].model_index];
  pipeline_signature s{{root.input_name, root.input}, {}};
  auto leaves = p.leaves();
  for (auto leaf : leaves) {
    auto& m = cfg.models[p.stages[leaf].model_index];
    s.outputs.push_back({leaves.size() == 1 ? m.output_name : p.stages[leaf].name, m.output});
  }
  return s;
}

expected<prepared_call> prepare_call(const cluster_config& cfg, const pipeline& p, std::vector<tensor> inputs,
                                     uint64_t request_id, call_parameters params) {
  auto& root = cfg.models[p.stages[p.roots().front()].model_index];
  auto started = start_model(cfg, p, params.start_layer, "start_layer");
  if (!started) return fail(started.error());
  const model_spec* from = *started;
  if (!(params.slo_ms >= 0 && params.slo_ms <= 3600e3)) return fail("slo_ms must be in [0, 3600000]");
  if (inputs.size() != 1)
    return fail("pipeline '" + p.name + "' takes one input, '" + root.input_name + "'; the request has " +
                std::to_string(inputs.size()));
  auto& t = inputs.front();
  if (t.name != root.input_name)
    return fail("pipeline '" + p.name + "' has no input '" + t.name + "'; its input is '" + root.input_name + "'");
  prepared_call call;
  // Clients that batch say [1, ...]: the pipeline's tensors are one request each.
  auto& want = from->input.shape;
  call.batched = t.shape.size() == want.size() + 1 && t.shape.front() == 1 &&
                 std::equal(want.begin(), want.end(), t.shape.begin() + 1);
  if (call.batched) t.shape.erase(t.shape.begin());
  for (auto r : p.roots())
    if (auto ok = check_input(t, params.start_layer > 0 ? *from : cfg.models[p.stages[r].model_index]); !ok)
      return fail("input '" + t.name + "': " + ok.error());
  t.name = "input";
  auto sig = signature_of(cfg, p);
  for (auto& name : params.outputs)
    if (std::none_of(sig.outputs.begin(), sig.outputs.end(), [&](auto& o) { return o.name == name; })) {
      std::string names;
      for (auto& o : sig.outputs) names += (names.empty() ? "'" : ", '") + o.name + "'";
      return fail("pipeline '" + p.name + "' has no output '" + name + "'; its outputs are " + names);
    }
  call.outputs = std::move(params.outputs);
  call.request.pipeline = p.name;
  call.request.request_id = request_id;
  call.request.start_layer = params.start_layer;
  call.request.slo_ms = params.slo_ms;
  call.request.inputs = std::move(inputs);
  return call;
}

void shape_outputs(const cluster_config& cfg, const pipeline& p, const prepared_call& call,
                   std::vector<tensor>& outputs) {
  auto leaves = p.leaves();
  if (leaves.size() == 1)
    for (auto& o : outputs) o.name = cfg.models[p.stages[leaves.front()].model_index].output_name;
  if (call.batched)
    for (auto& o : outputs) o.shape.insert(o.shape.begin(), 1);
  if (!call.outputs.empty())
    std::erase_if(outputs, [&](const tensor& o) {
      return std::find(call.outputs.begin(), call.outputs.end(), o.name) == call.outputs.end();
    });
}

}  // namespace sloserve::kserve
