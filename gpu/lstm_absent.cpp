// A build without LibTorch has no LSTM predictor (gpu/lstm_predictor.hpp).

#include "gpu/lstm_predictor.hpp"

namespace sloserve {

std::unique_ptr<sched::rate_predictor> make_lstm_predictor(const lstm_options&) {
  return nullptr;
}

}  // namespace sloserve
