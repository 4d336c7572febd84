#pragma once
// The partitioned model the Graft tests serve: three layers (4 floats in, then 6, then 2, and 3
// out), each 1 + 1·b ms, and the one-stage pipeline `ph` (SLO 200 ms) that runs it from whichever
// layer a request starts at. YAML of `models:` and `pipelines:`, to follow a `nodes:` list.

namespace sloserve::testing {

inline constexpr const char* partitioned_model_yaml = R"(models:
  - name: m
    input: {dtype: float32, shape: [4]}
    output: {dtype: float32, shape: [3]}
    max_batch: 4
    layers:
      - {profile: {alpha_ms: 1, beta_ms: 1}}
      - {input: {dtype: float32, shape: [6]}, profile: {alpha_ms: 1, beta_ms: 1}}
      - {input: {dtype: float32, shape: [2]}, profile: {alpha_ms: 1, beta_ms: 1}}
pipelines:
  - {name: ph, slo_ms: 200, stages: [{name: rest, model: m}]}
)";

}  // namespace sloserve::testing
