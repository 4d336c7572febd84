#include "loadgen/http_reader.hpp"

#include <algorithm>
#include <cstring>
#include <string_view>

namespace sloserve::http1 {
namespace {

bool same_name(std::string_view a, std::string_view b) {
  return a.size() == b.size() &&
         std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) { return (x | 0x20) == (y | 0x20); });
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c | 0x20);
  return out;
}

std::string_view trimmed(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// A decimal count of at most 15 digits (a petabyte), or nullopt.
std::optional<size_t> decimal(std::string_view s) {
  if (s.empty() || s.size() > 15) return std::nullopt;
  size_t n = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    n = n * 10 + static_cast<size_t>(c - '0');
  }
  return n;
}

// A chunk's size line (hex, then optional extensions after ';'), or nullopt.
std::optional<size_t> hex_size(std::string_view line) {
  line = trimmed(line.substr(0, line.find(';')));
  if (line.empty() || line.size() > 12) return std::nullopt;
  size_t n = 0;
  for (char c : line) {
    int d = c >= '0' && c <= '9' ? c - '0' : (c | 0x20) >= 'a' && (c | 0x20) <= 'f' ? (c | 0x20) - 'a' + 10 : -1;
    if (d < 0) return std::nullopt;
    n = n * 16 + static_cast<size_t>(d);
  }
  return n;
}

}  // namespace

char* response_reader::prepare(size_t n) {
  if (buf_.size() < used_ + n) buf_.resize(std::max(used_ + n, buf_.size() * 2));
  return buf_.data() + used_;
}

size_t response_reader::want() const {
  size_t needed = 0;
  if (state_ == state::length) needed = cursor_ + need_;
  if (state_ == state::chunk_data) needed = cursor_ + need_ + 2;
  return std::max<size_t>(16 * 1024, needed > used_ ? needed - used_ : 0);
}

response_reader::progress response_reader::fail(std::string why) {
  why_ = std::move(why);
  return progress::bad;
}

response_reader::progress response_reader::parse() {
  switch (state_) {
    case state::head:
      return head();
    case state::length:
      if (used_ - cursor_ >= need_) {
        a_.body.assign(buf_.data() + cursor_, need_);
        consumed_ = cursor_ + need_;
        state_ = state::done;
        return progress::done;
      }
      return ended_ ? fail("the connection closed within a response's body") : progress::more;
    case state::chunk_size:
    case state::chunk_data:
    case state::trailers:
      return chunks();
    case state::until_close:
      if (!ended_) return progress::more;
      a_.body.assign(buf_.data() + cursor_, used_ - cursor_);
      consumed_ = used_;
      state_ = state::done;
      return progress::done;
    case state::done:
      return progress::done;
  }
  return progress::more;
}

response_reader::progress response_reader::head() {
  for (;;) {
    std::string_view in(buf_.data(), used_);
    auto end = in.find("\r\n\r\n");
    if (end == std::string_view::npos) {
      if (used_ > max_head_) return fail("a response header over " + std::to_string(max_head_) + " bytes");
      // Nothing of a response yet: the caller decides what a close before one means.
      if (used_ == 0) return progress::more;
      return ended_ ? fail("the connection closed within a response's header") : progress::more;
    }
    auto first = in.find("\r\n");
    auto status_line = in.substr(0, first);
    if (status_line.size() < 12 || status_line.substr(0, 7) != "HTTP/1." || status_line[8] != ' ')
      return fail("not an HTTP/1.x response: " + std::string(status_line.substr(0, 40)));
    auto code = decimal(status_line.substr(9, 3));
    if (!code || (status_line.size() > 12 && status_line[12] != ' '))
      return fail("a response without a status code: " + std::string(status_line.substr(0, 40)));
    a_ = {};
    a_.status = static_cast<int>(*code);
    a_.keep_alive = status_line[7] != '0';
    std::optional<size_t> length;
    bool chunked = false;
    for (size_t pos = first + 2; pos < end;) {
      auto eol = in.find("\r\n", pos);
      auto line = in.substr(pos, eol - pos);
      pos = eol + 2;
      auto colon = line.find(':');
      if (colon == std::string_view::npos) return fail("a response header line without a colon");
      auto name = line.substr(0, colon);
      auto value = trimmed(line.substr(colon + 1));
      if (same_name(name, "content-length")) {
        if (!(length = decimal(value))) return fail("a Content-Length that is not a count: " + std::string(value));
      } else if (same_name(name, "transfer-encoding")) {
        chunked = lower(value).find("chunked") != std::string::npos;
      } else if (same_name(name, "connection")) {
        auto v = lower(value);
        if (v.find("close") != std::string::npos) a_.keep_alive = false;
        if (v.find("keep-alive") != std::string::npos) a_.keep_alive = true;
      } else if (same_name(name, "inference-header-content-length")) {
        if (!(a_.inference_header = decimal(value)))
          return fail("an Inference-Header-Content-Length that is not a count: " + std::string(value));
      }
    }
    cursor_ = end + 4;
    if (a_.status >= 100 && a_.status < 200) {  // an interim response: the final one follows
      std::memmove(buf_.data(), buf_.data() + cursor_, used_ - cursor_);
      used_ -= cursor_;
      cursor_ = 0;
      continue;
    }
    if (a_.status == 204 || a_.status == 304) {
      consumed_ = cursor_;
      state_ = state::done;
      return progress::done;
    }
    if (chunked) {
      state_ = state::chunk_size;
      return chunks();
    }
    if (length) {
      need_ = *length;
      state_ = state::length;
    } else {
      state_ = state::until_close;
    }
    return parse();
  }
}

response_reader::progress response_reader::chunks() {
  for (;;) {
    std::string_view in(buf_.data(), used_);
    auto more = [&] { return ended_ ? fail("the connection closed within a chunked body") : progress::more; };
    switch (state_) {
      case state::chunk_size: {
        auto eol = in.find("\r\n", cursor_);
        if (eol == std::string_view::npos) return more();
        auto size = hex_size(in.substr(cursor_, eol - cursor_));
        if (!size) return fail("a chunk size that is not hexadecimal");
        cursor_ = eol + 2;
        need_ = *size;
        state_ = *size == 0 ? state::trailers : state::chunk_data;
        break;
      }
      case state::chunk_data:
        if (used_ - cursor_ < need_ + 2) return more();
        if (in.substr(cursor_ + need_, 2) != "\r\n") return fail("a chunk not followed by CRLF");
        a_.body.append(buf_.data() + cursor_, need_);
        cursor_ += need_ + 2;
        state_ = state::chunk_size;
        break;
      case state::trailers: {
        if (in.substr(cursor_, 2) == "\r\n") {
          consumed_ = cursor_ + 2;
        } else {
          auto end = in.find("\r\n\r\n", cursor_);
          if (end == std::string_view::npos) return more();
          consumed_ = end + 4;
        }
        state_ = state::done;
        return progress::done;
      }
      default:
        return progress::done;
    }
  }
}

answer response_reader::take() {
  answer out = std::move(a_);
  size_t left = used_ - consumed_;
  if (left > 0) std::memmove(buf_.data(), buf_.data() + consumed_, left);
  used_ = left;
  cursor_ = consumed_ = need_ = 0;
  state_ = state::head;
  a_ = {};
  return out;
}

void response_reader::reset() {
  used_ = cursor_ = consumed_ = need_ = 0;
  ended_ = false;
  state_ = state::head;
  a_ = {};
  why_.clear();
}

}  // namespace sloserve::http1
