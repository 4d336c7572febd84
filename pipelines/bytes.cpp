#include "pipelines/bytes.hpp"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <new>
#include <ostream>

#include "pipelines/copy_tally.hpp"

namespace sloserve {

namespace copy_tally {
namespace {
std::atomic<uint64_t> copied{0};
}
void add(size_t bytes) {
  copied.fetch_add(bytes, std::memory_order_relaxed);
}
uint64_t total() {
  return copied.load(std::memory_order_relaxed);
}
}  // namespace copy_tally

bytes::bytes(std::string s) {
  if (s.empty()) return;
  auto owned = std::make_shared<const std::string>(std::move(s));
  data_ = owned->data();
  size_ = owned->size();
  owner_ = std::move(owned);
}

bytes bytes::copy_of(std::string_view s) {
  copy_tally::add(s.size());
  return bytes(std::string(s));
}

bytes bytes::allocate(size_t n, char*& out) {
  // calloc: large buffers come zeroed from fresh pages without a pass over them.
  out = static_cast<char*>(std::calloc(n ? n : 1, 1));
  if (!out) throw std::bad_alloc();
  return bytes(out, n, std::shared_ptr<const void>(out, [](const void* p) { std::free(const_cast<void*>(p)); }));
}

bytes bytes::substr(size_t pos, size_t n) const {
  if (pos > size_) pos = size_;
  if (n > size_ - pos) n = size_ - pos;
  return bytes(data_ + pos, n, owner_);
}

void bytes::resize(size_t n) {
  copy_tally::add(std::min(n, size_));
  std::string copy(view().substr(0, n));
  copy.resize(n, '\0');
  *this = bytes(std::move(copy));
}

std::ostream& operator<<(std::ostream& os, const bytes& b) {
  return os << '<' << b.size() << " bytes>";
}

}  // namespace sloserve
