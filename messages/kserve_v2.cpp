#include "messages/kserve_v2.hpp"

#include <algorithm>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <type_traits>

#include "pipelines/request_limits.hpp"

namespace sloserve::kserve {
namespace {

using json = nlohmann::json;

uint16_t to_half(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000u, exp = (x >> 23) & 0xffu, mant = x & 0x7fffffu;
  if (exp == 0xff) return static_cast<uint16_t>(sign | 0x7c00u | (mant ? 0x200u : 0u));  // inf, nan
  int e = static_cast<int>(exp) - 127 + 15;
  if (e >= 31) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow: inf
  if (e <= 0) {                                               // subnormal or zero
    if (e < -10) return static_cast<uint16_t>(sign);
    mant |= 0x800000u;
    uint32_t shift = static_cast<uint32_t>(14 - e);
    uint32_t half = mant >> shift;
    if ((mant >> (shift - 1)) & 1u) ++half;  // round half up
    return static_cast<uint16_t>(sign | half);
  }
  uint32_t half = sign | (static_cast<uint32_t>(e) << 10) | (mant >> 13);
  if (mant & 0x1000u) ++half;  // round half up (may carry into the exponent, as it should)
  return static_cast<uint16_t>(half);
}

// Appends the numbers of `v` (nested arrays allowed), row-major; false past `limit` or on a
// non-number.
bool flatten(const json& v, std::vector<const json*>& out, size_t limit, bool strings) {
  if (v.is_array()) {
    for (auto& x : v)
      if (!flatten(x, out, limit, strings)) return false;
    return true;
  }
  if (strings ? !v.is_string() : !v.is_number() && !v.is_boolean()) return false;
  if (out.size() >= limit) return false;
  out.push_back(&v);
  return true;
}

template <class T>
void put(char* p, size_t i, T v) {
  std::memcpy(p + i * sizeof(T), &v, sizeof(T));
}

// An integer JSON value as I, when it is one within I's range.
template <class I>
std::optional<I> integer_as(const json& v) {
  if (!v.is_number_integer()) return std::nullopt;
  if (v.is_number_unsigned()) {
    auto u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<I>::max())) return std::nullopt;
    return static_cast<I>(u);
  }
  auto x = v.get<int64_t>();
  if constexpr (std::is_unsigned_v<I>) {
    if (x < 0 || static_cast<uint64_t>(x) > static_cast<uint64_t>(std::numeric_limits<I>::max())) return std::nullopt;
  } else {
    if (x < static_cast<int64_t>(std::numeric_limits<I>::min()) ||
        x > static_cast<int64_t>(std::numeric_limits<I>::max()))
      return std::nullopt;
  }
  return static_cast<I>(x);
}

// Encodes JSON numbers (or booleans, for BOOL) as `t`'s elements; the error names the first that
// does not fit.
status encode(const std::vector<const json*>& values, tensor& t, char* p) {
  for (size_t i = 0; i < values.size(); ++i) {
    auto& v = *values[i];
    auto bad = [&](std::string what) {
      return fail("input '" + t.name + "': element " + std::to_string(i) + " (" + v.dump() + ") " + what);
    };
    auto integer = [&](auto zero) -> status {
      using I = decltype(zero);
      if (!v.is_number_integer()) return bad("is not an integer");
      auto x = integer_as<I>(v);
      if (!x) return bad("is out of " + std::string(datatype_name(t.type)) + " range");
      put(p, i, *x);
      return {};
    };
    status ok;
    switch (t.type) {
      case dtype::float32:
        if (!v.is_number()) return bad("is not a number");
        put(p, i, static_cast<float>(v.get<double>()));
        break;
      case dtype::float64:
        if (!v.is_number()) return bad("is not a number");
        put(p, i, v.get<double>());
        break;
      case dtype::float16:
        if (!v.is_number()) return bad("is not a number");
        put(p, i, to_half(static_cast<float>(v.get<double>())));
        break;
      case dtype::boolean:
        if (!v.is_boolean()) return bad("is not true or false");
        put(p, i, static_cast<uint8_t>(v.get<bool>() ? 1 : 0));
        break;
      case dtype::int64:
        ok = integer(int64_t{});
        break;
      case dtype::int32:
        ok = integer(int32_t{});
        break;
      case dtype::int16:
        ok = integer(int16_t{});
        break;
      case dtype::int8:
        ok = integer(int8_t{});
        break;
      case dtype::uint64:
        ok = integer(uint64_t{});
        break;
      case dtype::uint32:
        ok = integer(uint32_t{});
        break;
      case dtype::uint16:
        ok = integer(uint16_t{});
        break;
      case dtype::uint8:
        ok = integer(uint8_t{});
        break;
      case dtype::bytes:
        return bad("is not a fixed-size element");  // bytes are encoded by bytes_data
    }
    if (!ok) return ok;
  }
  return {};
}

}  // namespace

