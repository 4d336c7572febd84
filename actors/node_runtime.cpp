#include "actors/node_runtime.hpp"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <map>
#include <random>
#include <thread>

#include "actors/grpc_ingress.hpp"
#include "actors/http_ingress.hpp"
#include "actors/link.hpp"
#include "actors/roles.hpp"
#include "actors/zmq_link.hpp"
#include "gpu/cuda_ipc.hpp"
#include "gpu/profiler.hpp"
#include "ingress/shm_regions.hpp"
#include "ingress/trace_settings.hpp"
#include "messages/codec.hpp"
#include "messages/transport.hpp"

namespace sloserve {

uint64_t new_incarnation() {
  std::random_device rd;
  uint64_t x = (static_cast<uint64_t>(rd()) << 32) ^ rd();
  x ^= static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  x ^= static_cast<uint64_t>(getpid()) << 16;
  return (x >> 21) | 1;  // leaves room for the controller's epoch numbering
}

namespace {

// CURVE settings of `node` from the `security:` section: its own pair, the public keys of every
// node (its peers dial it and it dials them) and of the listed clients and tenants' clients;
// each tenant's keys into `tenant_of_key`.
status curve_setup(const cluster_config& cfg, const std::string& node, transport_options& t,
                   std::map<std::string, std::string>& peer_keys,
                   std::map<std::string, std::string, std::less<>>& tenant_of_key) {
  auto& sec = cfg.security;
  if (!sec.enabled()) return {};
  auto own = read_curve_file(sec.keys + "/" + node + ".key", true);
  if (!own) return fail(own.error());
  t.curve = *own;
  for (auto& n : cfg.nodes) {
    auto pub = read_curve_file(sec.keys + "/" + n.name + ".pub", false);
    if (!pub) return fail(pub.error());
    peer_keys[n.name] = pub->public_key;
    t.allowed.push_back(pub->public_key);
  }
  auto admit = [&](const std::string& c) -> expected<std::string> {
    if (is_z85_key(c)) return c;
    auto pub = read_curve_file(c, false);
    if (!pub) return fail(pub.error());
    return pub->public_key;
  };
  for (auto& c : sec.clients) {
    auto key = admit(c);
    if (!key) return fail(key.error());
    t.allowed.push_back(*key);
  }
  for (auto& tenant : sec.tenants)
    for (auto& c : tenant.clients) {
      auto key = admit(c);
      if (!key) return fail("tenant '" + tenant.name + "': " + key.error());
      t.allowed.push_back(*key);
      tenant_of_key[*key] = tenant.name;
    }
  return {};
}

// Measures l(b) on this node's real devices for the models it serves whose entries have no
// profile, and returns the configuration with those profiles filled in (or `cfg` itself).
expected<std::shared_ptr<const cluster_config>> with_startup_profiles(std::shared_ptr<const cluster_config> cfg,
                                                                      const node_spec& node) {
  if (!node.has_role(role::worker)) return cfg;
  std::shared_ptr<cluster_config> out;
  for (size_t i = 0; i < cfg->models.size(); ++i) {
    auto& m = cfg->models[i];
    const device_group* group = nullptr;
    for (int d = 0; m.needs_profile && !group && d < node.device_count(); ++d)
      if (node.serves(d, m.name) && node.group_of(d)->kind != device_kind::emulated) group = node.group_of(d);
    if (!group) continue;
    spdlog::info("{}: model '{}' has no profile in {}; profiling it on a {} device ({} threads) at start-up", node.name,
                 m.name, cfg->file, group->kind, group->threads);
    auto ex = make_executor(group->kind, 1, group->threads, group->type);
    profile_options o;
    o.min_runs = 10;
    o.max_seconds = 1;
    auto measured = ex ? profile_model(**ex, m, o) : fail(ex.error());
    if (!measured) return fail("profiling model '" + m.name + "': " + measured.error());
    auto& points = *measured;
    if (!out) out = std::make_shared<cluster_config>(*cfg);
    auto& mm = out->models[i];
    mm.profile = profile_of(points, pads_batches(group->kind));
    mm.needs_profile = false;
    mm.measured = true;
    for (auto& p : points)
      if (p.disagreed)
        spdlog::warn(
            "{}: model '{}' at batch {}: two profiling passes disagreed ({:.3f} and {:.3f} ms); a third gave "
            "{:.3f} ms, planned {:.3f} ms",
            node.name, m.name, p.batch, p.passes_ms[0], p.passes_ms[1], p.passes_ms.back(), p.ms);
    spdlog::info("{}: model '{}' measured: {}", node.name, m.name, to_profile_yaml(points, pads_batches(group->kind)));
  }
  if (out) return std::shared_ptr<const cluster_config>(out);
  return cfg;
}

}  // namespace

node_runtime::node_runtime(std::shared_ptr<const cluster_config> cfg, std::string node)
    : cfg_(std::move(cfg)), node_(std::move(node)) {}

node_runtime::~node_runtime() {
  stop();
}

status node_runtime::start_transport(const node_spec& spec, std::map<std::string, std::string>& peer_keys) {
  limits_ = msg::decode_limits{static_cast<uint64_t>(cfg_->runtime.max_payload_bytes)};
  transport_options topts;
  topts.bind = spec.bind.empty() ? spec.address : spec.bind;
  topts.send_hwm = topts.recv_hwm = cfg_->runtime.zmq_hwm;
  // Frames up to twice the payload limit are read and answered ERROR with the reason; larger
  // ones disconnect their sender before they are buffered whole.
  topts.max_message_bytes = static_cast<int64_t>(limits_.max_frame_bytes());
  topts.client_send_hwm = cfg_->runtime.max_client_queued_replies;
  topts.zmtp_heartbeat_ms = cfg_->runtime.heartbeat_ms;
  topts.zmtp_timeout_ms = cfg_->runtime.peer_timeout_ms;
  if (auto s = curve_setup(*cfg_, node_, topts, peer_keys, tenant_of_key_); !s) return fail("security: " + s.error());
  // Refused connections name no routing id: the kind of refusal (its text up to the first detail)
  // stands for the peer.
  topts.on_refused = [this](const std::string& why) {
    reject("handshake", why.substr(0, why.find_first_of(":0123456789'")), why);
  };
  topts.on_reply_dropped = [this](const std::string& identity, bool gone) {
    if (!link_) return;
    link_->metrics.count(node_metrics::event::reply_dropped, gone ? "client_gone" : "client_not_reading");
    if (gone) return;  // a client that left: nothing to tell
    auto now = static_cast<double>(link_->now_ns()) / 1e9;
    if (auto held = rejections_.admit("not reading|" + identity, now))
      spdlog::warn(
          "{}: dropped a reply to a client that does not read its replies (its {} queued replies are "
          "runtime.max_client_queued_replies){}",
          node_, cfg_->runtime.max_client_queued_replies,
          *held ? fmt::format("; {} more since the last line", *held) : "");
  };
  // Under CURVE, which node each authenticated public key belongs to.
  for (auto& [name, key] : peer_keys) node_of_key_[key] = name;
  transport_ = std::make_unique<transport>(topts, [this](std::string_view id, const std::vector<bytes>& parts,
                                                         std::string_view user) { on_frame(id, parts, user); });
  link_ = std::make_shared<zmq_link>(node_, transport_.get());
  shm_ = std::make_shared<shm::registry>(cfg_->runtime.client_shared_memory, cfg_->runtime.shared_memory_regions,
                                         [link = std::weak_ptr<zmq_link>(link_)](std::string_view what) {
                                           if (auto l = link.lock())
                                             l->metrics.count(node_metrics::event::shared_memory, what);
                                         });
  if (shm_->enabled()) {
    shm_->sweep_every(1000);
    auto gpu = open_cuda_ipc();
    spdlog::info("{}: clients' shared memory on; CUDA shared memory {}", node_,
                 gpu->unavailable().empty() ? "through the " + gpu->describe() : "off: " + gpu->unavailable());
    shm_->set_device_memory(std::move(gpu));
  }
  link_->config = std::make_shared<config_source>(cfg_);
  if (spec.has_role(role::frontend)) link_->tracer = std::make_shared<tracing::tracer>();
  admit_ = intake_gate_of(link_);
  std::vector<double> slos_s;
  for (auto& p : cfg_->pipelines) slos_s.push_back(p.slo_ms / 1e3);
  link_->metrics.slo_buckets(slos_s);

  return {};
}

void node_runtime::spawn_roles(const node_spec& spec) {
  actor_args args{cfg_, link_, new_incarnation()};
  // Test hook: this node's wall clock off by SLOSERVE_CLOCK_OFFSET_MS (a host whose clock is
  // skewed; the chaos tests set it, since a network namespace cannot have a clock of its own).
  if (auto* offset = std::getenv("SLOSERVE_CLOCK_OFFSET_MS")) {
    int64_t us = static_cast<int64_t>(std::atof(offset) * 1000);
    args.wall_us = [us] { return system_wall_us() + us; };
    spdlog::warn("{}: wall clock offset by {} ms (SLOSERVE_CLOCK_OFFSET_MS)", node_, us / 1000);
  }
  auto& a = link_->actors_;
  a.agent = spawn_node_agent(*sys_, args);
  if (spec.has_role(role::controller)) {
    a.controller = spawn_controller(*sys_, args);
    a.monitor = spawn_monitor(*sys_, args);
    if (cfg_->scaler.enabled()) a.scaler = spawn_scaler(*sys_, args);
  }
  if (spec.has_role(role::frontend)) a.frontend = spawn_frontend(*sys_, args);
  if (spec.has_role(role::worker)) {
    a.devices = spawn_devices(*sys_, args);
    a.worker = spawn_worker(*sys_, args, a.devices);
  }
}

status node_runtime::start() {
  auto* spec = cfg_->find_node(node_);
  if (!spec) return fail("node '" + node_ + "' is not in " + cfg_->file);
  auto profiled = with_startup_profiles(cfg_, *spec);
  if (!profiled) return fail(profiled.error());
  cfg_ = std::move(*profiled);
  spec = cfg_->find_node(node_);
  sys_cfg_ = std::make_unique<caf::actor_system_config>();
  sys_cfg_->set("scheduler.max-threads", static_cast<size_t>(cfg_->runtime.threads));
  sys_cfg_->set("scheduler.policy", cfg_->runtime.actor_scheduling == actor_scheduling_kind::stealing
                                        ? caf::atom("stealing")
                                        : caf::atom("sharing"));
  sys_ = std::make_unique<caf::actor_system>(*sys_cfg_);
  std::map<std::string, std::string> peer_keys;
  if (auto s = start_transport(*spec, peer_keys); !s) return s;
  spawn_roles(*spec);
  auto& a = link_->actors_;
  if (auto started = transport_->start(); !started) {
    stop();
    return started;
  }
  for (auto& n : cfg_->nodes)
    if (n.name != node_) transport_->connect_peer(n.name, n.address, peer_keys[n.name]);
  // Start order: the controller first, so that registrations find it.
  for (auto h : {caf::actor_cast<caf::actor>(a.controller), caf::actor_cast<caf::actor>(a.scaler),
                 caf::actor_cast<caf::actor>(a.agent), caf::actor_cast<caf::actor>(a.worker),
                 caf::actor_cast<caf::actor>(a.frontend)})
    if (h) caf::anon_send(h, start_atom::value);
  if (auto s = start_ingresses(*spec); !s) return s;
  started_ = true;
  spdlog::info("{}: serving at {} as [{}]", node_, transport_->endpoint(), fmt::join(spec->roles, ", "));
  return {};
}

void node_runtime::stop() {
  for (auto* h : {&http_, &metrics_http_}) {
    if (*h) (*h)->stop();
    h->reset();
  }
  if (grpc_) grpc_->stop();
  grpc_.reset();
  http_port_ = metrics_port_ = grpc_port_ = 0;
  if (transport_) transport_->stop();
  if (sys_) {
    auto& a = link_->actors_;
    for (auto h : {caf::actor_cast<caf::actor>(a.controller), caf::actor_cast<caf::actor>(a.agent),
                   caf::actor_cast<caf::actor>(a.worker), caf::actor_cast<caf::actor>(a.frontend),
                   caf::actor_cast<caf::actor>(a.monitor), caf::actor_cast<caf::actor>(a.scaler)})
      if (h) caf::anon_send_exit(h, caf::exit_reason::user_shutdown);
    a = {};
  }
  link_.reset();
  sys_.reset();
  transport_.reset();
  shm_.reset();
  sys_cfg_.reset();
  started_ = false;
}

// Runs on the transport's I/O thread for every message the node receives.
void node_runtime::on_frame(std::string_view id, const std::vector<bytes>& parts, std::string_view user) {
  auto d = msg::decode_parts(parts, limits_);
  std::string identity(id);
  if (!d.value) {
    auto& e = d.error;
    reject(e.kind, identity, "rejected a message: " + e.reason);
    if (e.request_id || e.from.empty())
      link_->to_client(identity, msg::client_reply{e.request_id.value_or(0), msg::status::error, e.reason, {}, {}, 0});
    else if (e.invocation_id && cfg_->find_node(e.from)) {
      link_->to_node(e.from, {{}, msg::failed_invocation(*e.invocation_id, msg::status::error, e.reason, node_)});
    }
    return;
  }
  // Clients may only submit requests and ask for readiness; everything else must come from a
  // node of the cluster (under CURVE: from the key of the node it names).
  auto& env = *d.value;
  bool from_client = std::holds_alternative<msg::client_request>(env.content) ||
                     std::holds_alternative<msg::status_request>(env.content);
  if (auto* sm = std::get_if<msg::shared_memory_request>(&env.content)) return shared_memory_call(identity, user, *sm);
  // Under CURVE a client's tenant is its key's, whatever it claims; without keys, it names it.
  if (auto* rq = std::get_if<msg::client_request>(&env.content); rq && cfg_->security.enabled()) {
    auto it = tenant_of_key_.find(user);
    rq->tenant = it == tenant_of_key_.end() ? std::string() : it->second;
  }
  if (auto* rq = std::get_if<msg::client_request>(&env.content);
      rq && (!take_shared_inputs(identity, user, *rq) || !intake(identity, *rq)))
    return;
  if (!from_client) {
    bool peer = cfg_->find_node(env.from) != nullptr;
    if (peer && cfg_->security.enabled()) {
      auto it = node_of_key_.find(user);
      peer = it != node_of_key_.end() && it->second == env.from;
    }
    if (!peer) {
      reject("not_a_node", identity,
             fmt::format("refused a control message claiming to be from '{}': not a node of the cluster{}", env.from,
                         cfg_->security.enabled() ? " (or not its key)" : ""));
      return;
    }
  }
  dispatch(*link_, std::move(env), identity);
}

void node_runtime::drain() {
  if (!started_ || !link_->actors_.worker) return;
  caf::anon_send(link_->actors_.worker, leave_atom::value);
  double longest = 0;
  for (auto& p : cfg_->pipelines) longest = std::max(longest, p.slo_ms);
  auto wait = std::chrono::milliseconds(static_cast<int64_t>(longest) + cfg_->runtime.reply_grace_ms);
  spdlog::info("{}: leaving routing; serving what it holds for {} ms", node_, wait.count());
  std::this_thread::sleep_for(std::min<std::chrono::milliseconds>(wait, std::chrono::seconds(10)));
}

std::string node_runtime::endpoint() const {
  return transport_ ? transport_->endpoint() : "";
}
caf::actor_system& node_runtime::system() {
  return *sys_;
}
const local_actors& node_runtime::actors() const {
  return link_->actors_;
}

}  // namespace sloserve
