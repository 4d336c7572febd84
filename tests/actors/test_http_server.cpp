// The HTTP server on its own: answers written whole with their heads, and backstops that answer
// what a handler left unanswered (and only that).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "actors/http_server.hpp"

namespace {

using namespace std::chrono_literals;
using sloserve::http::request;
using sloserve::http::responder;
using sloserve::http::response;

// A blocking client of one connection to 127.0.0.1:port.
class raw_client {
 public:
  explicit raw_client(int port) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(static_cast<uint16_t>(port));
    inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
    timeval tv{10, 0};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    ok_ = connect(fd_, reinterpret_cast<sockaddr*>(&to), sizeof to) == 0;
  }
  ~raw_client() { close(fd_); }
  bool ok() const { return ok_; }

  void send_text(const std::string& text) {
    ASSERT_EQ(send(fd_, text.data(), text.size(), MSG_NOSIGNAL), ssize_t(text.size()));
  }

  // One response: its head, and its body of Content-Length bytes (or up to the close).
  std::pair<std::string, std::string> read_response() {
    while (buf_.find("\r\n\r\n") == std::string::npos)
      if (!fill()) return {};
    auto end = buf_.find("\r\n\r\n") + 4;
    auto head = buf_.substr(0, end);
    buf_.erase(0, end);
    auto at = head.find("Content-Length: ");
    if (head.rfind("HTTP/1.1 204", 0) == 0) return {head, {}};
    if (at == std::string::npos) {
      while (fill()) {
      }
      return {head, std::exchange(buf_, {})};
    }
    size_t length = std::stoul(head.substr(at + 16));
    while (buf_.size() < length)
      if (!fill()) break;
    auto body = buf_.substr(0, length);
    buf_.erase(0, std::min(length, buf_.size()));
    return {head, body};
  }

 private:
  bool fill() {
    char chunk[65536];
    auto n = recv(fd_, chunk, sizeof chunk, 0);
    if (n <= 0) return false;
    buf_.append(chunk, static_cast<size_t>(n));
    return true;
  }
  int fd_ = -1;
  bool ok_ = false;
  std::string buf_;
};

std::string get(const std::string& path, const std::string& version = "HTTP/1.1", const std::string& extra = "") {
  return "GET " + path + " " + version + "\r\nHost: x\r\n" + extra + "\r\n";
}

TEST(http_server, answers_go_out_whole_with_a_head_for_the_clients_version) {
  std::string big(100 * 1024 + 7, 'x');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>('a' + i % 26);
  sloserve::http::server srv({}, [&](request req, responder respond) {
    if (req.path == "/big") return respond(response{200, big, "text/plain", {{"X-Mark", "m"}}});
    if (req.path == "/empty") return respond(response{204, "ignored"});
    respond(response{404, "{}"});
  });
  auto port = srv.start("127.0.0.1", 0);
  ASSERT_TRUE(port) << port.error();
  raw_client c(*port);
  ASSERT_TRUE(c.ok());
  // Larger than a TLS record and than one write: all of it, then the next answer on the connection.
  c.send_text(get("/big"));
  auto [head, body] = c.read_response();
  EXPECT_EQ(head.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << head;
  EXPECT_NE(head.find("Content-Type: text/plain\r\n"), std::string::npos) << head;
  EXPECT_NE(head.find("X-Mark: m\r\n"), std::string::npos) << head;
  EXPECT_NE(head.find("Content-Length: " + std::to_string(big.size()) + "\r\n"), std::string::npos) << head;
  EXPECT_EQ(head.find("Connection:"), std::string::npos) << "HTTP/1.1 keeps the connection by default: " << head;
  EXPECT_TRUE(body == big) << body.size() << " bytes of " << big.size();
  // A status without a body has no length and no body.
  c.send_text(get("/empty"));
  c.send_text(get("/nothing-here"));
  auto [empty_head, empty_body] = c.read_response();
  EXPECT_EQ(empty_head.rfind("HTTP/1.1 204 No Content\r\n", 0), 0u) << empty_head;
  EXPECT_EQ(empty_head.find("Content-Length"), std::string::npos) << empty_head;
  auto [missing_head, missing_body] = c.read_response();
  EXPECT_EQ(missing_head.rfind("HTTP/1.1 404 Not Found\r\n", 0), 0u) << missing_head;
  EXPECT_EQ(missing_body, "{}");

  // HTTP/1.0 is answered in 1.0, kept alive only when it asks, and closed otherwise.
  raw_client old(*port);
  old.send_text(get("/nothing-here", "HTTP/1.0", "Connection: keep-alive\r\n"));
  auto [kept, kept_body] = old.read_response();
  EXPECT_EQ(kept.rfind("HTTP/1.0 404 Not Found\r\n", 0), 0u) << kept;
  EXPECT_NE(kept.find("Connection: keep-alive\r\n"), std::string::npos) << kept;
  old.send_text(get("/nothing-here", "HTTP/1.0"));
  auto [closing, closing_body] = old.read_response();
  EXPECT_EQ(closing.find("Connection: keep-alive"), std::string::npos) << closing;
  EXPECT_EQ(closing_body, "{}");
  raw_client closer(*port);
  closer.send_text(get("/nothing-here", "HTTP/1.1", "Connection: close\r\n"));
  auto [closed, closed_body] = closer.read_response();
  EXPECT_NE(closed.find("Connection: close\r\n"), std::string::npos) << closed;
  srv.stop();
}

TEST(http_server, a_backstop_answers_what_was_left_unanswered_and_nothing_that_was_answered) {
  std::mutex lock;
  std::vector<responder> held;  // never answered: only the backstop can
  std::vector<std::thread> later;
  std::atomic<int> fallbacks_made{0};
  sloserve::http::server srv({}, [&](request req, responder respond) {
    if (req.path == "/never") {
      respond.backstop(100ms, [&] {
        ++fallbacks_made;
        return response{504, "{\"error\":\"backstop\"}"};
      });
      std::lock_guard g(lock);
      return held.push_back(respond);
    }
    // Answered from another thread before its (long) backstop; its fallback is never made.
    respond.backstop(60s, [&] {
      ++fallbacks_made;
      return response{504, "{}"};
    });
    std::lock_guard g(lock);
    later.emplace_back([respond] {
      std::this_thread::sleep_for(5ms);
      respond(response{200, "{\"soon\":true}"});
    });
  });
  auto port = srv.start("127.0.0.1", 0);
  ASSERT_TRUE(port) << port.error();
  raw_client c(*port);
  for (int i = 0; i < 20; ++i) {
    c.send_text(get("/soon"));
    auto [head, body] = c.read_response();
    EXPECT_EQ(head.rfind("HTTP/1.1 200", 0), 0u) << head;
    EXPECT_EQ(body, "{\"soon\":true}");
  }
  raw_client w(*port);
  w.send_text(get("/never"));
  auto [head, body] = w.read_response();
  EXPECT_EQ(head.rfind("HTTP/1.1 504", 0), 0u) << head;
  EXPECT_EQ(body, "{\"error\":\"backstop\"}");
  EXPECT_EQ(fallbacks_made.load(), 1);
  // The connection goes on after a backstop's answer, and an answer after it counts for nothing.
  held.back()(response{200, "too late"});
  c.send_text(get("/soon"));
  EXPECT_EQ(c.read_response().second, "{\"soon\":true}");
  srv.stop();
  for (auto& t : later) t.join();
  EXPECT_EQ(fallbacks_made.load(), 1);
}

}  // namespace
