#pragma once
// What both KServe v2 ingresses (HTTP and gRPC) do around the frontend: a pipeline's signature
// as the protocol shows it, a request's inputs checked and turned into a client request, and the
// reply's outputs named and shaped as the client sent them.

#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "config/cluster_config.hpp"
#include "ingress/shm_regions.hpp"
#include "messages/types.hpp"
#include "pipelines/expected.hpp"

namespace sloserve::kserve {

struct tensor_signature {
  std::string name;
  tensor_spec spec;
  size_t model = 0;  // the model that takes or makes it (cfg.models)
};

// The pipeline's input (its root model's, named `models[].input.name`) and outputs (its leaves'
// models': named `models[].output.name` for one leaf, after the leaf stages for several). A leaf
// invoked once per row of an earlier stage's output (a `fanout` stage or one after it) answers
// its invocations stacked: its shape has a leading -1 ([k, ...], k >= 0).
struct pipeline_signature {
  tensor_signature input;
  std::vector<tensor_signature> outputs;
};
pipeline_signature signature_of(const cluster_config& cfg, const pipeline& p);
// What metadata and configuration declare of `s`'s outputs: each, and beside each per-row one
// (a leading dimension of -1) its NAME_rows, INT64, one count per item (a scalar per item: `[N]`
// for a batch of N), which a batched reply carries.
std::vector<tensor_signature> declared_outputs(const pipeline_signature& s);

// A pipeline as Triton's model configuration describes an ensemble (Triton's ModelConfig RPC and
// GET /v2/models/{m}/config): its input and outputs without the batch dimension (`max_batch_size`
// items may come batched), each stage a step with the tensors it reads and makes, and the
// pipeline's SLO among the parameters.
struct model_config {
  struct tensor {
    std::string name;
    std::string data_type;  // Triton's: TYPE_FP32, TYPE_INT64, TYPE_STRING, ...
    std::vector<int64_t> dims;
  };
  struct step {
    std::string model;
    std::vector<std::pair<std::string, std::string>> input_map;   // the model's input <- a pipeline tensor
    std::vector<std::pair<std::string, std::string>> output_map;  // the model's output -> a pipeline tensor
  };
  std::string name;
  int64_t max_batch_size = 0;
  std::vector<tensor> inputs, outputs;
  std::vector<step> steps;
  std::vector<std::pair<std::string, std::string>> parameters;
};
model_config config_of(const cluster_config& cfg, const pipeline& p);
// Triton's name of a data type: TYPE_ and the protocol's, TYPE_STRING for BYTES.
std::string triton_type(dtype t);

// A request for `p` as the frontend takes it, and how to give its reply back. A client that
// batches sends [N, ...shape]: N requests to the frontend, one per item, answered as one.
struct prepared_call {
  std::vector<msg::client_request> requests;       // one per item, in order (one when not batched)
  bool batched = false;                            // the client sent a leading batch dimension: outputs get it too
  std::vector<std::string> outputs;                // the outputs the client asked for, by name; empty: all
  std::map<std::string, uint32_t> classification;  // outputs asked for as their top k classes
  bool wants(const std::string& name) const {
    return outputs.empty() || std::find(outputs.begin(), outputs.end(), name) != outputs.end();
  }
};

// A batched request's per-row output NAME comes with NAME + this: INT64 [N], each item's rows.
inline constexpr const char* rows_suffix = "_rows";

// Most items one batched request may hold.
constexpr int64_t max_batch_items = 1024;

// What a request may say of itself in its parameters: the layer a partitioned model's server
// starts at (a partitioned model's; 0: the whole model), and its own SLO (0: the pipeline's).
struct call_parameters {
  uint32_t start_layer = 0;
  double slo_ms = 0;
  std::vector<std::string> outputs{};  // the request's `outputs`, by name; empty: all
  uint32_t version = 0;                // the model version its stages run (version_of); 0: by their weights
  std::map<std::string, uint32_t> classification{};  // outputs asked for as their top k classes
};

// A pipeline's versions are the model versions its stages list, and 1 (pipeline_versions): what
// its metadata lists, and what the version paths and fields accept. The version `v` names: 0 for
// none named (empty), nullopt for one the pipeline does not have.
std::optional<uint32_t> version_of(const pipeline& p, const std::string& v);
std::vector<std::string> version_names(const pipeline& p);
// The refusal of version `v`: "pipeline 'p' has no version 'v'; its versions: 1, 2".
std::string no_version(const pipeline& p, const std::string& v);

// Checks `inputs` (one tensor, named as the pipeline's input, with the declared shape or the
// declared shape behind a batch dimension of N in [1, max_batch_items], as the model takes it;
// from a later start layer, as that layer takes it), the outputs asked for (each one of the
// signature's) and those asked as classes (numbers, not a scalar); the error is the client's fault. The items' requests
// are numbered from `request_id` up.
expected<prepared_call> prepare_call(const cluster_config& cfg, const pipeline& p, std::vector<tensor> inputs,
                                     uint64_t request_id, call_parameters params = {});

// Whether a query invokes `stage` of `p` once per row of an earlier stage's output: it or a stage
// it follows alone has a `fanout`.
bool invoked_per_row(const pipeline& p, size_t stage);

// Where the frontend delivers one item's reply.
using item_sink = std::shared_ptr<const std::function<void(msg::client_reply)>>;

// The node's intake gate (actors/intake_gate.hpp) as the ingresses see it: admits `rq`, of an
// SLO of `slo_ms`, stamping when it was handed to the frontend, or says why not (and counts it).
using intake_admit = std::function<std::string(msg::client_request& rq, double slo_ms)>;
// Whether item `rq` of a call to a pipeline of `pipeline_slo_ms` goes on to the frontend: yes
// without a gate; else as `admit` says, a refused item answered OVERLOADED with the reason, now,
// through its `sink`.
bool admitted(const intake_admit& admit, msg::client_request& rq, double pipeline_slo_ms, const item_sink& sink);
// The sinks of a call's `n` items: the result's (i) is item i's. `done` runs once, with every
// item's reply in the items' order, when the last arrives (on whichever thread delivers it); a
// second reply for an item is ignored.
std::function<item_sink(size_t)> gather_replies(size_t n, std::function<void(std::vector<msg::client_reply>)> done);

// The items' replies of `call` (in the items' order) as one. The first item not answered OK,
// with its status, its reason saying which item of how many; else OK, each item's outputs shaped
// as shape_outputs does, stacked over the items when the client batched ([N, ...]). A leaf
// invoked per row answers [N, K, ...] in a batch of N > 1, K the most rows an item has (the rest
// zero), and beside it `<name>_rows`, INT64 [N]: each item's rows. Outputs asked as classes
// come as kserve::classify gives them, labelled by their model's `labels`.
msg::client_reply combine_replies(const cluster_config& cfg, const pipeline& p, const prepared_call& call,
                                  std::vector<msg::client_reply> replies);

// Turns the frontend's results (one tensor per leaf invocation, named by its stage) into the
// signature's outputs: each once, in the signature's order, named as it names them, a leaf
// invoked per row stacked along a leading dimension; restores the client's batch dimension; and
// keeps the outputs the client asked for.
void shape_outputs(const cluster_config& cfg, const pipeline& p, const prepared_call& call,
                   std::vector<tensor>& outputs);

// The bearer tokens an ingress admits under security (security.tokens and every tenant's), and
// the tenant each of a tenant's stands for.
struct token_table {
  std::set<std::string> tokens;  // empty: no token needed
  std::map<std::string, std::string> tenant_of;
};
expected<token_table> read_tokens(const security_options& sec);
// Whether `authorization` ("Bearer TOKEN") is admitted by `table`; empty: yes, or why not.
std::string refused_token(const token_table& table, const std::string* authorization);
// The tenant a request is from: under tokens, its token's (none for a token of no tenant);
// without, the one the client names (the Sloserve-Tenant header, gRPC's sloserve-tenant).
std::string tenant_of(const token_table& table, const std::string* authorization, const std::string* named);
// Whose shared-memory regions a request sees (ingress/shm_regions.hpp): under tokens, its token's;
// without, those of every client that presents none.
std::string shm_owner(const token_table& table, const std::string* authorization);

// The shared-memory side of a call: the regions its outputs are asked into, and the bytes of each.
struct shared_outputs {
  std::map<std::string, shm_ref> refs;
  std::map<std::string, shm::window> windows;
};
// Reads the inputs `shm_inputs` names (entries of `inputs` without data) in place from `owner`'s
// regions, and finds the windows of the outputs `outputs` asks into regions. An error, the
// client's fault, when shared memory is off (`regions` null or off), a region is unknown or too
// small, or a size is not its tensor's.
expected<shared_outputs> take_shared_memory(const shm::registry* regions, const std::string& owner,
                                            std::vector<tensor>& inputs,
                                            const std::vector<std::pair<size_t, shm_ref>>& shm_inputs,
                                            const std::map<std::string, shm_ref>& outputs);
// Writes each output `out` names into its window; an error when one is larger than its window.
status write_shared_outputs(const shared_outputs& out, const std::vector<tensor>& outputs);

}  // namespace sloserve::kserve
