#pragma once
// Piccolo's section of the cluster file (`scheduler: {policy: piccolo, piccolo: {...}}`).

namespace sloserve::sched::piccolo {

struct options {
  // Throughput-cost dispatch as Theorem 1 has it: the frontends send each machine whole batches
  // in turn and devices collect a batch before they run it (worst case d + b/w under steady
  // arrivals). Off: machines fill in throughput-cost order up to their spill points, and devices
  // run what they have (lower latency under bursty arrivals where the plan has no slack).
  bool whole_batches = false;
  // With whole batches and several frontends: one frontend per model places every invocation of
  // it in one turn (the paper's central dispatcher; the other frontends forward theirs to it, one
  // hop more), so that a machine's batch fills at the planned rate. Off: each frontend sends every
  // machine its share of a batch in its own turn, and the shares fill at different times.
  bool central_dispatch = true;
  // The baseline Theorem 1 is measured against: requests go as runtime.balancer says (p2c by
  // default), one at a time, and devices run what they have; the plan is Piccolo's.
  bool runtime_balancer = false;
};

}  // namespace sloserve::sched::piccolo
