#include "messages/endpoint.hpp"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>

namespace sloserve {

namespace {

bool ip_literal(const std::string& host) {
  in_addr v4{};
  in6_addr v6{};
  auto bare = host.size() > 2 && host.front() == '[' && host.back() == ']' ? host.substr(1, host.size() - 2) : host;
  return inet_pton(AF_INET, bare.c_str(), &v4) == 1 || inet_pton(AF_INET6, bare.c_str(), &v6) == 1;
}

}  // namespace

std::string bindable_host(const std::string& host) {
  if (host.empty() || host == "*" || ip_literal(host)) return host;
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), nullptr, &hints, &found) != 0 || !found) return "*";
  bool loopback = true;
  for (auto* a = found; a; a = a->ai_next) {
    auto ip = ntohl(reinterpret_cast<sockaddr_in*>(a->ai_addr)->sin_addr.s_addr);
    loopback = loopback && (ip >> 24) == 127;
  }
  freeaddrinfo(found);
  return loopback ? "127.0.0.1" : "*";
}

std::string bind_endpoint(const std::string& address) {
  const std::string scheme = "tcp://";
  if (address.rfind(scheme, 0) != 0) return address;
  auto colon = address.rfind(':');
  if (colon == std::string::npos || colon < scheme.size()) return address;
  auto host = address.substr(scheme.size(), colon - scheme.size());
  return scheme + bindable_host(host) + address.substr(colon);
}

}  // namespace sloserve
