#pragma once
// Triton's shared-memory extensions over HTTP, for the KServe v2 ingress (actors/http_ingress):
// /v2/systemsharedmemory[/region/R]/{status,register,unregister} on the node's registry of
// clients' regions (ingress/shm_regions.hpp), and /v2/cudasharedmemory/..., answered as
// unavailable with the reason.

#include <optional>
#include <string>
#include <string_view>

#include "actors/http_server.hpp"

namespace sloserve {
namespace shm {
class registry;
}

namespace http {

// A shared-memory path: its kind (system, cuda), its region (empty: all) and what it asks
// (status, register, unregister).
struct shm_route {
  std::string kind, region, what;
};
// The route of /v2/{system,cuda}sharedmemory[/region/NAME]/{status,register,unregister};
// nullopt for any other path (register without a region included).
std::optional<shm_route> shared_memory_path(std::string_view path);

// Answers `req` on route `r` for the client `owner` (kserve::shm_owner): 200 with the status
// JSON or an empty body, or 400 with the reason. `regions` null: shared memory is off.
response shared_memory_call(shm::registry* regions, const std::string& owner, const request& req, const shm_route& r);

}  // namespace http
}  // namespace sloserve
