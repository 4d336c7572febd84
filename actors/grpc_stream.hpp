#pragma once
// Triton's streaming inference over gRPC (ModelStreamInfer): a client sends requests on one
// stream and reads one reply per request, in the order they finish, each naming its request by
// `id`. A request the server refuses gets a reply whose error_message says why (its
// infer_response carrying the id), and the stream goes on; the stream ends once the client has
// stopped sending and every reply is written.

#include <grpcpp/grpcpp.h>

#include <functional>
#include <string>

#include "kserve/grpc_service.grpc.pb.h"

namespace sloserve::grpc_stream {

// Runs one request of the stream: fills `res` and calls `done` once with the outcome, on any
// thread. The request is the stream's to give: its contents may be moved out.
using infer_fn = std::function<void(inference::ModelInferRequest& req, inference::ModelInferResponse* res,
                                    std::function<void(const grpc::Status&)> done)>;

// A reactor for one ModelStreamInfer call, which deletes itself when the call is done. With
// `refused` (why the call is not admitted: a missing or unknown token), it ends the call
// UNAUTHENTICATED at once.
grpc::ServerBidiReactor<inference::ModelInferRequest, inference::ModelStreamInferResponse>* open(
    infer_fn infer, const std::string& refused);

}  // namespace sloserve::grpc_stream
