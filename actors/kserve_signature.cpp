// What the KServe ingresses show of a pipeline: its signature (input and outputs), its
// configuration as Triton's ensemble, and its versions.
#include <algorithm>
#include <cstdio>

#include "actors/kserve_call.hpp"
#include "messages/kserve_v2.hpp"

namespace sloserve::kserve {

pipeline_signature signature_of(const cluster_config& cfg, const pipeline& p) {
  auto& root = cfg.models[p.stages[p.roots().front()].model_index];
  pipeline_signature s{{root.input_name, root.input, p.stages[p.roots().front()].model_index}, {}};
  auto leaves = p.leaves();
  for (auto leaf : leaves) {
    auto& m = cfg.models[p.stages[leaf].model_index];
    tensor_signature out{leaves.size() == 1 ? m.output_name : p.stages[leaf].name, m.output,
                         p.stages[leaf].model_index};
    if (invoked_per_row(p, leaf)) out.spec.shape.insert(out.spec.shape.begin(), -1);
    s.outputs.push_back(std::move(out));
  }
  return s;
}

std::vector<tensor_signature> declared_outputs(const pipeline_signature& s) {
  std::vector<tensor_signature> out;
  for (auto& o : s.outputs) {
    out.push_back(o);
    if (!o.spec.shape.empty() && o.spec.shape.front() < 0)
      out.push_back({o.name + rows_suffix, tensor_spec{dtype::int64, {}}, o.model});
  }
  return out;
}

std::string triton_type(dtype t) {
  auto name = datatype_name(t);
  return name == "BYTES" ? "TYPE_STRING" : "TYPE_" + std::string(name);
}

model_config config_of(const cluster_config& cfg, const pipeline& p) {
  model_config c;
  c.name = p.name;
  c.max_batch_size = max_batch_items;
  auto sig = signature_of(cfg, p);
  c.inputs.push_back({sig.input.name, triton_type(sig.input.spec.type), sig.input.spec.shape});
  for (auto& o : declared_outputs(sig)) c.outputs.push_back({o.name, triton_type(o.spec.type), o.spec.shape});
  // The tensors between stages are named after the stage that makes them; a leaf's is the
  // pipeline's output.
  auto leaves = p.leaves();
  for (size_t s = 0; s < p.stages.size(); ++s) {
    auto& st = p.stages[s];
    auto& m = cfg.models[st.model_index];
    model_config::step step{m.name, {}, {}};
    step.input_map.emplace_back(m.input_name, st.parents.empty() ? sig.input.name : p.stages[st.parents.front()].name);
    auto leaf = std::find(leaves.begin(), leaves.end(), s);
    step.output_map.emplace_back(
        m.output_name, leaf == leaves.end() ? st.name : sig.outputs[static_cast<size_t>(leaf - leaves.begin())].name);
    c.steps.push_back(std::move(step));
  }
  char slo[32];
  std::snprintf(slo, sizeof slo, "%g", p.slo_ms);
  c.parameters.emplace_back("slo_ms", slo);
  return c;
}

std::optional<uint32_t> version_of(const pipeline& p, const std::string& v) {
  if (v.empty()) return 0;
  if (v.size() > 9 || !std::all_of(v.begin(), v.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return std::nullopt;
  auto n = static_cast<uint32_t>(std::stoul(v));
  auto all = pipeline_versions(p);
  if (std::find(all.begin(), all.end(), n) == all.end()) return std::nullopt;
  return n;
}

std::vector<std::string> version_names(const pipeline& p) {
  std::vector<std::string> out;
  for (auto v : pipeline_versions(p)) out.push_back(std::to_string(v));
  return out;
}

std::string no_version(const pipeline& p, const std::string& v) {
  std::string all;
  for (auto& n : version_names(p)) all += (all.empty() ? "" : ", ") + n;
  return "pipeline '" + p.name + "' has no version '" + v + "'; its versions: " + all;
}

}  // namespace sloserve::kserve
