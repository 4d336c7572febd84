#include "actors/kserve_call.hpp"

#include <algorithm>

#include "config/start_layer.hpp"
#include "gpu/image.hpp"

namespace sloserve::kserve {

bool invoked_per_row(const pipeline& p, size_t stage) {
  for (;;) {
    auto& s = p.stages[stage];
    if (s.fanout) return true;
    if (s.parents.size() != 1) return false;  // a root, or a join: invoked once
    stage = s.parents.front();
  }
}

pipeline_signature signature_of(const cluster_config& cfg, const pipeline& p) {
  auto& root = cfg.models[p.stages[p.roots().front()].model_index];
  pipeline_signature s{{root.input_name, root.input}, {}};
  auto leaves = p.leaves();
  for (auto leaf : leaves) {
    auto& m = cfg.models[p.stages[leaf].model_index];
    tensor_signature out{leaves.size() == 1 ? m.output_name : p.stages[leaf].name, m.output};
    if (invoked_per_row(p, leaf)) out.spec.shape.insert(out.spec.shape.begin(), -1);
    s.outputs.push_back(std::move(out));
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

namespace {

// The tensors of `parts` (each of `spec`'s shape) stacked along a new leading dimension.
tensor stacked(const std::string& name, const tensor_spec& spec, const std::vector<tensor*>& parts) {
  tensor t;
  t.name = name;
  t.type = spec.type;
  t.shape = spec.shape;
  t.shape.insert(t.shape.begin(), static_cast<int64_t>(parts.size()));
  size_t total = 0;
  for (auto* x : parts) total += x->data.size();
  char* out = nullptr;
  t.data = bytes::allocate(total, out);
  for (auto* x : parts) out = std::copy(x->data.begin(), x->data.end(), out);
  return t;
}

}  // namespace

void shape_outputs(const cluster_config& cfg, const pipeline& p, const prepared_call& call,
                   std::vector<tensor>& outputs) {
  // The leaves' results come named by their stage, one per invocation, in the order they ended.
  auto sig = signature_of(cfg, p);
  auto leaves = p.leaves();
  std::vector<tensor> shaped;
  for (size_t k = 0; k < leaves.size(); ++k) {
    auto& stage = p.stages[leaves[k]];
    auto& name = sig.outputs[k].name;
    if (!call.outputs.empty() && std::find(call.outputs.begin(), call.outputs.end(), name) == call.outputs.end())
      continue;
    std::vector<tensor*> parts;
    for (auto& o : outputs)
      if (o.name == stage.name) parts.push_back(&o);
    if (parts.size() == 1 && !invoked_per_row(p, leaves[k])) {
      shaped.push_back(std::move(*parts.front()));
      shaped.back().name = name;
    } else {
      // Invoked once per row of what came before (or, unexpectedly, not once): each invocation's
      // output one row of a [k, ...] tensor, k >= 0.
      shaped.push_back(stacked(name, cfg.models[stage.model_index].output, parts));
    }
    if (call.batched) shaped.back().shape.insert(shaped.back().shape.begin(), 1);
  }
  outputs = std::move(shaped);
}

}  // namespace sloserve::kserve
