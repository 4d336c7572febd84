#pragma once
// An event-driven HTTP/1.1 server (Boost.Beast on Asio), with TLS when given a certificate. A few
// threads serve every connection: one that is slow to send its request costs a socket and its
// buffer, not a thread. Each connection must send a whole request (headers and body) within
// `request_timeout` of waiting for it, or it is closed; one address may hold at most
// `connections_per_address` connections at once; a body over `max_body_bytes` is a 413. What is
// refused before a handler sees it is told to `refused`, with why.
//
// Handlers run on the connection's thread and must not block: what waits goes to a pool of the
// handler's own, or answers later. They answer through a `responder`, at once or later from any
// thread (an answer the frontend actor gives); the connection reads its next request once the
// answer is written.

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "pipelines/expected.hpp"

namespace sloserve::http {

struct request {
  std::string method;  // GET, POST, ...
  std::string path;    // the target without its query, percent-decoded
  std::string body;
  std::string remote;  // the client's address
  std::vector<std::pair<std::string, std::string>> headers;
  // The value of header `name` (any case); null when it has none.
  const std::string* header(std::string_view name) const;
};

// `path` with its %XX escapes decoded (RFC 3986: a model or region named "in frames" is asked
// for as in%20frames); nothing when an escape is not two hex digits.
std::optional<std::string> percent_decoded(std::string_view path);

struct response {
  int status = 200;
  std::string body;
  std::string content_type = "application/json";
  std::vector<std::pair<std::string, std::string>> headers{};
};

namespace detail {
struct exchange;
}

// Answers one request: the first answer counts, later ones are ignored. Any thread may answer.
class responder {
 public:
  explicit responder(std::shared_ptr<detail::exchange> x) : x_(std::move(x)) {}
  void operator()(response r) const;
  // The response `make` returns, made on the connection's thread (not the caller's).
  void operator()(std::function<response()> make) const;
  // Unless answered by then, answers what `fallback` makes `after` from now (made only then).
  void backstop(std::chrono::milliseconds after, std::function<response()> fallback) const;

 private:
  std::shared_ptr<detail::exchange> x_;
};

using handler = std::function<void(request, responder)>;

struct server_options {
  size_t max_body_bytes = 64 << 20;
  std::chrono::milliseconds request_timeout{10000};  // to read one request whole, from when it is awaited
  std::chrono::milliseconds write_timeout{10000};    // to write one response
  int connections_per_address = 256;                 // 0: no limit
  int max_connections = 8192;                        // in all
  int io_threads = 2;
  std::string tls_cert, tls_key;  // both set: TLS
  // A connection or request refused before any handler saw it: connections_per_address,
  // connections, request_timeout, too_large, bad_request, tls_handshake.
  std::function<void(std::string_view why)> refused{};
  // The status of each response written, the refusals' included.
  std::function<void(int status)> replied{};
};

class server {
 public:
  server(server_options options, handler h);
  ~server();
  server(const server&) = delete;
  server& operator=(const server&) = delete;

  // Binds HOST:PORT (port 0: any free one) and serves until stop(); the port it bound.
  expected<int> start(const std::string& host, int port);
  // Stops accepting, closes every connection and waits for the threads.
  void stop();

  struct impl;  // its state, which its connections share (http_server.cpp)

 private:
  std::shared_ptr<impl> impl_;
};

}  // namespace sloserve::http
