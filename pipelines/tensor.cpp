#include "pipelines/tensor.hpp"

#include <cstring>

namespace sloserve {

size_t dtype_size(dtype t) {
  switch (t) {
    case dtype::float64:
    case dtype::int64:
    case dtype::uint64:
      return 8;
    case dtype::float32:
    case dtype::int32:
    case dtype::uint32:
      return 4;
    case dtype::float16:
    case dtype::int16:
    case dtype::uint16:
      return 2;
    case dtype::uint8:
    case dtype::int8:
    case dtype::boolean:
      return 1;
    case dtype::bytes:
      return 0;
  }
  return 1;
}

std::string_view dtype_name(dtype t) {
  switch (t) {
    case dtype::float32:
      return "float32";
    case dtype::float16:
      return "float16";
    case dtype::int64:
      return "int64";
    case dtype::int32:
      return "int32";
    case dtype::uint8:
      return "uint8";
    case dtype::float64:
      return "float64";
    case dtype::uint64:
      return "uint64";
    case dtype::int8:
      return "int8";
    case dtype::int16:
      return "int16";
    case dtype::uint16:
      return "uint16";
    case dtype::uint32:
      return "uint32";
    case dtype::boolean:
      return "bool";
    case dtype::bytes:
      return "bytes";
  }
  return "?";
}

std::optional<dtype> parse_dtype(std::string_view name) {
  for (auto t : all_dtypes)
    if (dtype_name(t) == name) return t;
  return std::nullopt;
}

std::optional<uint64_t> tensor_spec::elements() const {
  uint64_t n = 1;
  for (auto d : shape) {
    if (d < 0) return std::nullopt;
    if (d != 0 && n > UINT64_MAX / static_cast<uint64_t>(d)) return std::nullopt;
    n *= static_cast<uint64_t>(d);
  }
  return n;
}

std::optional<uint64_t> tensor_spec::byte_size() const {
  if (type == dtype::bytes) return std::nullopt;
  return zero_size();
}

std::optional<uint64_t> tensor_spec::zero_size() const {
  auto n = elements();
  if (!n || *n > UINT64_MAX / 8) return std::nullopt;
  return *n * (type == dtype::bytes ? 4 : dtype_size(type));
}

std::optional<size_t> bytes_elements_end(std::string_view data, size_t from, uint64_t count) {
  size_t at = from;
  for (uint64_t i = 0; i < count; ++i) {
    if (data.size() < at || data.size() - at < 4) return std::nullopt;
    auto* p = reinterpret_cast<const unsigned char*>(data.data() + at);
    uint64_t len = uint64_t{p[0]} | uint64_t{p[1]} << 8 | uint64_t{p[2]} << 16 | uint64_t{p[3]} << 24;
    at += 4;
    if (data.size() - at < len) return std::nullopt;
    at += static_cast<size_t>(len);
  }
  return at;
}

std::optional<std::vector<std::string_view>> bytes_elements(std::string_view data, uint64_t count) {
  std::vector<std::string_view> out;
  size_t at = 0;
  for (uint64_t i = 0; i < count; ++i) {
    auto end = bytes_elements_end(data, at, 1);
    if (!end) return std::nullopt;
    out.push_back(data.substr(at + 4, *end - at - 4));
    at = *end;
  }
  if (at != data.size()) return std::nullopt;
  return out;
}

std::string bytes_data(const std::vector<std::string>& items) {
  std::string out;
  for (auto& x : items) {
    auto n = static_cast<uint32_t>(x.size());
    for (int k = 0; k < 4; ++k) out += static_cast<char>((n >> (8 * k)) & 0xff);
    out += x;
  }
  return out;
}

std::string tensor_spec::to_string() const {
  std::string s{dtype_name(type)};
  s += '[';
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ',';
    s += std::to_string(shape[i]);
  }
  return s + ']';
}

status check_tensor_bytes(const tensor& t) {
  if (t.type == dtype::bytes) {
    auto n = t.spec().elements();
    if (!n) return fail("tensor '" + t.name + "' has an invalid shape " + t.spec().to_string());
    auto end = bytes_elements_end(t.data.view(), 0, *n);
    if (!end || *end != t.data.size())
      return fail("tensor '" + t.name + "' " + t.spec().to_string() + " needs " + std::to_string(*n) +
                  " elements, each a 4-byte little-endian length and its bytes; its " + std::to_string(t.data.size()) +
                  " bytes " + (end ? "go on after them" : "end before them"));
    return {};
  }
  auto want = t.spec().byte_size();
  if (!want) return fail("tensor '" + t.name + "' has an invalid shape " + t.spec().to_string());
  if (*want != t.data.size())
    return fail("tensor '" + t.name + "' " + t.spec().to_string() + " needs " + std::to_string(*want) +
                " bytes but carries " + std::to_string(t.data.size()));
  return {};
}

