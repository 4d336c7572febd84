#include "actors/http_shared_memory.hpp"

#include <nlohmann/json.hpp>

#include "ingress/shm_regions.hpp"
#include "messages/kserve_v2.hpp"

namespace sloserve::http {

namespace {

using json = nlohmann::json;

response ok(std::string body) {
  return {200, std::move(body), "application/json"};
}
response refused(const std::string& reason) {
  return {400, kserve::error_body(reason), "application/json"};
}

// The register request's body: {"key", "offset" (0 if left out), "byte_size"}.
response add(shm::registry& regions, const std::string& owner, const std::string& region, const std::string& text) {
  auto body = json::parse(text, nullptr, false);
  if (body.is_discarded() || !body.is_object()) return refused("the register request must be a JSON object");
  if (!body.contains("key") || !body["key"].is_string()) return refused("the register request needs a \"key\" string");
  for (auto* k : {"offset", "byte_size"})
    if (body.contains(k) && !body[k].is_number_unsigned())
      return refused(std::string("\"") + k + "\" must be a non-negative integer");
  if (!body.contains("byte_size")) return refused("the register request needs a \"byte_size\"");
  auto done = regions.add(owner, region, body["key"].get<std::string>(), body.value("offset", uint64_t{0}),
                          body["byte_size"].get<uint64_t>());
  return done ? ok("") : refused(done.error());
}

}  // namespace

std::optional<shm_route> shared_memory_path(std::string_view path) {
  for (std::string_view kind : {"system", "cuda"}) {
    auto prefix = "/v2/" + std::string(kind) + "sharedmemory/";
    if (path.substr(0, prefix.size()) != prefix) continue;
    auto rest = path.substr(prefix.size());
    shm_route r{std::string(kind), "", ""};
    if (rest.substr(0, 7) == "region/") {
      rest = rest.substr(7);
      auto slash = rest.rfind('/');
      if (slash == std::string_view::npos || slash == 0) return std::nullopt;
      r.region = std::string(rest.substr(0, slash));
      rest = rest.substr(slash + 1);
    }
    if (rest != "status" && rest != "register" && rest != "unregister") return std::nullopt;
    if (rest == "register" && r.region.empty()) return std::nullopt;
    r.what = std::string(rest);
    return r;
  }
  return std::nullopt;
}

response shared_memory_call(shm::registry* regions, const std::string& owner, const request& req, const shm_route& r) {
  if (r.kind == "cuda") return refused(shm::cuda_unavailable);
  if (!regions) return refused(shm::off_reason);
  if (r.what == "register") return add(*regions, owner, r.region, req.body);
  if (r.what == "unregister") {
    auto done = regions->remove(owner, r.region);
    return done ? ok("") : refused(done.error());
  }
  auto listed = regions->list(owner, r.region);
  if (!listed) return refused(listed.error());
  json out = json::array();
  for (auto& x : *listed)
    out.push_back({{"name", x.name}, {"key", x.key}, {"offset", x.offset}, {"byte_size", x.byte_size}});
  return ok(out.dump());
}

}  // namespace sloserve::http
