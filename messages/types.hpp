#pragma once
// Every message sloserve exchanges, as plain C++ values. They are defined once, in
// messages/sloserve.capnp: the build generates the structs (sloserve_structs.hpp) and their
// Cap'n Proto conversions from it (tools/gen_messages.py). Same-process destinations receive them
// directly as CAF messages; across processes they travel as Cap'n Proto (see codec.hpp).

#include <string>
#include <string_view>
#include <utility>

#include "messages/sloserve_structs.hpp"

namespace sloserve::msg {

std::string_view status_name(status s);

// An invocation's device when a frontend forwards it to the frontend that dispatches its model
// (ModelRoute.dispatcher): that frontend places it in the model's turn and relays the result.
inline constexpr uint32_t forwarded_device = 0xFFFFFFFFu;

// The SLO a request is served under: the one its client declares, else its pipeline's.
inline double slo_ms_of(const client_request& rq, double pipeline_slo_ms) {
  return rq.slo_ms > 0 ? rq.slo_ms : pipeline_slo_ms;
}

// The reply to invocation `id` from device `device` of `node` that failed (or was dropped, or
// refused) for `reason`: every node answers an invocation it cannot run with one of these.
inline invocation_result failed_invocation(uint64_t id, status code, std::string reason, std::string node,
                                           uint32_t device = 0) {
  invocation_result r;
  r.id = id;
  r.code = code;
  r.reason = std::move(reason);
  r.node = std::move(node);
  r.device = device;
  return r;
}

}  // namespace sloserve::msg
