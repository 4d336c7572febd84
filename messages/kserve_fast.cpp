// The fast path of a KServe v2 inference request: the form that binary and shared-memory requests
// take (sloserve's load client, Triton's clients), read in one pass without building a document.
// Anything else, anything it would have to judge (JSON data, escapes, duplicate or unknown keys,
// an error of any kind), it leaves to the full parser (kserve_v2.cpp), which says what is wrong.
#include "messages/json_scan.hpp"
#include "messages/kserve_v2.hpp"
#include "pipelines/request_limits.hpp"

namespace sloserve::kserve {

namespace {

using json_scan::scanner;

// Reads an object's members, calling `member(key)` at each value; false on a duplicate key (a
// bit per key that `member` marks in `seen`) or on anything `member` refuses.
template <class F>
bool members(scanner& s, F&& member) {
  if (!s.take('{')) return false;
  if (s.take('}')) return true;
  bool ok = true;
  do {
    std::string_view k;
    if (!s.key(k) || !member(k)) return false;
  } while (s.more('}', ok));
  return ok;
}

template <class F>
bool elements(scanner& s, F&& element) {
  if (!s.take('[')) return false;
  if (s.take(']')) return true;
  bool ok = true;
  do {
    if (!element()) return false;
  } while (s.more(']', ok));
  return ok;
}

// Marks bit `b` of `seen`; false when it was marked (a duplicate key).
bool first(unsigned& seen, unsigned b) {
  if (seen & (1u << b)) return false;
  seen |= 1u << b;
  return true;
}

struct shm_fields {
  unsigned seen = 0;
  shm_ref ref;
  // Reads key `k` when it is one of the shared-memory parameters; `known` says whether it was.
  bool read(scanner& s, std::string_view k, bool& known) {
    known = true;
    std::string_view region;
    if (k == "shared_memory_region") return first(seen, 0) && s.string(region) && (ref.region = region, true);
    if (k == "shared_memory_offset") return first(seen, 1) && s.uint(ref.offset);
    if (k == "shared_memory_byte_size") return first(seen, 2) && s.uint(ref.byte_size);
    known = false;
    return true;
  }
  bool any() const { return seen != 0; }
  bool whole() const { return (seen & 1u) && (seen & 4u); }  // region and size; offset may be left out
};

bool read_input(scanner& s, const std::optional<size_t>& header_length, const bytes& binary, size_t& offset,
                infer_request& out) {
  tensor t;
  unsigned seen = 0;
  std::string_view name, datatype;
  std::optional<uint64_t> binary_size;
  shm_fields shm;
  bool ok = members(s, [&](std::string_view k) {
    if (k == "name") return first(seen, 0) && s.string(name);
    if (k == "datatype") return first(seen, 1) && s.string(datatype);
    if (k == "shape")
      return first(seen, 2) && elements(s, [&] {
               uint64_t d;
               if (!s.uint(d) || d > static_cast<uint64_t>(INT64_MAX)) return false;
               t.shape.push_back(static_cast<int64_t>(d));
               return true;
             });
    if (k == "parameters")
      return first(seen, 3) && members(s, [&](std::string_view p) {
               bool known = false;
               if (!shm.read(s, p, known)) return false;
               if (known) return true;
               uint64_t n;
               if (p != "binary_data_size" || binary_size || !s.uint(n)) return false;
               binary_size = n;
               return true;
             });
    return false;  // "data", and keys the full parser ignores
  });
  if (!ok || seen != 7u + (seen & 8u)) return false;  // name, datatype and shape, parameters or not
  auto type = parse_datatype(datatype);
  if (!type || *type == dtype::bytes) return false;
  t.name = std::string(name);
  t.type = *type;
  auto needed = t.spec().zero_size();
  if (!needed || *needed > (uint64_t{1} << 40)) return false;
  if (shm.any()) {
    if (!shm.whole() || binary_size) return false;
    out.shm_inputs.emplace_back(out.inputs.size(), std::move(shm.ref));
  } else {
    if (!binary_size || !header_length || *binary_size != *needed || offset + *binary_size > binary.size())
      return false;
    t.data = binary.substr(offset, *binary_size);  // shares the body: no copy
    offset += *binary_size;
  }
  out.inputs.push_back(std::move(t));
  return true;
}

bool read_output(scanner& s, infer_request& out) {
  unsigned seen = 0;
  std::string_view name;
  std::optional<bool> binary;
  std::optional<uint64_t> classes;
  shm_fields shm;
  bool ok = members(s, [&](std::string_view k) {
    if (k == "name") return first(seen, 0) && s.string(name);
    if (k == "parameters")
      return first(seen, 1) && members(s, [&](std::string_view p) {
               bool known = false;
               if (!shm.read(s, p, known)) return false;
               if (known) return true;
               bool b;
               uint64_t n;
               if (p == "binary_data" && !binary && s.boolean(b)) return binary = b, true;
               if (p == "classification" && !classes && s.uint(n)) return classes = n, true;
               return false;
             });
    return false;
  });
  if (!ok || !(seen & 1u) || (shm.any() && !shm.whole())) return false;
  if (classes && (*classes < 1 || *classes > max_classification)) return false;
  auto n = std::string(name);
  out.outputs.push_back(n);
  if (binary) out.binary_of[n] = *binary;
  if (shm.any()) out.shm_outputs[n] = std::move(shm.ref);
  if (classes) out.classification[n] = static_cast<uint32_t>(*classes);
  return true;
}

bool read_parameters(scanner& s, infer_request& out) {
  unsigned seen = 0;
  return members(s, [&](std::string_view k) {
    uint64_t n;
    if (k == "binary_data_output") return first(seen, 0) && s.boolean(out.binary_outputs);
    if (k == "start_layer") {
      if (!first(seen, 1) || !s.uint(n) || n > static_cast<uint64_t>(limits::max_start_layer)) return false;
      out.start_layer = static_cast<uint32_t>(n);
      return true;
    }
    if (k == "slo_ms") {
      if (!first(seen, 2) || !s.uint(n) || !limits::slo_in_range(static_cast<double>(n))) return false;
      out.slo_ms = static_cast<double>(n);
      return true;
    }
    return false;
  });
}

}  // namespace

std::optional<infer_request> parse_request_fast(const bytes& body, std::optional<size_t> header_length) {
  if (header_length && *header_length > body.size()) return std::nullopt;
  auto header = header_length ? body.view().substr(0, *header_length) : body.view();
  auto binary = header_length ? body.substr(*header_length, body.size() - *header_length) : bytes{};
  scanner s(header);
  infer_request out;
  unsigned seen = 0;
  size_t offset = 0;
  std::string_view id;
  bool ok = members(s, [&](std::string_view k) {
    if (k == "id") return first(seen, 0) && s.string(id);
    if (k == "inputs")
      return first(seen, 1) && elements(s, [&] { return read_input(s, header_length, binary, offset, out); });
    if (k == "outputs") return first(seen, 2) && elements(s, [&] { return read_output(s, out); });
    if (k == "parameters") return first(seen, 3) && read_parameters(s, out);
    return false;
  });
  if (!ok || !s.at_end() || out.inputs.empty() || offset != binary.size()) return std::nullopt;
  out.id = std::string(id);
  return out;
}

}  // namespace sloserve::kserve
