#pragma once
// What the control plane knows of the network between frontends and workers, and what it does
// with it. A frontend probes each worker's link with pairs of probes, one empty and one carrying
// bytes; the difference of their round trips, over those bytes, is the time each byte of a
// request adds on the way there. A model whose requests would take too long to cross a worker's
// link is not placed on that worker, whatever the link's latency for small messages: a slow link
// can still carry a stage with small inputs.

#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <vector>

#include "pipelines/model.hpp"

namespace sloserve::sched {

// One frontend's probes of one link.
class link_estimate {
 public:
  // One round: the round trip of the empty probe and of the probe with `bytes`.
  void add(double empty_ms, double loaded_ms, int64_t bytes);
  bool known() const { return !rounds_.empty(); }
  // Milliseconds each megabyte adds: the median of the last three rounds (the smaller of two),
  // so that one hiccup of the machine is not taken for a slow link, and two slow rounds are.
  // -1 while no round is known.
  double ms_per_mb() const;
  // The round trip of an empty probe: the smallest of the last three rounds.
  double base_ms() const;
  // Whether one probe of `bytes` would hold the link longer than `ms`: then probing it as often
  // would take a share of what it carries.
  bool busy_for(int64_t bytes, double ms) const {
    return known() && ms_per_mb() * static_cast<double>(bytes) / 1e6 > ms;
  }

 private:
  struct round {
    double empty_ms, per_mb;
  };
  std::deque<round> rounds_;  // newest last, at most three
};

// Bytes a request of `m` carries to a worker: its declared input.
int64_t request_bytes(const model_spec& m);

// Per worker, the models whose requests would take longer than `limit_ms` to cross its link,
// given the link's ms per MB (the worst any frontend measured). Workers with none are left out.
std::map<std::string, std::vector<std::string>> models_too_far(const std::map<std::string, double>& ms_per_mb,
                                                               const std::vector<model_spec>& models, double limit_ms);

struct device_slot;
// Takes the models `far` names off the slots of their workers (an empty `models` list, which
// means any model, becomes the list of all the others), and drops slots that serve nothing then.
// A model that would be left with no slot at all keeps its slots: a far worker serves better
// than none.
void keep_models_off(std::vector<device_slot>& slots, const std::map<std::string, std::vector<std::string>>& far,
                     const std::vector<model_spec>& models);

}  // namespace sloserve::sched
