#pragma once
// A learned rate predictor (scaler.predictor: lstm): an LSTM on the recent observed rates (the
// scaler observes one per vertical period, a second by default), trained online in LibTorch on
// the CPU with a fixed seed, predicting the largest rate of the next `window` observations. The
// header keeps torch out of its users.

#include <cstdint>
#include <memory>

#include "scheduling/predictor.hpp"

namespace sloserve {

struct lstm_options {
  double window = 10;     // seconds ahead whose largest rate is predicted
  size_t history = 30;    // seconds of rates the network reads
  size_t hidden = 16;     // the LSTM's hidden units
  size_t steps = 2;       // optimiser steps after each observed second
  size_t minibatch = 32;  // examples per step, drawn from the latest `memory`
  size_t memory = 512;    // examples kept
  size_t warm = 20;       // examples before it trusts the network (until then: the recent maximum)
  uint64_t seed = 17;
};

// Null when the binary was built without LibTorch.
std::unique_ptr<sched::rate_predictor> make_lstm_predictor(const lstm_options& o = {});

}  // namespace sloserve
