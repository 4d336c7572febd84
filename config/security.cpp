// `security:`: keys and tokens resolved against the cluster file, and the tenants.

#include <yaml-cpp/yaml.h>

#include <map>
#include <string>

#include "config/cluster_config.hpp"
#include "config/reader.hpp"
#include "config/settings.hpp"
#include "config/settings_io.hpp"

namespace sloserve::config_detail {

namespace {

bool looks_like_z85_key(const std::string& s) {
  static const std::string alphabet =
      "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#";
  return s.size() == 40 && s.find_first_not_of(alphabet) == std::string::npos && !s.ends_with(".pub");
}

// A key or token file of `security:` relative to the cluster file, kept absolute so that `up`
// can hand it on; a client key may be Z85 text instead.
void resolve_client(reader& r, const YAML::Node& at, std::string& c, const std::string& what) {
  if (c.empty())
    r.error(at, what + " entry is empty");
  else if (!looks_like_z85_key(c))
    c = r.resolve(c);
}

// `security.tenants[]`: names, caps and weights checked; no key or token names two tenants.
void parse_tenants(reader& r, const YAML::Node& list, security_options& o) {
  if (!list.IsSequence()) return r.error(list, "security tenants must be a list of {name, ...}");
  std::map<std::string, std::string> owner;  // key or token file -> tenant
  for (auto t : list) {
    tenant_spec x;
    r.known_keys(t, "security.tenants[]", "tenant");
    auto w = named(t, "tenant");
    settings::read_keys(r, t, x, settings::tenant_keys(), w);
    if (x.name.empty()) continue;
    if (x.rate && !(*x.rate > 0)) r.error(t["rate"], w + " rate must be positive (queries/s)");
    if (x.weight && !(*x.weight > 0)) r.error(t["weight"], w + " weight must be positive");
    if (o.find_tenant(x.name)) r.error(t["name"], "duplicate tenant '" + x.name + "'");
    auto claim = [&](const char* key, std::vector<std::string>& items, bool keys) {
      for (size_t i = 0; i < items.size(); ++i) {
        if (keys)
          resolve_client(r, t[key][i], items[i], w + " " + key);
        else if (!items[i].empty())
          items[i] = r.resolve(items[i]);
        auto [at, fresh] = owner.emplace(items[i], x.name);
        if (!fresh) r.error(t[key][i], w + ": '" + items[i] + "' already belongs to tenant '" + at->second + "'");
      }
    };
    claim("clients", x.clients, true);
    claim("tokens", x.tokens, false);
    o.tenants.push_back(std::move(x));
  }
}

}  // namespace

void parse_security(reader& r, const YAML::Node& n, security_options& o) {
  if (!n) return;
  const std::string w = "security";
  r.known_keys(n, "security", w);
  settings::read_keys(r, n, o, settings::security_keys(), w);
  if (n.IsMap() && n["tenants"]) parse_tenants(r, n["tenants"], o);
  if (o.keys.empty() && (o.tenants.empty() || !o.clients.empty() || !o.tls_cert.empty() || !o.tokens.empty()))
    r.error(n, "security is missing 'keys' (without them it may hold tenants alone, which clients then name)");
  if (o.tls_cert.empty() != o.tls_key.empty()) r.error(n, "security needs both tls_cert and tls_key, or neither");
  // Paths are relative to the cluster file, and kept absolute so that `up` can hand them on.
  auto resolve = [&](std::string& path) { path = r.resolve(path); };
  if (!o.keys.empty()) resolve(o.keys);
  for (auto* path : {&o.tls_cert, &o.tls_key})
    if (!path->empty()) resolve(*path);
  for (auto& t : o.tokens) resolve(t);
  for (size_t i = 0; i < o.clients.size(); ++i) resolve_client(r, n["clients"][i], o.clients[i], "security clients");
}

}  // namespace sloserve::config_detail
