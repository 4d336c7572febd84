#pragma once
// Immutable bytes shared by reference: a view and an owner that keeps the memory alive. Tensor
// payloads travel as these, so that a request's bytes are not copied between the ZeroMQ frame
// they arrived in, the actors that route them and the batch buffer they end in.

#include <cstddef>
#include <iosfwd>
#include <memory>
#include <string>
#include <string_view>

namespace sloserve {

class bytes {
 public:
  bytes() = default;
  // Takes the string's buffer (no copy).
  bytes(std::string s);  // NOLINT: implicit, a string is bytes
  // A view of `n` bytes at `p`, kept alive by `owner`.
  bytes(const char* p, size_t n, std::shared_ptr<const void> owner) : data_(p), size_(n), owner_(std::move(owner)) {}

  // A fresh buffer of `n` zeroed bytes; `out` points at it, to fill before it is shared.
  static bytes allocate(size_t n, char*& out);
  // A copy of `s` (counted in pipelines/copy_tally.hpp).
  static bytes copy_of(std::string_view s);

  const char* data() const { return data_; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  const char* begin() const { return data_; }
  const char* end() const { return data_ + size_; }
  char operator[](size_t i) const { return data_[i]; }
  std::string_view view() const { return {data_, size_}; }
  operator std::string_view() const { return view(); }  // NOLINT: implicit, read as a view
  std::string str() const { return std::string(view()); }
  const std::shared_ptr<const void>& owner() const { return owner_; }

  // Bytes [pos, pos + n) of these, sharing the same owner (no copy).
  bytes substr(size_t pos, size_t n) const;
  // A private copy resized to `n` (zero-filled when it grows); others sharing the bytes keep theirs.
  void resize(size_t n);

  friend bool operator==(const bytes& a, const bytes& b) { return a.view() == b.view(); }
  friend bool operator==(const bytes& a, std::string_view b) { return a.view() == b; }

 private:
  const char* data_ = "";
  size_t size_ = 0;
  std::shared_ptr<const void> owner_;
};

std::ostream& operator<<(std::ostream& os, const bytes& b);  // "<N bytes>", for test messages

}  // namespace sloserve
