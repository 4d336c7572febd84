#pragma once
// The load client over the KServe v2 HTTP ingress (`load --protocol http`): the lane's frames
// become HTTP requests on a few keep-alive connections, and the answers come back as frames, so
// the lane measures every ingress the same way.

#include <memory>

#include "loadgen/options.hpp"
#include "loadgen/socket.hpp"

namespace sloserve {

// `connections` keep-alive connections, each with one request in flight: requests beyond them
// wait (as a client's would). Requests carry their input through the binary tensor extension
// and ask for binary outputs; status requests become GET /v2/health/ready.
std::unique_ptr<load_connection> make_http_connection(const load_options& o, size_t connections);

// Connections a run over HTTP opens in all: the closed loop's concurrency, else 64.
size_t http_connections(const load_options& o);

}  // namespace sloserve
