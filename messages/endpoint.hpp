#pragma once
// Addresses that name hosts. A node's address (`nodes[].address`) may name its host, as
// deployment files do (`tcp://ctl:7100`, `tcp://localhost:7100`): peers connect to the name, but
// ZeroMQ binds only to interfaces and IP addresses. These turn a name into what can be bound.

#include <string>

namespace sloserve {

// The IPv4 address to bind for `host`: an IP literal or `*` as it is; a name that resolves only
// to loopback addresses (localhost) 127.0.0.1; any other name `*`, every interface (the name may
// be a service's address that routes to this host, as in Kubernetes and Compose).
std::string bindable_host(const std::string& host);

// `address` (tcp://HOST:PORT) with its host made bindable (bindable_host); anything else as it is.
std::string bind_endpoint(const std::string& address);

}  // namespace sloserve
