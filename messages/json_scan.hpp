#pragma once
// A strict reader of the plain JSON that requests and replies on the hot path are made of: each
// call reads one token at the cursor or says it cannot. It refuses what it does not read plainly
// (escapes in strings, exponents, numbers it would have to round), so that the full parser decides
// those: a reader built on it is a fast path that gives up, never one that reads differently.

#include <charconv>
#include <cstdint>
#include <string_view>

namespace sloserve::json_scan {

class scanner {
 public:
  explicit scanner(std::string_view text) : s_(text) {}

  void ws() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r')) ++i_;
  }
  // The next character, after white space, is `c` (and is taken).
  bool take(char c) {
    ws();
    if (i_ >= s_.size() || s_[i_] != c) return false;
    ++i_;
    return true;
  }
  bool peek(char c) {
    ws();
    return i_ < s_.size() && s_[i_] == c;
  }
  // A string without escapes or control characters.
  bool string(std::string_view& out) {
    if (!take('"')) return false;
    auto start = i_;
    for (; i_ < s_.size(); ++i_) {
      auto c = static_cast<unsigned char>(s_[i_]);
      if (c == '"') {
        out = s_.substr(start, i_ - start);
        ++i_;
        return true;
      }
      if (c == '\\' || c < 0x20) return false;
    }
    return false;
  }
  // A non-negative integer without a sign, fraction or exponent, that fits 64 bits.
  bool uint(uint64_t& out) {
    ws();
    auto start = i_;
    while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') ++i_;
    if (i_ == start || (s_[start] == '0' && i_ - start > 1)) return false;
    if (i_ < s_.size() && (s_[i_] == '.' || s_[i_] == 'e' || s_[i_] == 'E')) return false;
    auto [end, ec] = std::from_chars(s_.data() + start, s_.data() + i_, out);
    return ec == std::errc() && end == s_.data() + i_;
  }
  bool boolean(bool& out) {
    ws();
    if (s_.substr(i_, 4) == "true") return i_ += 4, out = true, true;
    if (s_.substr(i_, 5) == "false") return i_ += 5, out = false, true;
    return false;
  }
  // The key of an object's member and its colon.
  bool key(std::string_view& out) { return string(out) && take(':'); }
  // After a member or element: true at ',' (another follows), false at `close` (taken); `ok`
  // false on anything else.
  bool more(char close, bool& ok) {
    if (take(',')) return true;
    ok = take(close);
    return false;
  }
  // Passes over one value of any kind (its strings without escapes); false on what it cannot read.
  bool skip_value(int depth = 0) {
    ws();
    if (i_ >= s_.size() || depth > 64) return false;
    char c = s_[i_];
    std::string_view str;
    if (c == '"') return string(str);
    if (c == '{' || c == '[') {
      char close = c == '{' ? '}' : ']';
      ++i_;
      if (take(close)) return true;
      bool ok = true;
      do {
        if (c == '{' && !key(str)) return false;
        if (!skip_value(depth + 1)) return false;
      } while (more(close, ok));
      return ok;
    }
    bool b;
    if (c == 't' || c == 'f') return boolean(b);
    if (s_.substr(i_, 4) == "null") return i_ += 4, true;
    auto start = i_;
    while (i_ < s_.size() && std::string_view("+-.eE0123456789").find(s_[i_]) != std::string_view::npos) ++i_;
    return i_ > start;
  }
  // Nothing but white space is left.
  bool at_end() {
    ws();
    return i_ == s_.size();
  }

 private:
  std::string_view s_;
  size_t i_ = 0;
};

}  // namespace sloserve::json_scan
