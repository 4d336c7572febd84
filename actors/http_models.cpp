#include "actors/http_models.hpp"

#include <nlohmann/json.hpp>

#include "actors/kserve_call.hpp"
#include "messages/kserve_v2.hpp"

namespace sloserve::http {
namespace {

using json = nlohmann::json;

json tensor_metadata(const std::string& name, const tensor_spec& t) {
  return {{"name", name}, {"datatype", kserve::datatype_name(t.type)}, {"shape", t.shape}};
}

}  // namespace

response model_metadata(const cluster_config& cfg, const std::string& name) {
  auto* p = cfg.find_pipeline(name);
  if (!p) return {404, kserve::error_body("no pipeline '" + name + "'"), "application/json"};
  auto sig = kserve::signature_of(cfg, *p);
  json outputs = json::array();
  for (auto& o : kserve::declared_outputs(sig)) outputs.push_back(tensor_metadata(o.name, o.spec));
  json j{{"name", p->name},
         {"versions", kserve::version_names(*p)},
         {"platform", "ensemble"},  // as its configuration says
         {"inputs", {tensor_metadata(sig.input.name, sig.input.spec)}},
         {"outputs", outputs}};
  return {200, j.dump(), "application/json"};
}

response model_configuration(const cluster_config& cfg, const std::string& name) {
  auto* p = cfg.find_pipeline(name);
  if (!p) return {404, kserve::error_body("no pipeline '" + name + "'"), "application/json"};
  auto c = kserve::config_of(cfg, *p);
  json inputs = json::array(), outputs = json::array(), steps = json::array(), parameters = json::object();
  for (auto& t : c.inputs)
    inputs.push_back({{"name", t.name}, {"data_type", t.data_type}, {"format", "FORMAT_NONE"}, {"dims", t.dims}});
  for (auto& t : c.outputs) outputs.push_back({{"name", t.name}, {"data_type", t.data_type}, {"dims", t.dims}});
  for (auto& s : c.steps) {
    json in = json::object(), out = json::object();
    for (auto& [k, v] : s.input_map) in[k] = v;
    for (auto& [k, v] : s.output_map) out[k] = v;
    steps.push_back({{"model_name", s.model}, {"model_version", -1}, {"input_map", in}, {"output_map", out}});
  }
  for (auto& [k, v] : c.parameters) parameters[k] = {{"string_value", v}};
  return {200,
          json{{"name", c.name},
               {"platform", "ensemble"},
               {"max_batch_size", c.max_batch_size},
               {"input", inputs},
               {"output", outputs},
               {"ensemble_scheduling", {{"step", steps}}},
               {"parameters", parameters}}
              .dump(),
          "application/json"};
}

}  // namespace sloserve::http
