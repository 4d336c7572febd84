#include "actors/http_server.hpp"

#include "actors/http_server_state.hpp"

namespace sloserve::http {

void server::impl::accept() {
  auto io = ios[next_io++ % ios.size()];
  auto peer = std::make_shared<socket_t>(io->get_executor());
  acceptor->async_accept(*peer, [self = shared_from_this(), io, peer](error_code ec) {
    if (ec == asio::error::operation_aborted || !self->acceptor->is_open()) return;
    if (!ec) self->on_accept(std::move(*peer), io);
    self->accept();
  });
}

void server::impl::sweep_backstops() {
  sweep->expires_after(sweep_every);
  sweep->async_wait([weak = weak_from_this()](error_code ec) {
    auto self = weak.lock();
    if (ec || !self) return;
    for (auto& x : self->backstops->due(std::chrono::steady_clock::now())) x->answer(std::move(x->fallback));
    self->sweep_backstops();
  });
}

void server::impl::on_accept(socket_t socket, const std::shared_ptr<asio::io_context>& io) {
  error_code ec;
  auto peer = socket.remote_endpoint(ec);
  if (ec) return;
  auto address = peer.address().to_string();
  std::string_view why;
  if (!admit(address, why)) {
    refused(why);
    if (!tls) {
      // A plain client reads why, if it reads at once; nobody waits for it to.
      auto body = error_json("too many connections from " + address);
      auto text =
          "HTTP/1.1 429 Too Many Requests\r\nContent-Type: application/json\r\nConnection: close\r\n"
          "Content-Length: " +
          std::to_string(body.size()) + "\r\n\r\n" + body;
      socket.non_blocking(true, ec);
      socket.write_some(asio::buffer(text), ec);
      if (opts.replied) opts.replied(429);
    }
    socket.shutdown(tcp::socket::shutdown_both, ec);
    socket.close(ec);
    return;
  }
  socket.set_option(tcp::no_delay(true), ec);  // a reply goes out whole at once, not after a delayed ACK
  auto s = start_session(shared_from_this(), io, std::move(socket), address);
  std::lock_guard g(lock);
  std::erase_if(open, [](auto& w) { return w.expired(); });
  open.insert(s);
}

server::server(server_options options, handler h) : impl_(std::make_shared<impl>()) {
  impl_->opts = std::move(options);
  impl_->on_request = std::move(h);
}

server::~server() {
  stop();
}

expected<int> server::start(const std::string& host, int port) {
  auto& s = *impl_;
  try {
    if (!s.opts.tls_cert.empty() && !s.opts.tls_key.empty()) {
      s.tls.emplace(asio::ssl::context::tls_server);
      s.tls->set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 |
                         asio::ssl::context::no_sslv3 | asio::ssl::context::no_tlsv1 | asio::ssl::context::no_tlsv1_1);
      s.tls->use_certificate_chain_file(s.opts.tls_cert);
      s.tls->use_private_key_file(s.opts.tls_key, asio::ssl::context::pem);
    }
  } catch (const std::exception& e) {
    return fail("http: cannot use TLS certificate " + s.opts.tls_cert + " with key " + s.opts.tls_key + ": " +
                e.what());
  }
  try {
    s.ios.clear();
    for (int i = 0; i < std::max(1, s.opts.io_threads); ++i) s.ios.push_back(std::make_shared<asio::io_context>(1));
    tcp::resolver resolver(*s.ios.front());
    auto found = resolver.resolve(host == "*" ? "0.0.0.0" : host, std::to_string(port), tcp::resolver::passive);
    if (found.empty()) return fail("http: cannot resolve " + host);
    s.acceptor.emplace(*s.ios.front());
    auto endpoint = found.begin()->endpoint();
    s.acceptor->open(endpoint.protocol());
    s.acceptor->set_option(asio::socket_base::reuse_address(true));
    s.acceptor->bind(endpoint);
    s.acceptor->listen(asio::socket_base::max_listen_connections);
  } catch (const std::exception& e) {
    return fail("http: cannot bind " + host + ":" + std::to_string(port) + ": " + e.what());
  }
  int bound = s.acceptor->local_endpoint().port();
  for (auto& io : s.ios) s.work.push_back(asio::make_work_guard(*io));
  s.accept();
  s.sweep.emplace(*s.ios.front());
  s.sweep_backstops();
  for (auto& io : s.ios) s.threads.emplace_back([io] { io->run(); });
  return bound;
}

void server::stop() {
  auto& s = *impl_;
  if (s.threads.empty()) return;
  std::vector<std::shared_ptr<session_base>> open;
  {
    std::lock_guard g(s.lock);
    s.stopping = true;
    for (auto& w : s.open)
      if (auto one = w.lock()) open.push_back(one);
    s.open.clear();
  }
  asio::post(s.acceptor->get_executor(), [self = impl_] {
    error_code ec;
    self->acceptor->close(ec);
    self->sweep->cancel();
  });
  for (auto& one : open) one->close();
  open.clear();
  s.work.clear();
  for (auto& io : s.ios) io->stop();
  for (auto& t : s.threads) t.join();
  s.threads.clear();
  // What was queued (the closes, the aborted accept and reads) runs here; timers left waiting
  // are dropped with the contexts. Answers that come later find their connection gone.
  for (auto& io : s.ios) {
    io->restart();
    io->poll();
  }
}

}  // namespace sloserve::http
