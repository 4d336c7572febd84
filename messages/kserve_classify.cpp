// The classification extension: an output's top classes as strings instead of its scores.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <numeric>

#include "messages/kserve_v2.hpp"

namespace sloserve::kserve {
namespace {

// Element `i` of `p`, of type `type` (not BYTES), as a double.
double element(const char* p, dtype type, size_t i) {
  auto get = [&](auto zero) {
    decltype(zero) v;
    std::memcpy(&v, p + i * sizeof(v), sizeof(v));
    return static_cast<double>(v);
  };
  switch (type) {
    case dtype::float32:
      return get(float{});
    case dtype::float64:
      return get(double{});
    case dtype::float16: {
      uint16_t h;
      std::memcpy(&h, p + i * 2, 2);
      return from_half(h);
    }
    case dtype::boolean:
      return get(uint8_t{}) != 0;
    case dtype::int64:
      return get(int64_t{});
    case dtype::int32:
      return get(int32_t{});
    case dtype::int16:
      return get(int16_t{});
    case dtype::int8:
      return get(int8_t{});
    case dtype::uint64:
      return get(uint64_t{});
    case dtype::uint32:
      return get(uint32_t{});
    case dtype::uint16:
      return get(uint16_t{});
    case dtype::uint8:
      return get(uint8_t{});
    case dtype::bytes:
      break;
  }
  return 0;
}

void append_element(std::string& out, const std::string& s) {
  auto n = static_cast<uint32_t>(s.size());
  char len[4];
  for (int b = 0; b < 4; ++b) len[b] = static_cast<char>((n >> (8 * b)) & 0xff);
  out.append(len, 4);
  out += s;
}

}  // namespace

expected<tensor> classify(const tensor& t, uint32_t count, const std::vector<std::string>& labels) {
  auto where = "output '" + t.name + "' (" + t.spec().to_string() + ")";
  if (t.shape.empty()) return fail(where + ": classification needs a vector of class scores, not a scalar");
  if (t.type == dtype::bytes) return fail(where + ": classification needs numbers to rank, not strings");
  auto classes = t.shape.back();
  if (classes < 1) return fail(where + ": classification needs at least one class");
  auto per = static_cast<size_t>(classes);
  size_t rows = t.data.size() / (per * dtype_size(t.type));
  auto k = std::min<size_t>(count, per);
  tensor out;
  out.name = t.name;
  out.type = dtype::bytes;
  out.shape = t.shape;
  out.shape.back() = static_cast<int64_t>(k);
  std::string data;
  std::vector<size_t> order(per);
  std::vector<double> values(per), rank(per);
  auto* p = t.data.data();
  for (size_t r = 0; r < rows; ++r) {
    for (size_t c = 0; c < per; ++c) {
      values[c] = element(p, t.type, r * per + c);
      rank[c] = std::isnan(values[c]) ? -std::numeric_limits<double>::infinity() : values[c];  // NaN last
    }
    std::iota(order.begin(), order.end(), size_t{0});
    std::partial_sort(order.begin(), order.begin() + static_cast<long>(k), order.end(),
                      [&](size_t a, size_t b) { return rank[a] > rank[b] || (rank[a] == rank[b] && a < b); });
    for (size_t j = 0; j < k; ++j) {
      auto c = order[j];
      char value[64];
      std::snprintf(value, sizeof value, "%f", values[c]);
      auto s = std::string(value) + ":" + std::to_string(c);
      if (c < labels.size()) s += ":" + labels[c];
      append_element(data, s);
    }
  }
  out.data = bytes(std::move(data));
  return out;
}

}  // namespace sloserve::kserve
