#pragma once
// Every message sloserve exchanges, as plain C++ values. Same-process destinations receive these
// directly as CAF messages; across processes they travel as Cap'n Proto (see codec.hpp).

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "pipelines/tensor.hpp"

namespace sloserve::msg {

enum class status : uint8_t { ok, dropped, error, overloaded };
std::string_view status_name(status s);

// Client -> frontend.
struct client_request {
  std::string pipeline;
  uint64_t request_id = 0;
  std::vector<tensor> inputs;
  double network_ms = -1;  // the client's measured network time; < 0 when unknown
  // The client's wall clock when it meant to send (µs since the Unix epoch); 0 when unknown.
  // The frontend counts the time since then as spent from the SLO.
  int64_t sent_at_us = 0;
};

struct stage_timing {
  std::string stage;
  std::string node;
  uint32_t device = 0;
  uint32_t batch = 0;
  double queue_ms = 0;
  double exec_ms = 0;
};

// Frontend -> client: exactly one per request.
struct client_reply {
  uint64_t request_id = 0;
  status code = status::ok;
  std::string reason;
  std::vector<tensor> outputs;
  std::vector<stage_timing> timings;
  double total_ms = 0;
};

// Frontend -> worker: run one stage on one device.
struct invocation {
  uint64_t id = 0;
  std::string frontend;  // node that awaits the result
  std::string model;
  uint32_t device = 0;
  int64_t budget_ns = 0;  // time left until this stage's deadline when sent
  std::vector<tensor> inputs;
  // Not on the wire: when the node took it in (its steady clock, ns since the clock's epoch).
  // The deadline runs from there, not from when a busy device gets to its mailbox.
  int64_t received_ns = 0;
  // Not on the wire: its inputs were checked on this node already (by the frontend, at ingress).
  bool checked = false;
};

// Worker -> frontend.
struct invocation_result {
  uint64_t id = 0;
  status code = status::ok;
  std::string reason;
  std::vector<tensor> outputs;
  std::string node;
  uint32_t device = 0;
  uint32_t batch = 0;
  int64_t queue_ns = 0;
  int64_t exec_ns = 0;
};

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

// l(b) a worker measured at start-up for a model whose entry has no profile.
struct measured_profile {
  std::string model;
  std::vector<uint32_t> batch;
  std::vector<double> latency_ms;
  bool step = false;  // the device pads batches to the listed sizes
};

// Any node -> controller: "I exist", repeated every beacon.
struct register_node {
  std::string node;
  std::vector<std::string> roles;
  uint32_t devices = 0;
  uint64_t incarnation = 0;     // changes when the node restarts
  uint64_t schedule_epoch = 0;  // epoch of the schedule the worker runs; 0: none
  std::vector<measured_profile> profiles;
  bool leaving = false;  // a worker shutting down: take it out of routing; it finishes what it holds
};

struct heartbeat {
  std::string node;
  uint64_t incarnation = 0;
  uint64_t seq = 0;
  uint64_t heard = 0;  // seq of the last heartbeat the sender got from the receiver; 0: none
};

struct session_load {
  std::string model;
  uint32_t device = 0;
  uint64_t arrived = 0;  // since the previous report
  uint64_t completed = 0;
  uint64_t dropped = 0;
  uint32_t queue_length = 0;
  double mean_latency_ms = 0;
  double mean_budget_ms = 0;  // time left to the deadline when requests arrived (network time shows here)
};

// A frontend's view of one pipeline: queries admitted and invocations of each stage (for rates
// and measured fan-out), since the previous report.
struct pipeline_load {
  std::string pipeline;
  uint64_t queries = 0;
  std::vector<uint64_t> stage_invocations;
};

struct load_report {
  std::string node;
  double window_s = 0;
  std::vector<session_load> sessions;    // from workers
  std::vector<pipeline_load> pipelines;  // from frontends
};

struct route_instance {
  std::string node;
  uint32_t device = 0;
  double weight = 1;
};

struct model_route {
  std::string model;
  std::vector<route_instance> instances;
};

struct stage_budget {
  std::string pipeline;
  std::string stage;
  double budget_ms = 0;
};

// Controller -> frontends.
struct routing_table {
  uint64_t epoch = 0;
  std::vector<model_route> routes;
  std::vector<stage_budget> budgets;
};

struct session_schedule {
  std::string model;
  uint32_t batch = 1;
  bool operator==(const session_schedule&) const = default;
};

struct device_schedule {
  uint32_t device = 0;
  double duty_cycle_ms = 0;  // 0: work-conserving round-robin
  std::vector<session_schedule> sessions;
  bool operator==(const device_schedule&) const = default;
};

// Controller -> one worker.
struct schedule {
  uint64_t epoch = 0;
  std::vector<device_schedule> devices;
};

// Controller (or scaler) -> worker: run this device's next batches with `threads` intra-op
// threads (vertical scaling in place; emulated devices ignore it).
struct resize {
  uint32_t device = 0;
  uint32_t threads = 1;
};

// Client -> frontend: is the frontend ready to serve?
struct status_request {
  uint64_t token = 0;
};

struct status_reply {
  uint64_t token = 0;
  bool ready = false;
  std::string detail;
};

using body = std::variant<client_request, client_reply, invocation, invocation_result, register_node, heartbeat,
                          load_report, routing_table, schedule, status_request, status_reply, resize>;

struct envelope {
  std::string from;  // sending node; empty for clients
  body content;
};

}  // namespace sloserve::msg
