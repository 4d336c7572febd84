#include "actors/grpc_tensors.hpp"

#include <cstring>
#include <limits>

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
        it->second.int64_param() > 1000000)
      return fail("parameter start_layer must be an int64_param layer number");
    out.start_layer = static_cast<uint32_t>(it->second.int64_param());
  }
  if (auto it = params.find("slo_ms"); it != params.end()) {
    if (it->second.parameter_choice_case() != pb::InferParameter::kInt64Param || it->second.int64_param() < 0 ||
        it->second.int64_param() > 3600000)
      return fail("parameter slo_ms must be an int64_param in [0, 3600000]");
    out.slo_ms = static_cast<double>(it->second.int64_param());
  }
  for (auto& o : req.outputs()) out.outputs.push_back(o.name());
  return out;
}

// Input `i` of a ModelInfer request as a tensor: raw_input_contents, or the contents field of
// its datatype. The error is the client's fault.
expected<tensor> input_tensor(const pb::ModelInferRequest& req, int i) {
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
  if (req.raw_input_contents_size() > 0) {
    if (req.raw_input_contents_size() != req.inputs_size())
      return fail("raw_input_contents has " + std::to_string(req.raw_input_contents_size()) + " entries for " +
                  std::to_string(req.inputs_size()) + " inputs");
    if (in.has_contents()) return fail(where + " has contents, and the request raw_input_contents too");
    t.data = bytes::copy_of(req.raw_input_contents(i));
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