std::string_view datatype_name(dtype t) {
  switch (t) {
    case dtype::float32:
      return "FP32";
    case dtype::float16:
      return "FP16";
    case dtype::float64:
      return "FP64";
    case dtype::int64:
      return "INT64";
    case dtype::int32:
      return "INT32";
    case dtype::int16:
      return "INT16";
    case dtype::int8:
      return "INT8";
    case dtype::uint64:
      return "UINT64";
    case dtype::uint32:
      return "UINT32";
    case dtype::uint16:
      return "UINT16";
    case dtype::uint8:
      return "UINT8";
    case dtype::boolean:
      return "BOOL";
    case dtype::bytes:
      return "BYTES";
  }
  return "FP32";
}

std::optional<dtype> parse_datatype(std::string_view name) {
  for (auto t : all_dtypes)
    if (datatype_name(t) == name) return t;
  return std::nullopt;
}

std::string datatype_list() {
  std::string out;
  for (auto t : all_dtypes) out += (out.empty() ? "" : ", ") + std::string(datatype_name(t));
  return out;
}

namespace {

// One of a request's inputs: its name, datatype and shape, and its data as JSON `data` or (with
// `header_length`) the next `binary_data_size` bytes of `binary` from `offset`, which moves on.
expected<tensor> parse_input(const json& in, std::optional<size_t> header_length, const bytes& binary, size_t& offset,
                             std::optional<shm_ref>& in_shm) {
  if (!in.is_object()) return fail("each input must be an object");
  if (!in.contains("name") || !in["name"].is_string()) return fail("an input has no \"name\" string");
  tensor t;
  t.name = in["name"].get<std::string>();
  auto where = "input '" + t.name + "'";
  if (!in.contains("datatype") || !in["datatype"].is_string()) return fail(where + " has no \"datatype\" string");
  auto type = parse_datatype(in["datatype"].get<std::string>());
  if (!type) return fail(where + ": datatype " + in["datatype"].dump() + " is not one of " + datatype_list());
  t.type = *type;
  if (!in.contains("shape") || !in["shape"].is_array()) return fail(where + " has no \"shape\" array");
  for (auto& d : in["shape"]) {
    if (!d.is_number_integer() || d.get<int64_t>() < 0)
      return fail(where + ": shape " + in["shape"].dump() + " must list non-negative integers");
    t.shape.push_back(d.get<int64_t>());
  }
  auto bytes_needed = t.spec().zero_size();
  if (!bytes_needed || *bytes_needed > (uint64_t{1} << 40))
    return fail(where + ": shape " + in["shape"].dump() + " is too large");
  json params = in.contains("parameters") ? in["parameters"] : json::object();
  if (!params.is_object()) return fail(where + ": \"parameters\" must be an object");
  auto shared = shm_parameters(params, where);
  if (!shared) return fail(shared.error());
  if (*shared) {
    if (in.contains("data") || params.contains("binary_data_size"))
      return fail(where + " names a shared-memory region and also carries data; it may do one or the other");
    in_shm = std::move(*shared);
    return t;
  }
  if (params.contains("binary_data_size")) {
    auto& size = params["binary_data_size"];
    if (!size.is_number_unsigned()) return fail(where + ": binary_data_size must be a non-negative integer");
    auto n = size.get<uint64_t>();
    if (!header_length)
      return fail(where + " has binary_data_size but the request has no Inference-Header-Content-Length");
    if (t.type != dtype::bytes && n != *bytes_needed)
      return fail(where + ": binary_data_size " + std::to_string(n) + " is not the " + std::to_string(*bytes_needed) +
                  " bytes of " + t.spec().to_string());
    if (offset + n > binary.size())
      return fail(where + ": the binary data ends after " + std::to_string(binary.size() - offset) + " of its " +
                  std::to_string(n) + " bytes");
    t.data = binary.substr(offset, n);  // shares the body: no copy
    offset += n;
    if (t.type == dtype::bytes)
      if (auto ok = check_tensor_bytes(t); !ok)
        return fail(where + ": binary_data_size " + std::to_string(n) + ": " + ok.error());
  } else {
    if (!in.contains("data")) return fail(where + " has neither \"data\" nor a binary_data_size parameter");
    auto elements = *t.spec().elements();
    bool strings = t.type == dtype::bytes;
    std::vector<const json*> values;
    if (!flatten(in["data"], values, elements, strings) || values.size() != elements)
      return fail(where + ": \"data\" must hold exactly " + std::to_string(elements) +
                  (strings ? " strings" : " numbers") + " for shape " + in["shape"].dump());
    if (strings) {
      std::vector<std::string> items;
      for (auto* v : values) items.push_back(v->get<std::string>());
      t.data = bytes_data(items);
      return t;
    }
    char* p = nullptr;
    t.data = bytes::allocate(*bytes_needed, p);
    if (auto ok = encode(values, t, p); !ok) return fail(ok.error());
  }
  return t;
}

// What a request says beside its inputs: the outputs it asks for, binary outputs, and its
// parameters (start_layer, slo_ms).
// An output's own parameters: how it travels (binary_data), its shared-memory region, and a
// classification.
status parse_output_parameters(const json& params, const std::string& name, infer_request& out) {
  auto where = "output '" + name + "'";
  if (params.contains("binary_data")) {
    if (!params["binary_data"].is_boolean()) return fail(where + ": parameter binary_data must be true or false");
    out.binary_of[name] = params["binary_data"].get<bool>();
  }
  auto shared = shm_parameters(params, where);
  if (!shared) return fail(shared.error());
  if (*shared) out.shm_outputs[name] = std::move(**shared);
  if (params.contains("classification")) {
    auto& v = params["classification"];
    if (!v.is_number_unsigned() || v.get<uint64_t>() < 1 || v.get<uint64_t>() > max_classification)
      return fail(where + ": parameter classification must be the number of classes to return (1 to " +
                  std::to_string(max_classification) + ")");
    out.classification[name] = static_cast<uint32_t>(v.get<uint64_t>());
  }
  return {};
}

status parse_request_options(const json& j, infer_request& out) {
  if (j.contains("outputs")) {
    if (!j["outputs"].is_array()) return fail("\"outputs\" must be an array");
    for (size_t k = 0; k < j["outputs"].size(); ++k) {
      auto& o = j["outputs"][k];
      if (!o.is_object() || !o.contains("name") || !o["name"].is_string())
        return fail("outputs[" + std::to_string(k) + "] needs a \"name\"");
      out.outputs.push_back(o["name"].get<std::string>());
      if (!o.contains("parameters")) continue;
      if (!o["parameters"].is_object())
        return fail("outputs[" + std::to_string(k) + "]: \"parameters\" must be an object");
      if (auto ok = parse_output_parameters(o["parameters"], out.outputs.back(), out); !ok) return ok;
    }
  }
  if (j.contains("parameters")) {
    auto& params = j["parameters"];
    if (!params.is_object()) return fail("\"parameters\" must be an object");
    out.binary_outputs = out.binary_outputs || params.value("binary_data_output", false);
    if (params.contains("start_layer")) {
      auto& v = params["start_layer"];
      if (!v.is_number_unsigned() || v.get<uint64_t>() > static_cast<uint64_t>(limits::max_start_layer))
        return fail("parameter start_layer must be a layer number (a non-negative integer)");
      out.start_layer = static_cast<uint32_t>(v.get<uint64_t>());
    }
    if (params.contains("slo_ms")) {
      auto& v = params["slo_ms"];
      if (!v.is_number() || !limits::slo_in_range(v.get<double>()))
        return fail(std::string("parameter slo_ms must be a number of ms in ") + limits::slo_range);
      out.slo_ms = v.get<double>();
    }
  }
  return {};
}

expected<infer_request> parse_request(const bytes& body, std::optional<size_t> header_length) {
  if (header_length && *header_length > body.size())
    return fail("Inference-Header-Content-Length " + std::to_string(*header_length) + " is beyond the body's " +
                std::to_string(body.size()) + " bytes");
  auto header = header_length ? body.view().substr(0, *header_length) : body.view();
  auto binary = header_length ? body.substr(*header_length, body.size() - *header_length) : bytes{};
  json j;
  try {
    j = json::parse(header);
  } catch (const json::exception& e) {
    return fail(std::string("bad JSON: ") + e.what());
  }
  if (!j.is_object()) return fail("the request must be a JSON object");
  infer_request out;
  if (j.contains("id")) {
    if (!j["id"].is_string()) return fail("\"id\" must be a string");
    out.id = j["id"].get<std::string>();
  }
  if (!j.contains("inputs") || !j["inputs"].is_array() || j["inputs"].empty())
    return fail("\"inputs\" must be a non-empty array");
  size_t offset = 0;
  for (auto& in : j["inputs"]) {
    std::optional<shm_ref> in_shm;
    auto t = parse_input(in, header_length, binary, offset, in_shm);
    if (!t) return fail(t.error());
    if (in_shm) out.shm_inputs.emplace_back(out.inputs.size(), std::move(*in_shm));
    out.inputs.push_back(std::move(*t));
  }
  if (offset != binary.size())
    return fail("the body has " + std::to_string(binary.size() - offset) + " bytes after the inputs' binary data");
  if (auto ok = parse_request_options(j, out); !ok) return fail(ok.error());
  return out;
}

}  // namespace

