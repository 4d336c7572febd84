#pragma once
// The KServe v2 inference protocol's HTTP/REST bodies (kserve.github.io, "Open Inference
// Protocol"): inference requests with tensors as JSON `data` or through the binary tensor
// extension, inference responses, and the names of its datatypes. Pure: the HTTP ingress
// (actors/http_ingress) and the load client call it.

#include <map>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "messages/types.hpp"
#include "pipelines/expected.hpp"
#include "pipelines/tensor.hpp"

namespace sloserve::kserve {

// "FP32", "FP16", "INT64", "INT32", "UINT8".
std::string_view datatype_name(dtype t);
std::optional<dtype> parse_datatype(std::string_view name);
// Every datatype served, comma-separated (for errors).
std::string datatype_list();
// An IEEE half-precision number's value.
float from_half(uint16_t h);

struct infer_request {
  std::string id;                    // echoed in the response; empty when the client gave none
  std::vector<tensor> inputs;        // in the request's order, named as the request names them
  bool binary_outputs = false;       // `parameters.binary_data_output`: outputs through the binary extension
  std::vector<std::string> outputs;  // the outputs it asked for (`outputs[].name`); empty: all
  // Outputs whose own `parameters.binary_data` says how they travel, over binary_outputs.
  std::map<std::string, bool> binary_of;
  // The classification extension: outputs asked for as their top-k classes
  // (`parameters.classification`: k).
  std::map<std::string, uint32_t> classification;
  // Triton's shared-memory extension: inputs whose bytes lie in a region (the index of their entry
  // in `inputs`, which has their name, type and shape and no data), and outputs to write into one.
  std::vector<std::pair<size_t, shm_ref>> shm_inputs;
  std::map<std::string, shm_ref> shm_outputs;
  // Request parameters sloserve reads: a partitioned model's start layer, and the request's own
  // SLO in ms (0: the pipeline's).
  uint32_t start_layer = 0;
  double slo_ms = 0;
};

// A POST /v2/models/{name}/infer body. With the binary extension, `header_length` is the
// Inference-Header-Content-Length: the JSON is the first header_length bytes and the inputs with
// `parameters.binary_data_size` follow in their order. The error says what is wrong, for a 400.
expected<infer_request> parse_infer_request(std::string_view body, std::optional<size_t> header_length);
// The same over a body the inputs share: binary inputs are views of its bytes (no copy).
expected<infer_request> parse_infer_body(const bytes& body, std::optional<size_t> header_length);

// The same for the form binary and shared-memory requests take, read without a document
// (kserve_fast.cpp); nothing when the request is in any other form or wrong in any way, for
// parse_infer_body to read and judge.
std::optional<infer_request> parse_request_fast(const bytes& body, std::optional<size_t> header_length);
// The full reader alone (a JSON document), which parse_infer_body falls back to.
expected<infer_request> parse_request_document(const bytes& body, std::optional<size_t> header_length);

struct infer_response {
  std::string body;
  std::optional<size_t> header_length;  // set when outputs travel as binary
};

// What the server spent on a request, in a response's `parameters` as int64 microseconds:
// sloserve_total_us (from its arrival at the frontend to its reply), sloserve_queue_us and
// sloserve_compute_us (on the devices, summed over its stages), and per stage
// sloserve_stage_NAME_queue_us and sloserve_stage_NAME_compute_us (over its invocations). With
// per-path SLOs, a string sloserve_late_paths: the leaf stages that finished after their own SLO,
// comma-separated (absent when none).
struct server_timing {
  int64_t total_us = 0, queue_us = 0, compute_us = 0;
  struct stage {
    std::string name;
    int64_t queue_us = 0, compute_us = 0;
  };
  std::vector<stage> stages;  // in the order the request's stages first answered
  std::vector<std::string> late_paths{};
};
inline constexpr const char* timing_keys[] = {"sloserve_total_us", "sloserve_queue_us", "sloserve_compute_us"};
inline constexpr const char* late_paths_key = "sloserve_late_paths";
// The timing of a frontend's reply (its late paths included).
server_timing timing_of(const msg::client_reply& r);
// The late paths as the parameter carries them, and back.
std::string join_late_paths(const std::vector<std::string>& leaves);
std::vector<std::string> split_late_paths(std::string_view text);
// The response parameters of `t`, in that order: the totals, then each stage's.
std::vector<std::pair<std::string, int64_t>> timing_parameters(const server_timing& t);
// The reply fields a client fills from a response's timing: total_ms, one stage timing with
// the queue and compute times (no node, model or batch), and the late paths.
void apply_timing(const server_timing& t, msg::client_reply& r);

// The response to a request `id` of model `name` (a pipeline): each output with its name; as
// JSON `data`, or, with `binary`, through the binary extension (an output in `binary_of` as it
// says); with `timing`, its parameters. Outputs named in `in_shm` were written into those
// regions: their entries carry the region's parameters (shared_memory_byte_size: the bytes
// written) and no data. The header length is set when any output travels as binary.
infer_response make_infer_response(std::string_view name, std::string_view id, const std::vector<tensor>& outputs,
                                   bool binary, const server_timing* timing = nullptr,
                                   const std::map<std::string, shm_ref>* in_shm = nullptr,
                                   const std::map<std::string, bool>* binary_of = nullptr);

// The classification extension: `t`'s top `count` classes (its last dimension's elements, the
// highest values first, the lower index first among equals; at most as many as it has) as BYTES
// strings "value:index[:label]", `labels[index]` where there is one, in `t`'s shape with the last
// dimension the classes given. Refused for a scalar, a BYTES tensor or an empty last dimension.
expected<tensor> classify(const tensor& t, uint32_t count, const std::vector<std::string>& labels);
// Largest k a request may ask for.
constexpr uint32_t max_classification = 1u << 20;

// The shared-memory parameters of an input or output (shared_memory_region, _offset, _byte_size)
// in `params`; nullopt when it names no region; an error when they are incomplete or wrong.
// `where` names the tensor in errors.
expected<std::optional<shm_ref>> shm_parameters(const nlohmann::json& params, const std::string& where);
// The timing in a response body's parameters (the JSON header of `header_length` bytes, or the
// whole body); nullopt when it has none.
std::optional<server_timing> response_timing(std::string_view body, std::optional<size_t> header_length);

// The JSON header of a request `id` whose one input `t`, named `input`, travels as binary data
// after it (the binary tensor extension), binary outputs asked for.
// `request_parameters`, when not empty, is more of the request's parameters, as JSON members
// (`"slo_ms":50,"start_layer":2`).
std::string binary_request_header(std::string_view id, std::string_view input, const tensor& t,
                                  std::string_view request_parameters = {});

// The JSON body of a request `id` whose one input, named `input`, lies in a registered system
// shared-memory region (`t`'s region, offset and byte size), binary outputs asked for.
std::string shared_memory_request_body(std::string_view id, std::string_view input, const msg::shared_memory_tensor& t,
                                       std::string_view request_parameters = {});

// The name of gRPC status code `code` (grpc::StatusCode's numbering): "OK", "INVALID_ARGUMENT",
// ...; "UNKNOWN" for a number it does not have.
std::string_view grpc_code_name(int code);

// {"error": "..."}, the protocol's error body.
std::string error_body(std::string_view reason);

}  // namespace sloserve::kserve
