#include "actors/grpc_tensors.hpp"

#include <cstring>
#include <limits>

#include "pipelines/request_limits.hpp"

namespace sloserve::grpc_tensors {

namespace pb = inference;

namespace {

// Elements of a typed contents field as little-endian bytes of `type`; false when a value does
// not fit it.
template <class Out, class Field>
bool pack(const Field& values, std::string& out) {
  out.resize(static_cast<size_t>(values.size()) * sizeof(Out));
  auto* p = out.data();
  for (auto v : values) {
    if (v < std::numeric_limits<Out>::lowest() || v > std::numeric_limits<Out>::max()) return false;
    Out x = static_cast<Out>(v);
    std::memcpy(p, &x, sizeof x);
    p += sizeof x;
  }
  return true;
}

}  // namespace

// The request parameters sloserve reads: start_layer (a partitioned model's first layer on the
// server) and slo_ms (the request's own SLO), each an int64_param.
expected<kserve::call_parameters> call_parameters_of(const pb::ModelInferRequest& req) {
  kserve::call_parameters out;
  auto& params = req.parameters();
  if (auto it = params.find("start_layer"); it != params.end()) {
    if (it->second.parameter_choice_case() != pb::InferParameter::kInt64Param || it->second.int64_param() < 0 ||
        it->second.int64_param() > limits::max_start_layer)
      return fail("parameter start_layer must be an int64_param layer number");
    out.start_layer = static_cast<uint32_t>(it->second.int64_param());
  }
  if (auto it = params.find("slo_ms"); it != params.end()) {
    if (it->second.parameter_choice_case() != pb::InferParameter::kInt64Param || it->second.int64_param() < 0 ||
        !limits::slo_in_range(static_cast<double>(it->second.int64_param())))
      return fail(std::string("parameter slo_ms must be an int64_param in ") + limits::slo_range);
    out.slo_ms = static_cast<double>(it->second.int64_param());
  }
  for (auto& o : req.outputs()) {
    out.outputs.push_back(o.name());
    auto c = o.parameters().find("classification");
    if (c == o.parameters().end()) continue;
    if (c->second.parameter_choice_case() != pb::InferParameter::kInt64Param || c->second.int64_param() < 1 ||
        c->second.int64_param() > kserve::max_classification)
      return fail("output '" + o.name() + "': parameter classification must be an int64_param, the number of classes " +
                  "to return (1 to " + std::to_string(kserve::max_classification) + ")");
    out.classification[o.name()] = static_cast<uint32_t>(c->second.int64_param());
  }
  return out;
}

namespace {

// The shared-memory parameters of an input or output (Triton's extension): nullopt when it names
// no region.
expected<std::optional<shm_ref>> shm_parameters(const google::protobuf::Map<std::string, pb::InferParameter>& params,
                                                const std::string& where) {
  auto region = params.find("shared_memory_region"), offset = params.find("shared_memory_offset"),
       size = params.find("shared_memory_byte_size");
  if (region == params.end() && size == params.end() && offset == params.end()) return std::optional<shm_ref>();
  if (region == params.end() || size == params.end())
    return fail(where +
                ": shared_memory_region and shared_memory_byte_size must both be given (and "
                "shared_memory_offset may be)");
  if (region->second.parameter_choice_case() != pb::InferParameter::kStringParam)
    return fail(where + ": shared_memory_region must be a string_param");
  auto count = [&](auto it, const char* key, uint64_t& v) -> status {
    if (it == params.end()) return {};
    if (it->second.parameter_choice_case() != pb::InferParameter::kInt64Param || it->second.int64_param() < 0)
      return fail(where + ": " + key + " must be a non-negative int64_param");
    v = static_cast<uint64_t>(it->second.int64_param());
    return {};
  };
  shm_ref ref;
  ref.region = region->second.string_param();
  if (auto ok = count(offset, "shared_memory_offset", ref.offset); !ok) return fail(ok.error());
  if (auto ok = count(size, "shared_memory_byte_size", ref.byte_size); !ok) return fail(ok.error());
  return std::optional<shm_ref>(std::move(ref));
}

}  // namespace

expected<request_tensors> request_tensors_of(pb::ModelInferRequest& req) {
  request_tensors out;
  int raw_used = 0;
  for (int i = 0; i < req.inputs_size(); ++i) {
    auto& in = req.inputs(i);
    auto shared = shm_parameters(in.parameters(), "input '" + in.name() + "'");
    if (!shared) return fail(shared.error());
    std::string* raw = nullptr;
    if (!*shared && req.raw_input_contents_size() > 0) {
      if (raw_used >= req.raw_input_contents_size())
        return fail("raw_input_contents has " + std::to_string(req.raw_input_contents_size()) +
                    " entries, fewer than the inputs outside shared memory");
      raw = req.mutable_raw_input_contents(raw_used++);
    }
    auto t = input_tensor(req, i, raw, shared->has_value());
    if (!t) return fail(t.error());
    if (*shared) out.shm_inputs.emplace_back(out.inputs.size(), std::move(**shared));
    out.inputs.push_back(std::move(*t));
  }
  if (raw_used != req.raw_input_contents_size())
    return fail("raw_input_contents has " + std::to_string(req.raw_input_contents_size()) + " entries for " +
                std::to_string(raw_used) + " inputs outside shared memory");
  for (auto& o : req.outputs()) {
    auto shared = shm_parameters(o.parameters(), "output '" + o.name() + "'");
    if (!shared) return fail(shared.error());
    if (*shared) out.shm_outputs[o.name()] = std::move(**shared);
  }
  return out;
}

// Input `i` of a ModelInfer request as a tensor: `raw` (its raw_input_contents, whose buffer it
// takes), or the contents field of its datatype, or (`shared`) its name, type and shape alone.
// The error is the client's fault.
expected<tensor> input_tensor(const pb::ModelInferRequest& req, int i, std::string* raw, bool shared) {
  auto& in = req.inputs(i);
  auto where = "input '" + in.name() + "'";
  auto type = kserve::parse_datatype(in.datatype());
  if (!type)
    return fail(where + ": datatype '" + in.datatype() + "' is not one sloserve serves (" + kserve::datatype_list() +
                ")");
  tensor t;
  t.name = in.name();
  t.type = *type;
  for (auto d : in.shape()) {
    if (d < 0) return fail(where + ": shape has a negative dimension");
    t.shape.push_back(d);
  }
  if (shared) {
    if (in.has_contents()) return fail(where + " names a shared-memory region and also has contents");
    return t;
  }
  if (raw) {
    if (in.has_contents()) return fail(where + " has contents, and the request raw_input_contents too");
    t.data = bytes(std::move(*raw));  // takes the message's buffer: no copy
  } else if (in.has_contents()) {
    auto& c = in.contents();
    std::string data;
    bool fits = true;
    switch (t.type) {
      case dtype::float32:
        fits = pack<float>(c.fp32_contents(), data);
        break;
      case dtype::int64:
        fits = pack<int64_t>(c.int64_contents(), data);
        break;
      case dtype::int32:
        fits = pack<int32_t>(c.int_contents(), data);
        break;
      case dtype::int16:
        fits = pack<int16_t>(c.int_contents(), data);
        break;
      case dtype::int8:
        fits = pack<int8_t>(c.int_contents(), data);
        break;
      case dtype::uint8:
        fits = pack<uint8_t>(c.uint_contents(), data);
        break;
      case dtype::uint16:
        fits = pack<uint16_t>(c.uint_contents(), data);
        break;
      case dtype::uint32:
        fits = pack<uint32_t>(c.uint_contents(), data);
        break;
      case dtype::uint64:
        fits = pack<uint64_t>(c.uint64_contents(), data);
        break;
      case dtype::float64:
        fits = pack<double>(c.fp64_contents(), data);
        break;
      case dtype::boolean:
        for (bool b : c.bool_contents()) data.push_back(b ? 1 : 0);
        break;
      case dtype::float16:
        return fail(where + ": FP16 travels in raw_input_contents only");
      case dtype::bytes:
        data = bytes_data({c.bytes_contents().begin(), c.bytes_contents().end()});
        break;
    }
    if (!fits) return fail(where + ": a value does not fit " + in.datatype());
    t.data = bytes(std::move(data));
  } else {
    return fail(where + " has no contents and the request no raw_input_contents");
  }
  if (auto ok = check_tensor_bytes(t); !ok) return fail(where + ": " + ok.error());
  return t;
}

}  // namespace sloserve::grpc_tensors
