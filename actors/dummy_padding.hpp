#pragma once
// The padding requests (dummies) a routing table asks for, as one frontend sends them (a policy
// that pads its instances' batches to a configuration's rate, as Piccolo does, sets them). The routing table gives each
// padded instance its dummy rate; the frontends share it (each sends rate / frontends), spaced evenly on the caller's
// clock. CAF-free: the frontend actor owns one and asks what is due on its ticks.

#include <cstdint>
#include <string>
#include <vector>

#include "messages/types.hpp"

namespace sloserve {

class dummy_padding {
 public:
  struct dummy {
    std::string model;
    std::string node;
    uint32_t device = 0;
    double budget_ms = 0;  // the tightest budget of the stages that run the model
  };

  // Adopts a table's dummy rates; an instance it keeps keeps its progress to the next dummy.
  void apply(const msg::routing_table& t);
  // The dummies due since the previous call, at `now_s` seconds. The first call only starts the
  // clock; a gap over one second counts as one second (no burst after a stall).
  std::vector<dummy> due(double now_s);
  // Dummy requests/s this frontend sends.
  double rate() const;

 private:
  struct source {
    dummy d;
    double rate = 0;
    double credit = 0;  // dummies owed, fractional
  };
  std::vector<source> sources_;
  double last_s_ = -1;
};

}  // namespace sloserve
