#pragma once
// A frontend's intake: the client requests the transport's thread has handed to the frontend
// actor and it has not yet taken in. Past what the frontend takes in (a surge of large requests
// whose copies it cannot keep up with), they queue in its mailbox, where no deadline is looked at,
// and every one is taken in stale: almost nothing is answered in time. The gate measures the wait
// as sched::transit_guard measures a path (the wait of each request taken in, a standing queue by
// CoDel's test, Little's law on the rate it takes them in at), and while the wait stands the
// transport's thread answers OVERLOADED at once whatever would wait past a share of its SLO,
// before the frontend spends anything on it. Thread-safe: the transport's thread admits, the
// frontend's takes.

#include <cstdint>
#include <mutex>
#include <string>

#include "scheduling/transit_guard.hpp"

namespace sloserve {

class intake_gate {
 public:
  // A request with an SLO of `slo_s`, at `now_ns` (the node's steady clock): why it is refused, or
  // empty, and then it is counted as waiting until the frontend takes it.
  std::string admit(int64_t now_ns, double slo_s);
  // The frontend took in a request handed to it at `handed_ns`, of an SLO of `slo_s`.
  void taken(int64_t now_ns, int64_t handed_ns, double slo_s);
  uint32_t waiting() const;

 private:
  mutable std::mutex mu_;
  sched::transit_guard guard_;
  uint32_t waiting_ = 0;
};

}  // namespace sloserve
