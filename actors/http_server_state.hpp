#pragma once
// What the HTTP server's files share (actors/http_server.cpp: accepting and the server's life;
// actors/http_connection.cpp: a connection's requests and answers): the server's state, the
// exchange behind a responder, and how a connection starts.

#include <atomic>
#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <list>
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

struct backstops;

struct exchange : std::enable_shared_from_this<exchange> {
  // The server's list of backstops (set before the handler sees the exchange, then read only).
  std::shared_ptr<backstops> watch;
  std::mutex lock;  // guards what follows
  // The connection awaiting the answer: held until it is given (or the responder is dropped).
  std::shared_ptr<session_base> session;
  bool done = false;
  // The backstop (responder::backstop): what answers at `deadline` unless answered before.
  std::function<response()> fallback;
  std::chrono::steady_clock::time_point deadline;
  // Its place on the list while it waits there (guarded by the list's lock).
  std::list<exchange*>::iterator listed;
  bool is_listed = false;

  ~exchange();
  void answer(std::function<response()> make);
};

// The exchanges waiting with a backstop, swept on a timer: no timer per request. Each is taken
// off when it is answered, when it is due or when it ends, so the list holds what is in flight.
struct backstops {
  std::mutex lock;  // guards the list and the exchanges' places on it
  std::list<exchange*> waiting;

  void add(exchange& x) {
    std::lock_guard g(lock);
    if (!x.is_listed) x.listed = waiting.insert(waiting.end(), &x), x.is_listed = true;
  }
  void remove(exchange& x) {
    std::lock_guard g(lock);
    if (x.is_listed) waiting.erase(x.listed), x.is_listed = false;
  }
  // The exchanges past their deadline at `now`, taken off the list.
  std::vector<std::shared_ptr<exchange>> due(std::chrono::steady_clock::time_point now) {
    std::vector<std::shared_ptr<exchange>> out;
    std::lock_guard g(lock);
    for (auto it = waiting.begin(); it != waiting.end();) {
      auto* x = *it;
      if (x->deadline > now) {
        ++it;
        continue;
      }
      x->is_listed = false;
      it = waiting.erase(it);
      // Null when it is ending: its destructor waits on this lock, and finds it off the list.
      if (auto held = x->weak_from_this().lock()) out.push_back(std::move(held));
    }
    return out;
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
  // Every request's backstop, swept every `sweep_every` on the first thread.
  std::shared_ptr<detail::backstops> backstops = std::make_shared<detail::backstops>();
  std::optional<asio::steady_timer> sweep;
  static constexpr std::chrono::milliseconds sweep_every{100};

  std::mutex lock;  // guards what follows
  std::map<std::string, int> per_address;
  int connections = 0;
  std::set<std::weak_ptr<session_base>, std::owner_less<>> open;
  bool stopping = false;

  void refused(std::string_view why) {
    if (opts.refused) opts.refused(why);
  }
  void accept();
  void sweep_backstops();
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
