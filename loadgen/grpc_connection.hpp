#pragma once
// The load client over the KServe v2 gRPC ingress (`load --protocol grpc`): the lane's frames
// become ModelInfer calls on one HTTP/2 channel (raw_input_contents in, raw outputs back), all
// in flight at once, and the answers come back as frames, so that the lane measures every
// ingress the same way.

#include <memory>

#include "loadgen/options.hpp"
#include "loadgen/socket.hpp"

namespace sloserve {

// Status requests become ServerReady calls.
std::unique_ptr<load_connection> make_grpc_connection(const load_options& o);

}  // namespace sloserve
