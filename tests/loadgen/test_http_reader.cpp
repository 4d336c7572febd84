#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "loadgen/http_reader.hpp"

using sloserve::http1::answer;
using sloserve::http1::response_reader;
using progress = response_reader::progress;

namespace {

// Feeds `wire` to `r` in pieces of `step` bytes; the responses it reads whole, in order.
std::vector<answer> read_all(response_reader& r, const std::string& wire, size_t step, bool close_at_end = false) {
  std::vector<answer> out;
  for (size_t at = 0; at < wire.size();) {
    size_t n = std::min(step, wire.size() - at);
    std::memcpy(r.prepare(n), wire.data() + at, n);
    r.commit(n);
    at += n;
    if (at == wire.size() && close_at_end) r.end();
    progress p;
    while ((p = r.parse()) == progress::done) out.push_back(r.take());
    EXPECT_NE(p, progress::bad) << r.why();
  }
  return out;
}

}  // namespace

TEST(http_reader, a_body_by_length_arrives_whole_in_any_pieces_and_the_next_response_follows) {
  std::string wire =
      "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nInference-Header-Content-Length: 3\r\n\r\nabcde"
      "HTTP/1.1 429 Too Many Requests\r\ncontent-length: 2\r\n\r\nno";
  for (size_t step : {1, 2, 7, 1000}) {
    response_reader r;
    auto got = read_all(r, wire, step);
    ASSERT_EQ(got.size(), 2u) << step;
    EXPECT_EQ(got[0].status, 200);
    EXPECT_EQ(got[0].body, "abcde");
    EXPECT_EQ(got[0].inference_header, 3u);
    EXPECT_TRUE(got[0].keep_alive);
    EXPECT_EQ(got[1].status, 429);
    EXPECT_EQ(got[1].body, "no");
    EXPECT_FALSE(got[1].inference_header);
  }
}

TEST(http_reader, chunked_bodies_with_extensions_and_trailers_are_joined) {
  std::string wire =
      "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4;x=y\r\nabcd\r\nA\r\n0123456789\r\n0\r\nX-T: 1\r\n\r\n"
      "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n";
  for (size_t step : {1, 3, 1000}) {
    response_reader r;
    auto got = read_all(r, wire, step);
    ASSERT_EQ(got.size(), 2u) << step;
    EXPECT_EQ(got[0].body, "abcd0123456789");
    EXPECT_EQ(got[1].body, "");
  }
}

TEST(http_reader, connection_close_http_1_0_and_a_body_until_the_close) {
  response_reader r;
  auto got = read_all(r, "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 1\r\n\r\nx", 4);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_FALSE(got[0].keep_alive);

  response_reader old;
  got = read_all(old, "HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 0\r\n\r\n", 5);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_TRUE(got[0].keep_alive);

  response_reader until_close;
  got = read_all(until_close, "HTTP/1.0 500 Oops\r\n\r\nall of it", 3, true);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].status, 500);
  EXPECT_EQ(got[0].body, "all of it");
  EXPECT_FALSE(got[0].keep_alive);
}

TEST(http_reader, an_interim_response_is_skipped_and_204_has_no_body) {
  response_reader r;
  auto got = read_all(
      r, "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nz",
      6);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].status, 204);
  EXPECT_EQ(got[1].body, "z");
}

TEST(http_reader, a_large_body_is_read_where_it_goes_and_wants_what_is_left) {
  std::string body(600 * 1024, 'q');
  std::string wire = "HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
  response_reader r;
  size_t at = 0, reads = 0;
  progress p = progress::more;
  while (p == progress::more) {
    size_t n = std::min(r.want(), wire.size() - at);
    std::memcpy(r.prepare(n), wire.data() + at, n);
    r.commit(n);
    at += n;
    ++reads;
    p = r.parse();
  }
  ASSERT_EQ(p, progress::done);
  EXPECT_EQ(reads, 2u);  // the head's first 16 KiB, then the rest of the body at once
  EXPECT_EQ(r.take().body, body);
}

TEST(http_reader, what_is_not_http_or_ends_early_is_refused_with_the_reason) {
  auto refused = [](const std::string& wire, bool close) {
    response_reader r(64);
    std::memcpy(r.prepare(wire.size()), wire.data(), wire.size());
    r.commit(wire.size());
    if (close) r.end();
    EXPECT_EQ(r.parse(), progress::bad) << wire;
    return r.why();
  };
  EXPECT_NE(refused("SSH-2.0-OpenSSH\r\n\r\n", false).find("not an HTTP/1.x response"), std::string::npos);
  EXPECT_NE(refused("HTTP/1.1 2x0 OK\r\n\r\n", false).find("status code"), std::string::npos);
  EXPECT_NE(refused("HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", false).find("Content-Length"), std::string::npos);
  EXPECT_NE(refused("HTTP/1.1 200 OK\r\nX-Pad: " + std::string(100, 'p'), false).find("over 64 bytes"),
            std::string::npos);
  EXPECT_NE(refused("HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nabc", true).find("closed within"), std::string::npos);
  EXPECT_NE(refused("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", false).find("hexadecimal"),
            std::string::npos);
}
