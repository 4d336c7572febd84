#pragma once
// A KServe v2 gRPC request's parts as sloserve's: its call parameters and its input tensors (typed
// contents or raw bytes, checked against the datatype's range and the shape).

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "actors/kserve_call.hpp"
#include "kserve/grpc_service.grpc.pb.h"
#include "messages/kserve_v2.hpp"

namespace sloserve::grpc_tensors {

expected<kserve::call_parameters> call_parameters_of(const inference::ModelInferRequest& req);
// A request's inputs as sloserve's, with those whose bytes lie in shared-memory regions (Triton's
// extension; their entries in `inputs` have no data, as kserve::infer_request's), and the outputs
// it asks into regions. Raw contents move out of `req` into the tensors (no copy).
struct request_tensors {
  std::vector<tensor> inputs;
  std::vector<std::pair<size_t, shm_ref>> shm_inputs;
  std::map<std::string, shm_ref> shm_outputs;
};
expected<request_tensors> request_tensors_of(inference::ModelInferRequest& req);
// Input `i` of `req`: its bytes `raw` (its raw_input_contents, moved out) or its typed contents,
// or, when `shared`, none (its name, type and shape).
expected<tensor> input_tensor(const inference::ModelInferRequest& req, int i, std::string* raw, bool shared);

}  // namespace sloserve::grpc_tensors