status check_tensor(const tensor& t, const tensor_spec& spec) {
  if (t.type != spec.type || t.shape != spec.shape)
    return fail("input " + t.spec().to_string() + " does not match the model's declared input " + spec.to_string());
  return check_tensor_bytes(t);
}

int64_t row_count(const tensor& t) {
  return t.shape.empty() ? 1 : t.shape[0];
}

tensor row_of(const tensor& t, int64_t i) {
  tensor r;
  r.name = t.name;
  r.type = t.type;
  if (t.shape.empty()) {
    r.data = t.data;
    return r;
  }
  r.shape.assign(t.shape.begin() + 1, t.shape.end());
  if (t.type == dtype::bytes) {
    auto per_row = r.spec().elements().value_or(0);
    auto from = bytes_elements_end(t.data.view(), 0, static_cast<uint64_t>(i) * per_row);
    auto to = from ? bytes_elements_end(t.data.view(), *from, per_row) : std::nullopt;
    if (to) r.data = t.data.substr(*from, *to - *from);
    return r;
  }
  auto row_bytes = r.spec().byte_size().value_or(0);
  if ((static_cast<uint64_t>(i) + 1) * row_bytes <= t.data.size())
    r.data = t.data.substr(static_cast<size_t>(i * row_bytes), row_bytes);
  return r;
}

namespace {
uint64_t splitmix(uint64_t& s) {
  uint64_t z = (s += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}
}  // namespace

tensor make_tensor(const tensor_spec& spec, uint64_t seed, std::string name) {
  tensor t;
  t.name = std::move(name);
  t.type = spec.type;
  t.shape = spec.shape;
  if (spec.type == dtype::bytes) {
    // Words of 1 to 8 lowercase letters.
    std::vector<std::string> words(spec.elements().value_or(0));
    for (auto& w : words) {
      auto r = splitmix(seed);
      w.resize(1 + r % 8);
      for (auto& c : w) c = static_cast<char>('a' + (r >>= 5) % 26);
    }
    t.data = bytes_data(words);
    return t;
  }
  auto n_bytes = spec.byte_size().value_or(0);
  std::string data(n_bytes, '\0');
  if (spec.type == dtype::float32) {
    // Values in [0, 1) so emulated outputs look like scores.
    auto n = n_bytes / 4;
    for (size_t i = 0; i < n; ++i) {
      float v = static_cast<float>(splitmix(seed) >> 40) / static_cast<float>(1 << 24);
      std::memcpy(data.data() + i * 4, &v, 4);
    }
  } else if (spec.type == dtype::float64) {
    for (size_t i = 0; i + 8 <= n_bytes; i += 8) {
      double v = static_cast<double>(splitmix(seed) >> 11) / static_cast<double>(1ULL << 53);
      std::memcpy(data.data() + i, &v, 8);
    }
  } else if (spec.type == dtype::boolean) {
    for (size_t i = 0; i < n_bytes; ++i) data[i] = static_cast<char>(splitmix(seed) & 1);
  } else {
    for (size_t i = 0; i < n_bytes; i += 8) {
      uint64_t v = splitmix(seed);
      std::memcpy(data.data() + i, &v, std::min<size_t>(8, n_bytes - i));
    }
  }
  t.data = std::move(data);
  return t;
}

uint64_t sample_fingerprint(std::string_view bytes) {
  constexpr size_t whole = 64 << 10, blocks = 64, block = 1024;
  if (bytes.size() <= whole) return fingerprint(bytes);
  uint64_t h = bytes.size();
  for (size_t i = 0; i < blocks; ++i) {
    size_t at = i * (bytes.size() - block) / (blocks - 1);  // the first block starts the input, the last ends it
    h = (h ^ fingerprint(bytes.substr(at, block))) * 0x9e3779b97f4a7c15ULL;
  }
  return splitmix(h);
}

uint64_t fingerprint(std::string_view bytes) {
  // Four FNV-1a lanes over 8-byte words, folded by splitmix. Byte-wise FNV-1a took 0.6 ms for
  // a 600 KB image, the whole CPU budget of an emulated stage; this is one multiply per word
  // with four independent chains.
  constexpr uint64_t prime = 1099511628211ULL;
  uint64_t h[4] = {1469598103934665603ULL ^ bytes.size(), 0x84222325cbf29ce4ULL, 0x9e3779b97f4a7c15ULL,
                   0xbf58476d1ce4e5b9ULL};
  size_t i = 0;
  for (; i + 32 <= bytes.size(); i += 32)
    for (int k = 0; k < 4; ++k) {
      uint64_t w;
      std::memcpy(&w, bytes.data() + i + 8 * k, 8);
      h[k] = (h[k] ^ w) * prime;
    }
  for (; i < bytes.size(); ++i) h[0] = (h[0] ^ static_cast<unsigned char>(bytes[i])) * prime;
  uint64_t out = h[0];
  for (int k = 1; k < 4; ++k) out ^= splitmix(h[k]) + (out << 6);
  return splitmix(out);
}

}  // namespace sloserve
