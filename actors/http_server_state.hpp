#pragma once
// What the HTTP server's files share (actors/http_server.cpp: accepting and the server's life;
// actors/http_connection.cpp: a connection's requests and answers): the server's state, the
// exchange behind a responder, and how a connection starts.

#include <atomic>
#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include "actors/http_server.hpp"

namespace sloserve::http {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using error_code = boost::system::error_code;
// A connection's socket, bound to its thread's context by type (no type-erased executor on the
// path of every read and write).
using socket_t = asio::basic_stream_socket<tcp, asio::io_context::executor_type>;

// The body of a refusal the server writes itself.
std::string error_json(std::string_view what);

class session_base {
 public:
  virtual ~session_base() = default;
  // Makes the response on the connection's thread, then writes it.
  virtual void deliver(std::function<response()> make) = 0;
  virtual void close() = 0;
};

namespace detail {

struct exchange {
  std::shared_ptr<asio::io_context> io;  // first: outlives the timer
  std::mutex lock;                       // guards what follows
  // The connection awaiting the answer: held until it is given (or the responder is dropped).
  std::shared_ptr<session_base> session;
  bool done = false;
  std::optional<asio::steady_timer> timer;

  void answer(std::function<response()> make) {
    std::shared_ptr<session_base> s;
    {
      std::lock_guard g(lock);
      if (done) return;
      done = true;
      s = std::move(session);
      if (timer) timer->cancel();
    }
    if (s) s->deliver(std::move(make));
  }
};

}  // namespace detail

struct server::impl : std::enable_shared_from_this<server::impl> {
  server_options opts;
  handler on_request;
  // One context per I/O thread, each connection on one of them (no strands, no hand-offs between
  // the threads); the acceptor on the first.
  std::vector<std::shared_ptr<asio::io_context>> ios;
  size_t next_io = 0;  // where the next connection goes (the acceptor's thread only)
  std::vector<asio::executor_work_guard<asio::io_context::executor_type>> work;
  std::optional<tcp::acceptor> acceptor;
  std::optional<asio::ssl::context> tls;
  std::vector<std::thread> threads;

  std::mutex lock;  // guards what follows
  std::map<std::string, int> per_address;
  int connections = 0;
  std::set<std::weak_ptr<session_base>, std::owner_less<>> open;
  bool stopping = false;

  void refused(std::string_view why) {
    if (opts.refused) opts.refused(why);
  }
  void accept();
  void on_accept(socket_t socket, const std::shared_ptr<asio::io_context>& io);
  // Takes a connection from `address` into the counts; false (nothing counted) past a limit, with why.
  bool admit(const std::string& address, std::string_view& why) {
    std::lock_guard g(lock);
    if (stopping) return why = "connections", false;
    if (connections >= opts.max_connections) return why = "connections", false;
    auto& n = per_address[address];
    if (opts.connections_per_address > 0 && n >= opts.connections_per_address) {
      if (n == 0) per_address.erase(address);
      return why = "connections_per_address", false;
    }
    ++n, ++connections;
    return true;
  }
  void release(const std::string& address) {
    std::lock_guard g(lock);
    --connections;
    if (auto it = per_address.find(address); it != per_address.end() && --it->second <= 0) per_address.erase(it);
  }
};

// Serves the connection `socket` (on `io`) from `remote` (TLS when the server has a context); the
// connection, which keeps itself alive while it has work.
std::shared_ptr<session_base> start_session(std::shared_ptr<server::impl> srv, std::shared_ptr<asio::io_context> io,
                                            socket_t socket, std::string remote);

}  // namespace sloserve::http
