#include "bench/workloads.hpp"

namespace sloserve::bench {

std::string nodes_yaml(int devices, bool one_node) {
  if (one_node)
    return "nodes:\n  - {name: local, address: tcp://127.0.0.1:0, roles: [controller, frontend, worker], devices: "
           "[{kind: emulated, count: " +
           std::to_string(devices) + "}]}\n";
  std::string y = "nodes:\n  - {name: ctl, address: tcp://127.0.0.1:0, roles: [controller, frontend]}\n";
  for (int n = 0, left = devices; left > 0; ++n, left -= 8)
    y += "  - {name: w" + std::to_string(n) +
         ", address: tcp://127.0.0.1:0, roles: [worker], devices: [{kind: emulated, count: " +
         std::to_string(left < 8 ? left : 8) + "}]}\n";
  return y;
}

std::string traffic_workload() {
  return R"(models:
  - {name: ssd, input: {dtype: float32, shape: [3, 32, 32]}, output: {dtype: float32, shape: [100, 6]}, max_batch: 11, profile: {batch: [1, 3, 7, 11], latency_ms: [73, 98, 147, 216]}}
  - {name: car_classifier, input: {dtype: float32, shape: [3, 16, 16]}, output: {dtype: float32, shape: [8]}, max_batch: 16, profile: {batch: [4, 8, 16], latency_ms: [50, 75, 100]}}
  - {name: face_recognizer, input: {dtype: float32, shape: [3, 16, 16]}, output: {dtype: float32, shape: [8]}, max_batch: 16, profile: {batch: [4, 8, 16], latency_ms: [50, 90, 125]}}
pipelines:
  - name: traffic
    slo_ms: 400
    stages:
      - {name: detect, model: ssd}
      - {name: car, model: car_classifier, after: [detect], fanout: 1.5}
      - {name: face, model: face_recognizer, after: [detect], fanout: 0.5}
)";
}

std::string game_workload(int games) {
  std::string y = R"(models:
  - {name: frame_crops, input: {dtype: uint8, shape: [3, 60, 80]}, output: {dtype: float32, shape: [6, 28, 28]}, max_batch: 64, profile: {alpha_ms: 0.02, beta_ms: 0.3}}
  - {name: lenet, input: {dtype: float32, shape: [28, 28]}, output: {dtype: float32, shape: [10]}, max_batch: 128, profile: {alpha_ms: 0.005, beta_ms: 0.09}}
)";
  for (int g = 0; g < games; ++g)
    y += "  - {name: resnet50_g" + std::to_string(g) +
         ", input: {dtype: uint8, shape: [3, 60, 80]}, output: {dtype: float32, shape: [50]}, max_batch: 32, profile: "
         "{alpha_ms: 1.1, beta_ms: 5.1}}\n";
  y += "pipelines:\n";
  for (int g = 0; g < games; ++g)
    y += "  - {name: game" + std::to_string(g) +
         ", slo_ms: 50, stages: [{name: crops, model: frame_crops}, "
         "{name: digits, model: lenet, after: [crops], fanout: 6}, {name: game, model: resnet50_g" +
         std::to_string(g) + "}]}\n";
  return y;
}

}  // namespace sloserve::bench
