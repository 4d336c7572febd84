#pragma once
// What both KServe v2 ingresses (HTTP and gRPC) do around the frontend: a pipeline's signature
// as the protocol shows it, a request's inputs checked and turned into a client request, and the
// reply's outputs named and shaped as the client sent them.

#include <string>
#include <vector>

#include "config/cluster_config.hpp"
#include "messages/types.hpp"
#include "pipelines/expected.hpp"

namespace sloserve::kserve {

struct tensor_signature {
  std::string name;
  tensor_spec spec;
};

// The pipeline's input (its root model's, named `models[].input.name`) and outputs (its leaves'
// models': named `models[].output.name` for one leaf, after the leaf stages for several). A leaf
// invoked once per row of an earlier stage's output (a `fanout` stage or one after it) answers
// its invocations stacked: its shape has a leading -1 ([k, ...], k >= 0).
struct pipeline_signature {
  tensor_signature input;
  std::vector<tensor_signature> outputs;
};
pipeline_signature signature_of(const cluster_config& cfg, const pipeline& p);

// A request for `p` as the frontend takes it, and how to give its reply back.
struct prepared_call {
  msg::client_request request;
  bool batched = false;              // the client sent [1, ...shape]: outputs get the leading 1 too
  std::vector<std::string> outputs;  // the outputs the client asked for, by name; empty: all
};

// What a request may say of itself in its parameters: the layer a partitioned model's server
// starts at (Graft; 0: the whole model), and its own SLO (0: the pipeline's).
struct call_parameters {
  uint32_t start_layer = 0;
  double slo_ms = 0;
  std::vector<std::string> outputs{};  // the request's `outputs`, by name; empty: all
};

// The pipelines' one version, until models have versions: what `versions` lists, and what the
// version paths and fields accept (empty: the request names none).
inline bool known_version(const std::string& v) {
  return v.empty() || v == "1";
}

// Checks `inputs` (one tensor, named as the pipeline's input, with the declared shape or the
// declared shape behind a batch of 1, as the model takes it; from a later start layer, as that
// layer takes it) and the outputs asked for (each one of the signature's); the error is the
// client's fault.
expected<prepared_call> prepare_call(const cluster_config& cfg, const pipeline& p, std::vector<tensor> inputs,
                                     uint64_t request_id, call_parameters params = {});

// Whether a query invokes `stage` of `p` once per row of an earlier stage's output: it or a stage
// it follows alone has a `fanout`.
bool invoked_per_row(const pipeline& p, size_t stage);

// Turns the frontend's results (one tensor per leaf invocation, named by its stage) into the
// signature's outputs: each once, in the signature's order, named as it names them, a leaf
// invoked per row stacked along a leading dimension; restores the client's batch dimension; and
// keeps the outputs the client asked for.
void shape_outputs(const cluster_config& cfg, const pipeline& p, const prepared_call& call,
                   std::vector<tensor>& outputs);

}  // namespace sloserve::kserve
