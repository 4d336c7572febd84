#include "loadgen/http_channel.hpp"

#include <array>
#include <boost/asio/connect.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/write.hpp>
#include <optional>

namespace sloserve::http1 {
namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using error_code = boost::system::error_code;

template <class Stream>
class channel_on final : public channel, public std::enable_shared_from_this<channel_on<Stream>> {
 public:
  static constexpr bool tls = !std::is_same_v<Stream, tcp::socket>;

  channel_on(asio::io_context& io, const endpoint& ep) : io_(io), ep_(ep) {}

  void exchange(std::shared_ptr<const outgoing> req, done_fn done) override {
    req_ = std::move(req);
    done_ = std::move(done);
    deadline_ = clock_type::now() + ep_.timeout;
    if (stream_) {
      reused_ = true;
      return write();
    }
    open();
  }

  // Closing the socket ends the pending operation, which then reports the timeout.
  void expire(clock_type::time_point now) override {
    if (!done_ || now < deadline_ || !stream_) return;
    timed_out_ = true;
    error_code ignored;
    lowest().close(ignored);
  }

 private:
  tcp::socket& lowest() {
    if constexpr (tls)
      return stream_->next_layer();
    else
      return *stream_;
  }

  void open() {
    reused_ = false;
    reader_.reset();
    if constexpr (tls) {
      stream_.emplace(io_, *ep_.tls);
      error_code not_an_address;  // SNI names a host, never an address
      asio::ip::make_address(ep_.host, not_an_address);
      if (not_an_address && !SSL_set_tlsext_host_name(stream_->native_handle(), ep_.host.c_str()))
        return finish(error_code(static_cast<int>(::ERR_get_error()), asio::error::get_ssl_category()));
      stream_->set_verify_mode(asio::ssl::verify_peer);
      stream_->set_verify_callback(asio::ssl::host_name_verification(ep_.host));
    } else {
      stream_.emplace(io_);
    }
    deadline_ = clock_type::now() + std::min(ep_.timeout, std::chrono::milliseconds(10000));
    asio::async_connect(lowest(), ep_.at, [self = this->shared_from_this()](error_code ec, const tcp::endpoint&) {
      if (ec) return self->finish(ec);
      self->lowest().set_option(tcp::no_delay(true), ec);
      self->deadline_ = clock_type::now() + self->ep_.timeout;
      if constexpr (tls) {
        self->stream_->async_handshake(asio::ssl::stream_base::client, [self](error_code ec) {
          if (ec) return self->finish(ec);
          self->write();
        });
      } else {
        self->write();
      }
    });
  }

  void write() {
    std::array<asio::const_buffer, 2> parts{asio::buffer(req_->head),
                                            asio::buffer(req_->tail.data(), req_->tail.size())};
    asio::async_write(*stream_, parts, [self = this->shared_from_this()](error_code ec, size_t) {
      if (ec) return self->failed(ec);
      self->read();
    });
  }

  void read() {
    size_t n = reader_.want();
    stream_->async_read_some(asio::buffer(reader_.prepare(n), n),
                             [self = this->shared_from_this()](error_code ec, size_t got) {
                               self->reader_.commit(got);
                               if (ec == asio::error::eof || ec == asio::ssl::error::stream_truncated) {
                                 self->reader_.end();
                               } else if (ec) {
                                 return self->failed(ec);
                               }
                               switch (self->reader_.parse()) {
                                 case http1::response_reader::progress::done:
                                   self->res_ = self->reader_.take();
                                   return self->finish({});
                                 case http1::response_reader::progress::bad:
                                   self->bad_ = true;
                                   return self->finish(asio::error::invalid_argument);
                                 case http1::response_reader::progress::more:
                                   if (ec) return self->failed(ec);
                                   return self->read();
                               }
                             });
  }

  // A stale keep-alive connection is opened again and the request resent.
  void failed(error_code ec) {
    bool stale = ec == asio::error::eof || ec == asio::ssl::error::stream_truncated ||
                 ec == asio::error::connection_reset || ec == asio::error::broken_pipe;
    if (reused_ && stale && !timed_out_ && !reader_.got_some()) {
      drop();
      return open();
    }
    finish(ec);
  }

  void finish(error_code ec) {
    std::string why;
    if (timed_out_)
      why = "no answer within " + std::to_string(ep_.timeout.count()) + " ms";
    else if (bad_)
      why = reader_.why();
    else if (ec)
      why = ec.message();
    if (!why.empty() || !res_.keep_alive) drop();
    timed_out_ = bad_ = false;
    auto done = std::move(done_);
    done_ = nullptr;
    req_.reset();
    if (!why.empty()) res_ = {};
    done(why, res_);
    res_ = {};
  }

  void drop() {
    if (!stream_) return;
    error_code ignored;
    lowest().shutdown(tcp::socket::shutdown_both, ignored);
    lowest().close(ignored);
    stream_.reset();
    reader_.reset();
  }

  asio::io_context& io_;
  const endpoint& ep_;
  std::optional<Stream> stream_;
  http1::response_reader reader_;
  std::shared_ptr<const outgoing> req_;
  answer res_;
  done_fn done_;
  clock_type::time_point deadline_;
  bool reused_ = false, timed_out_ = false, bad_ = false;
};

}  // namespace

std::shared_ptr<channel> make_channel(asio::io_context& io, const endpoint& ep) {
  if (ep.tls) return std::make_shared<channel_on<asio::ssl::stream<tcp::socket>>>(io, ep);
  return std::make_shared<channel_on<tcp::socket>>(io, ep);
}

}  // namespace sloserve::http1
