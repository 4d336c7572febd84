#pragma once
// HTTP/1.1 responses read from what a keep-alive connection receives, for the load client: the
// status, whether the connection stays open, the body (by Content-Length, chunked, or until the
// server closes) and the KServe v2 binary extension's Inference-Header-Content-Length. Bytes are
// read straight into the reader's buffer; bytes past one response stay for the next.

#include <cstddef>
#include <optional>
#include <string>

namespace sloserve::http1 {

struct answer {
  int status = 0;
  bool keep_alive = true;
  std::optional<size_t> inference_header;  // Inference-Header-Content-Length
  std::string body;
};

class response_reader {
 public:
  enum class progress { more, done, bad };

  explicit response_reader(size_t max_head = 64 * 1024) : max_head_(max_head) {}

  // Where to read the next bytes into: `n` writable bytes, valid until commit().
  char* prepare(size_t n);
  // `n` bytes were read into what prepare() gave.
  void commit(size_t n) { used_ += n; }
  // How many bytes to ask the socket for next: what the body still needs, at least 16 KiB.
  size_t want() const;
  // The server closed the connection: a body read until the close is whole.
  void end() { ended_ = true; }

  // Parses what has arrived: a whole response (take() it), more to read, or a response that is
  // not HTTP/1.x (why()).
  progress parse();
  const std::string& why() const { return why_; }
  // The response parse() found whole; the reader is ready for the next one.
  answer take();

  // Whether any byte of the current response has arrived.
  bool got_some() const { return used_ > 0; }
  // Forgets everything (a fresh connection).
  void reset();

 private:
  enum class state { head, length, chunk_size, chunk_data, trailers, until_close, done };
  progress head();
  progress chunks();
  progress fail(std::string why);

  size_t max_head_;
  std::string buf_;
  size_t used_ = 0;      // valid bytes in buf_
  size_t cursor_ = 0;    // where parsing goes on
  size_t consumed_ = 0;  // bytes of buf_ the response took, once done
  size_t need_ = 0;      // state length: the body's length; chunk_data: the chunk's
  bool ended_ = false;
  state state_ = state::head;
  answer a_;
  std::string why_;
};

}  // namespace sloserve::http1
