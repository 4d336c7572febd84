#pragma once
// One keep-alive HTTP/1.1 connection of the load client (`load --protocol http`), plaintext or
// TLS: a request written by hand with the tensor's bytes after it by reference, the response
// read by http1::response_reader.

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "loadgen/http_reader.hpp"
#include "pipelines/bytes.hpp"

namespace sloserve::http1 {

using clock_type = std::chrono::steady_clock;

// A request as it goes on the wire: the request line, headers and the start of the body written
// by hand, then the tensor's bytes by reference (no copy into the request).
struct outgoing {
  std::string head;
  bytes tail;
};
// Why the exchange failed (empty: it did not), and the response.
using done_fn = std::function<void(const std::string& why, answer&)>;

// Where the channels connect and how long an exchange may take.
struct endpoint {
  boost::asio::ip::tcp::resolver::results_type at;
  std::string host;                          // for TLS: the name (or address) the certificate must name
  boost::asio::ssl::context* tls = nullptr;  // null: plaintext
  std::chrono::milliseconds timeout{60000};
};

// One keep-alive connection with one exchange at a time, opened on first use and again after the
// server closed it. A request on a reused connection that the server had closed meanwhile (its
// idle timeout) is sent once more on a fresh one: the server read none of it. An exchange past
// its deadline is ended by expire(), which the connection calls for every channel twice a second.
class channel {
 public:
  virtual ~channel() = default;
  virtual void exchange(std::shared_ptr<const outgoing> req, done_fn done) = 0;
  virtual void expire(clock_type::time_point now) = 0;
};

// A channel to `ep` driven by `io`: TLS where `ep.tls` is set. `ep` outlives it.
std::shared_ptr<channel> make_channel(boost::asio::io_context& io, const endpoint& ep);

}  // namespace sloserve::http1
