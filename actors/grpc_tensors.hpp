#pragma once
// A KServe v2 gRPC request's parts as sloserve's: its call parameters and its input tensors (typed
// contents or raw bytes, checked against the datatype's range and the shape).

#include <string>

#include "actors/kserve_call.hpp"
#include "kserve/grpc_service.grpc.pb.h"
#include "messages/kserve_v2.hpp"

namespace sloserve::grpc_tensors {

expected<kserve::call_parameters> call_parameters_of(const inference::ModelInferRequest& req);
// Input `i` of `req`.
expected<tensor> input_tensor(const inference::ModelInferRequest& req, int i);

}  // namespace sloserve::grpc_tensors
