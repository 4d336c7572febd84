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

// Standard base64 (RFC 4648, padding optional) decoded; nullopt for any other character.
std::optional<std::string> from_base64(std::string_view text) {
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    int v = c >= 'A' && c <= 'Z'   ? c - 'A'
            : c >= 'a' && c <= 'z' ? c - 'a' + 26
            : c >= '0' && c <= '9' ? c - '0' + 52
            : c == '+'             ? 62
            : c == '/'             ? 63
                                   : -1;
    if (c == '=' && text.find_first_not_of('=', i) == std::string_view::npos) break;
    if (v < 0) return std::nullopt;
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xFF));
    }
  }
  return out;
}

// Triton's CUDA register request's body: {"raw_handle": {"b64": cudaIpcMemHandle_t in base64},
// "device_id", "byte_size"}.
response add_cuda(shm::registry& regions, const std::string& owner, const std::string& region,
                  const std::string& text) {
  auto body = json::parse(text, nullptr, false);
  if (body.is_discarded() || !body.is_object()) return refused("the register request must be a JSON object");
  auto handle = body.find("raw_handle");
  if (handle == body.end() || !handle->is_object() || !handle->contains("b64") || !(*handle)["b64"].is_string())
    return refused("the register request needs \"raw_handle\": {\"b64\": the cudaIpcMemHandle_t in base64}");
  auto raw = from_base64((*handle)["b64"].get<std::string>());
  if (!raw) return refused("\"raw_handle\".\"b64\" is not base64");
  for (auto* k : {"device_id", "byte_size"})
    if (!body.contains(k) || !body[k].is_number_unsigned())
      return refused(std::string("the register request needs \"") + k + "\", a non-negative integer");
  auto done =
      regions.add_cuda(owner, region, *raw, body["device_id"].get<int64_t>(), body["byte_size"].get<uint64_t>());
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
  if (!regions) return refused(shm::off_reason);
  bool cuda = r.kind == "cuda";
  if (auto why = cuda ? regions->cuda_unavailable() : std::string(); !why.empty()) return refused(why);
  auto k = cuda ? shm::kind::cuda : shm::kind::system;
  if (r.what == "register")
    return cuda ? add_cuda(*regions, owner, r.region, req.body) : add(*regions, owner, r.region, req.body);
  if (r.what == "unregister") {
    auto done = regions->remove(owner, r.region, k);
    return done ? ok("") : refused(done.error());
  }
  auto listed = regions->list(owner, r.region, k);
  if (!listed) return refused(listed.error());
  json out = json::array();
  for (auto& x : *listed)
    out.push_back(cuda ? json{{"name", x.name}, {"device_id", x.device}, {"byte_size", x.byte_size}}
                       : json{{"name", x.name}, {"key", x.key}, {"offset", x.offset}, {"byte_size", x.byte_size}});
  return ok(out.dump());
}

}  // namespace sloserve::http
