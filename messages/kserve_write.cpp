// Bodies written by hand rather than through a json object (they are on every request's and
// response's path): requests' headers, responses, errors.
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>

#include "messages/kserve_v2.hpp"

namespace sloserve::kserve {

float from_half(uint16_t h) {
  uint32_t sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
  uint32_t x;
  if (exp == 0) {
    if (mant == 0) {
      x = sign;
    } else {  // subnormal: normalise
      int e = -1;
      do ++e, mant <<= 1;
      while (!(mant & 0x400u));
      x = sign | (static_cast<uint32_t>(127 - 15 - e) << 23) | ((mant & 0x3ffu) << 13);
    }
  } else if (exp == 31) {
    x = sign | 0x7f800000u | (mant << 13);
  } else {
    x = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

namespace {

using json = nlohmann::json;

// A tensor's elements as a JSON array (`data`).
json decode(const tensor& t) {
  json data = json::array();
  if (t.type == dtype::bytes) {
    if (auto items = bytes_elements(t.data.view(), t.spec().elements().value_or(0)))
      for (auto x : *items) data.push_back(std::string(x));
    return data;
  }
  size_t n = dtype_size(t.type) ? t.data.size() / dtype_size(t.type) : 0;
  auto* p = t.data.data();
  auto get = [&](auto zero, size_t i) {
    decltype(zero) v;
    std::memcpy(&v, p + i * sizeof(v), sizeof(v));
    return v;
  };
  for (size_t i = 0; i < n; ++i) switch (t.type) {
      case dtype::float32:
        data.push_back(get(float{}, i));
        break;
      case dtype::float64:
        data.push_back(get(double{}, i));
        break;
      case dtype::float16:
        data.push_back(from_half(get(uint16_t{}, i)));
        break;
      case dtype::boolean:
        data.push_back(get(uint8_t{}, i) != 0);
        break;
      case dtype::int64:
        data.push_back(get(int64_t{}, i));
        break;
      case dtype::int32:
        data.push_back(get(int32_t{}, i));
        break;
      case dtype::int16:
        data.push_back(get(int16_t{}, i));
        break;
      case dtype::int8:
        data.push_back(get(int8_t{}, i));
        break;
      case dtype::uint64:
        data.push_back(get(uint64_t{}, i));
        break;
      case dtype::uint32:
        data.push_back(get(uint32_t{}, i));
        break;
      case dtype::uint16:
        data.push_back(get(uint16_t{}, i));
        break;
      case dtype::uint8:
        data.push_back(get(uint8_t{}, i));
        break;
      case dtype::bytes:
        break;
    }
  return data;
}

// `s` as a JSON string. What arrives here was read from JSON or a checked config: valid UTF-8.
void append_quoted(std::string& out, std::string_view s) {
  out += '"';
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char esc[8];
      std::snprintf(esc, sizeof esc, "\\u%04x", static_cast<unsigned>(c));
      out += esc;
    } else {
      out += c;
    }
  }
  out += '"';
}

// {"id":ID,"inputs":[{"name":INPUT,"shape":[...],"datatype":TYPE,"parameters":{PARAMETERS}}],
// "parameters":{"binary_data_output":true,REQUEST_PARAMETERS}}
std::string one_input_request(std::string_view id, std::string_view input, const std::vector<int64_t>& shape,
                              dtype type, const std::string& parameters, std::string_view request_parameters) {
  std::string out = "{\"id\":";
  append_quoted(out, id);
  out += ",\"inputs\":[{\"name\":";
  append_quoted(out, input);
  out += ",\"shape\":[";
  for (size_t k = 0; k < shape.size(); ++k) out += (k ? "," : "") + std::to_string(shape[k]);
  out += "],\"datatype\":";
  append_quoted(out, datatype_name(type));
  out += ",\"parameters\":{" + parameters + "}}],\"parameters\":{\"binary_data_output\":true";
  if (!request_parameters.empty()) (out += ',') += request_parameters;
  return out + "}}";
}

}  // namespace

std::string_view grpc_code_name(int code) {
  static const char* names[] = {
      "OK",        "CANCELLED",      "UNKNOWN",           "INVALID_ARGUMENT",   "DEADLINE_EXCEEDED",
      "NOT_FOUND", "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION",
      "ABORTED",   "OUT_OF_RANGE",   "UNIMPLEMENTED",     "INTERNAL",           "UNAVAILABLE",
      "DATA_LOSS", "UNAUTHENTICATED"};
  return code >= 0 && static_cast<size_t>(code) < std::size(names) ? names[code] : "UNKNOWN";
}

std::string binary_request_header(std::string_view id, std::string_view input, const tensor& t,
                                  std::string_view request_parameters) {
  return one_input_request(id, input, t.shape, t.type, "\"binary_data_size\":" + std::to_string(t.data.size()),
                           request_parameters);
}

std::string shared_memory_request_body(std::string_view id, std::string_view input, const msg::shared_memory_tensor& t,
                                       std::string_view request_parameters) {
  std::string parameters = "\"shared_memory_region\":";
  append_quoted(parameters, t.region);
  parameters += ",\"shared_memory_offset\":" + std::to_string(t.offset) +
                ",\"shared_memory_byte_size\":" + std::to_string(t.byte_size);
  return one_input_request(id, input, t.shape, t.type, parameters, request_parameters);
}

// Written by hand rather than through a json object: it is on every response's path.
infer_response make_infer_response(std::string_view name, std::string_view id, const std::vector<tensor>& outputs,
                                   bool binary, const server_timing* timing,
                                   const std::map<std::string, shm_ref>* in_shm,
                                   const std::map<std::string, bool>* binary_of) {
  auto shared = [&](const tensor& t) -> const shm_ref* {
    if (!in_shm) return nullptr;
    auto it = in_shm->find(t.name);
    return it == in_shm->end() ? nullptr : &it->second;
  };
  auto as_binary = [&](const tensor& t) {
    if (shared(t)) return false;
    if (binary_of)
      if (auto it = binary_of->find(t.name); it != binary_of->end()) return it->second;
    return binary;
  };
  std::string out = "{\"model_name\":";
  append_quoted(out, name);
  out += ",\"model_version\":\"1\"";
  if (!id.empty()) {
    out += ",\"id\":";
    append_quoted(out, id);
  }
  if (timing) {
    out += ",\"parameters\":{";
    bool first = true;
    for (auto& [key, v] : timing_parameters(*timing)) {
      if (!first) out += ',';
      first = false;
      append_quoted(out, key);
      out += ':' + std::to_string(v);
    }
    if (!timing->late_paths.empty()) {
      out += first ? "" : ",";
      append_quoted(out, late_paths_key);
      out += ':';
      append_quoted(out, join_late_paths(timing->late_paths));
    }
    out += '}';
  }
  out += ",\"outputs\":[";
  size_t tail = 0;
  bool any_binary = false;
  for (size_t i = 0; i < outputs.size(); ++i) {
    auto& t = outputs[i];
    out += i ? ",{\"name\":" : "{\"name\":";
    append_quoted(out, t.name);
    out += ",\"datatype\":";
    append_quoted(out, datatype_name(t.type));
    out += ",\"shape\":[";
    for (size_t k = 0; k < t.shape.size(); ++k) out += (k ? "," : "") + std::to_string(t.shape[k]);
    out += ']';
    if (auto* ref = shared(t)) {
      out += ",\"parameters\":{\"shared_memory_region\":";
      append_quoted(out, ref->region);
      out += ",\"shared_memory_offset\":" + std::to_string(ref->offset) +
             ",\"shared_memory_byte_size\":" + std::to_string(t.data.size()) + '}';
    } else if (as_binary(t)) {
      out += ",\"parameters\":{\"binary_data_size\":" + std::to_string(t.data.size()) + '}';
      tail += t.data.size();
      any_binary = true;
    } else {
      out += ",\"data\":" + decode(t).dump(-1, ' ', false, json::error_handler_t::replace);
    }
    out += '}';
  }
  out += "]}";
  infer_response r;
  if (any_binary) {
    r.header_length = out.size();
    out.reserve(out.size() + tail);
    for (auto& t : outputs)
      if (as_binary(t)) out += t.data.view();
  }
  r.body = std::move(out);
  return r;
}

std::string error_body(std::string_view reason) {
  return json{{"error", reason}}.dump();
}

}  // namespace sloserve::kserve
