// The LSTM rate predictor (gpu/lstm_predictor.hpp). Torch headers stay in this file.
//
// Each example is a window of `history` observed rates and, as its target, the largest rate of
// the `window` observations that followed it; both are divided by the window's mean (plus one), so
// the network learns the shape of the load, not its scale. After every observation the
// newest complete example joins a bounded memory and a few Adam steps train on minibatches drawn
// from it with a seeded generator: the same rates give the same predictions.

#include "gpu/lstm_predictor.hpp"

#include <torch/nn/functional/loss.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/rnn.h>
#include <torch/optim/adam.h>

#include <algorithm>
#include <deque>
#include <mutex>
#include <numeric>
#include <random>
#include <vector>

namespace sloserve {
namespace {

class lstm_predictor final : public sched::rate_predictor {
 public:
  explicit lstm_predictor(const lstm_options& o) : o_(o), pick_(o.seed) {
    o_.history = std::max<size_t>(o_.history, 2);
    o_.window = std::max(o_.window, 1.0);
    {
      // Initial weights come from torch's global generator: seeded, and one model at a time.
      static std::mutex seeding;
      std::lock_guard g(seeding);
      torch::manual_seed(o_.seed);
      lstm_ = torch::nn::LSTM(torch::nn::LSTMOptions(1, static_cast<int64_t>(o_.hidden)).batch_first(true));
      head_ = torch::nn::Linear(static_cast<int64_t>(o_.hidden), 1);
    }
    auto params = lstm_->parameters();
    for (auto& p : head_->parameters()) params.push_back(p);
    adam_ = std::make_unique<torch::optim::Adam>(params, torch::optim::AdamOptions(1e-2));
  }

  std::string_view name() const override { return "lstm"; }

  void observe(double rate) override {
    rates_.push_back(std::max(0.0, rate));
    auto ahead = static_cast<size_t>(o_.window);
    while (rates_.size() > o_.history + ahead) rates_.pop_front();
    if (rates_.size() == o_.history + ahead) {
      example e;
      e.inputs.assign(rates_.begin(), rates_.begin() + static_cast<std::ptrdiff_t>(o_.history));
      double scale = scale_of(e.inputs);
      for (auto& x : e.inputs) x /= scale;
      e.target = *std::max_element(rates_.begin() + static_cast<std::ptrdiff_t>(o_.history), rates_.end()) / scale;
      memory_.push_back(std::move(e));
      while (memory_.size() > o_.memory) memory_.pop_front();
      train();
    }
    predicted_ = forecast();
  }

  double predict() const override { return predicted_; }

 private:
  struct example {
    std::vector<double> inputs;
    double target = 0;
  };

  static double scale_of(const std::vector<double>& xs) {
    return 1 + std::accumulate(xs.begin(), xs.end(), 0.0) / static_cast<double>(xs.size());
  }

  torch::Tensor run(const torch::Tensor& x) {
    auto out = std::get<0>(lstm_->forward(x));
    return head_->forward(out.select(1, out.size(1) - 1)).squeeze(1);
  }

  void train() {
    torch::AutoGradMode grad(true);
    size_t n = std::min(o_.minibatch, memory_.size());
    std::uniform_int_distribution<size_t> any(0, memory_.size() - 1);
    for (size_t step = 0; step < o_.steps; ++step) {
      std::vector<float> xs, ys;
      xs.reserve(n * o_.history);
      for (size_t k = 0; k < n; ++k) {
        // The newest example always, the rest at random from memory.
        auto& e = k == 0 ? memory_.back() : memory_[any(pick_)];
        for (double x : e.inputs) xs.push_back(static_cast<float>(x));
        ys.push_back(static_cast<float>(e.target));
      }
      auto x =
          torch::from_blob(xs.data(), {static_cast<int64_t>(n), static_cast<int64_t>(o_.history), 1}, torch::kFloat32);
      auto y = torch::from_blob(ys.data(), {static_cast<int64_t>(n)}, torch::kFloat32);
      adam_->zero_grad();
      auto loss = torch::nn::functional::mse_loss(run(x), y);
      loss.backward();
      adam_->step();
    }
  }

  // The largest rate of the next window: the network's, once it has seen `warm` examples, and
  // never below the last observed rate; before that, the largest of the recent observations.
  double forecast() {
    if (rates_.empty()) return 0;
    double last = rates_.back();
    size_t have = std::min(rates_.size(), o_.history);
    std::vector<double> recent(rates_.end() - static_cast<std::ptrdiff_t>(have), rates_.end());
    double recent_max = *std::max_element(recent.begin(), recent.end());
    if (memory_.size() < o_.warm || have < o_.history) return recent_max;
    double scale = scale_of(recent);
    std::vector<float> xs;
    for (double x : recent) xs.push_back(static_cast<float>(x / scale));
    torch::NoGradGuard no_grad;
    auto x = torch::from_blob(xs.data(), {1, static_cast<int64_t>(o_.history), 1}, torch::kFloat32);
    double out = run(x).item<float>() * scale;
    return std::max(out, last);
  }

  lstm_options o_;
  torch::nn::LSTM lstm_{nullptr};
  torch::nn::Linear head_{nullptr};
  std::unique_ptr<torch::optim::Adam> adam_;
  std::deque<double> rates_;
  std::deque<example> memory_;
  std::mt19937_64 pick_;
  double predicted_ = 0;
};

}  // namespace

std::unique_ptr<sched::rate_predictor> make_lstm_predictor(const lstm_options& o) {
  return std::make_unique<lstm_predictor>(o);
}

}  // namespace sloserve
