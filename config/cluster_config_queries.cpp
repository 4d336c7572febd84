// What a parsed cluster configuration answers: a node's roles and devices, the entries found by
// name, and the one-node form `sloserve run` serves.

#include "config/cluster_config.hpp"

namespace sloserve {

bool node_spec::has_role(role r) const {
  return std::find(roles.begin(), roles.end(), r) != roles.end();
}

int node_spec::device_count() const {
  int n = 0;
  for (auto& g : devices) n += g.instances();
  return n;
}

const std::vector<std::string>& node_spec::device_models(int d) const {
  static const std::vector<std::string> none;
  for (auto& g : devices) {
    if (d < g.instances()) return g.models;
    d -= g.instances();
  }
  return none;
}

const device_group* node_spec::group_of(int d) const {
  for (auto& g : devices) {
    if (d < g.instances()) return &g;
    d -= g.instances();
  }
  return nullptr;
}

double node_spec::share_of(int d) const {
  for (auto& g : devices) {
    if (d < g.instances()) return g.share_of(d);
    d -= g.instances();
  }
  return 1;
}

bool node_spec::serves(int d, const std::string& model) const {
  auto& ms = device_models(d);
  // A fragment "BASE[a,b)" of a partitioned model runs where BASE does.
  auto base = model.substr(0, model.find('['));
  return ms.empty() || std::find(ms.begin(), ms.end(), base) != ms.end();
}

const node_spec* cluster_config::find_node(std::string_view n) const {
  for (auto& x : nodes)
    if (x.name == n) return &x;
  return nullptr;
}
const model_spec* cluster_config::find_model(std::string_view n) const {
  for (auto& x : models)
    if (x.name == n) return &x;
  if (n.find('[') != std::string_view::npos)
    for (auto& x : fragments)
      if (x.name == n) return &x;
  return nullptr;
}

const device_type* cluster_config::find_device_type(std::string_view n) const {
  for (auto& x : device_types)
    if (x.name == n) return &x;
  return nullptr;
}
double cluster_config::price_of(const device_group& g) const {
  auto* t = g.type.empty() ? nullptr : find_device_type(g.type);
  return t ? t->price : 1;
}
const pipeline* cluster_config::find_pipeline(std::string_view n) const {
  for (auto& x : pipelines)
    if (x.name == n) return &x;
  return nullptr;
}
const node_spec* cluster_config::controller() const {
  for (auto& x : nodes)
    if (x.has_role(role::controller)) return &x;
  return nullptr;
}
std::vector<const node_spec*> cluster_config::with_role(role r) const {
  std::vector<const node_spec*> out;
  for (auto& x : nodes)
    if (x.has_role(r)) out.push_back(&x);
  return out;
}

cluster_config single_node(const cluster_config& cfg) {
  cluster_config out = cfg;
  node_spec n;
  n.name = "local";
  n.roles = {role::controller, role::frontend, role::worker};
  bool cores_bounded = true;
  for (auto& x : cfg.nodes) {
    if (n.address.empty() && x.has_role(role::frontend)) {  // clients reach it where they reach the frontend
      n.address = x.address;
      n.bind = x.bind;
      n.http = x.http;
      n.grpc = x.grpc;
      n.metrics = x.metrics;
    }
    if (x.has_role(role::worker)) {
      n.devices.insert(n.devices.end(), x.devices.begin(), x.devices.end());
      cores_bounded = cores_bounded && x.cores > 0;
      n.cores += x.cores;
    }
  }
  if (!cores_bounded) n.cores = 0;
  out.nodes = {n};
  return out;
}

}  // namespace sloserve
