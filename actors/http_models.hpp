#pragma once
// What the KServe v2 HTTP ingress (actors/http_ingress) answers about a pipeline from the
// configuration alone: its metadata (GET /v2/models/P) and Triton's model configuration (GET
// /v2/models/P/config), the pipeline as an ensemble in the JSON of Triton's ModelConfig.

#include <string>

#include "actors/http_server.hpp"
#include "config/cluster_config.hpp"

namespace sloserve::http {

// 200 with the JSON; 404 for a pipeline `cfg` lacks.
response model_metadata(const cluster_config& cfg, const std::string& name);
response model_configuration(const cluster_config& cfg, const std::string& name);

}  // namespace sloserve::http