expected<std::optional<shm_ref>> shm_parameters(const json& params, const std::string& where) {
  bool region = params.contains("shared_memory_region"), size = params.contains("shared_memory_byte_size");
  if (!region && !size && !params.contains("shared_memory_offset")) return std::optional<shm_ref>();
  if (!region || !size)
    return fail(where +
                ": shared_memory_region and shared_memory_byte_size must both be given (and "
                "shared_memory_offset may be)");
  auto& r = params["shared_memory_region"];
  if (!r.is_string()) return fail(where + ": shared_memory_region must be a string");
  auto count = [&](const char* key, uint64_t& v) -> status {
    if (!params.contains(key)) return {};
    auto& x = params[key];
    if (!x.is_number_unsigned()) return fail(where + ": " + key + " must be a non-negative integer");
    v = x.get<uint64_t>();
    return {};
  };
  shm_ref ref;
  ref.region = r.get<std::string>();
  if (auto ok = count("shared_memory_offset", ref.offset); !ok) return fail(ok.error());
  if (auto ok = count("shared_memory_byte_size", ref.byte_size); !ok) return fail(ok.error());
  return std::optional<shm_ref>(std::move(ref));
}

expected<infer_request> parse_infer_request(std::string_view body, std::optional<size_t> header_length) {
  return parse_infer_body(bytes::copy_of(body), header_length);
}

expected<infer_request> parse_infer_body(const bytes& body, std::optional<size_t> header_length) {
  if (auto fast = parse_request_fast(body, header_length)) return std::move(*fast);
  return parse_request_document(body, header_length);
}

expected<infer_request> parse_request_document(const bytes& body, std::optional<size_t> header_length) {
  try {
    return parse_request(body, header_length);
  } catch (const json::exception& e) {  // a field of the wrong type where a default was allowed
    return fail(std::string("bad request: ") + e.what());
  }
}

}  // namespace sloserve::kserve
