// KServe v2 inference request bodies (the HTTP ingress): JSON, and the binary tensor extension
// with a header length taken from the input's first byte.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "messages/kserve_v2.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  std::string_view body(reinterpret_cast<const char*>(data) + 1, size - 1);
  // First byte 0: plain JSON; otherwise a header length within (or just past) the body.
  std::optional<size_t> header;
  if (data[0] != 0) header = data[0] == 255 ? body.size() + 1 : body.size() * data[0] / 254;
  auto r = sloserve::kserve::parse_infer_request(body, header);
  if (!r) {
    if (r.error().empty()) std::abort();  // a refusal always says why
    return 0;
  }
  for (auto& t : r->inputs) {
    auto n = t.spec().byte_size();
    if (!n || *n != t.data.size()) std::abort();  // every tensor holds exactly its shape's bytes
  }
  // What was accepted can be answered, both ways.
  auto json_out = sloserve::kserve::make_infer_response("m", r->id, r->inputs, false);
  auto bin_out = sloserve::kserve::make_infer_response("m", r->id, r->inputs, true);
  if (json_out.body.empty() || !bin_out.header_length || *bin_out.header_length > bin_out.body.size()) std::abort();
  return 0;
}
