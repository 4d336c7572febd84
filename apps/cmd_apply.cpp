// `sloserve apply -c FILE [--dry-run]`: moves a running cluster to FILE while it serves. The
// controller checks what may change live, says what changes and what it does, applies it, and
// answers once every node has said what it made of it (applied, or kept a model's old file).

#include <spdlog/spdlog.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "apps/commands.hpp"
#include "loadgen/socket.hpp"
#include "messages/codec.hpp"
#include "messages/curve.hpp"

namespace sloserve {
namespace {

struct apply_options {
  std::string config, address, as, key;
  bool dry_run = false;
  double timeout_s = 30;
};

// Sends the file to the controller and prints its answer: 0 applied on every node, 1 refused or
// not applied in full (a node kept a model's old file, refused it, or did not answer), 2 not
// answered.
int run_apply(const apply_options& o) {
  std::ifstream in(o.config);
  if (!in) {
    std::cerr << "cannot read " << o.config << "\n";
    return 2;
  }
  std::stringstream text;
  text << in.rdbuf();
  auto file = std::filesystem::absolute(o.config).lexically_normal().string();
  // The file is checked here first: its errors need no cluster.
  auto cfg = load_config_or_report(o.config);
  if (!cfg) return 1;
  auto* ctl = cfg->controller();
  if (!ctl) {
    std::cerr << o.config << ": no node has the controller role\n";
    return 1;
  }
  load_options lo;
  lo.address = o.address.empty() ? ctl->address : o.address;
  if (lo.address.ends_with(":0")) {
    std::cerr << o.config << ": the controller's address leaves its port to `sloserve up`: pass --address, or "
              << "apply the file `up --write-config` wrote\n";
    return 2;
  }
  auto as = o.as.empty() ? ctl->name : o.as;
  if (cfg->security.enabled()) {
    auto ours = read_curve_file(o.key.empty() ? cfg->security.keys + "/" + as + ".key" : o.key, true);
    if (!ours) {
      std::cerr << ours.error() << "\n";
      return 2;
    }
    auto server = read_curve_file(cfg->security.keys + "/" + ctl->name + ".pub", false);
    if (!server) {
      std::cerr << server.error() << "\n";
      return 2;
    }
    lo.key = *ours;
    lo.server_key = server->public_key;
  }
  load_socket sock(lo);
  if (auto s = sock.connect(); !s) {
    std::cerr << s.error() << "\n";
    return 2;
  }
  msg::apply_request rq;
  rq.token = static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()) | 1;
  rq.text = text.str();
  rq.file = file;
  rq.dry_run = o.dry_run;
  sock.send(msg::encode_frame({as, rq}));
  auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(static_cast<int64_t>(o.timeout_s * 1e3));
  msg::decode_limits limits;
  std::string frame;
  while (std::chrono::steady_clock::now() < until) {
    if (auto why = sock.refused(); !why.empty()) {
      std::cerr << "controller at " << lo.address << ": " << why << "\n";
      return 2;
    }
    if (!sock.recv(frame, 100)) continue;
    auto d = msg::decode(frame, limits);
    if (!d.value) continue;
    auto* r = std::get_if<msg::apply_reply>(&d.value->content);
    if (!r || r->token != rq.token) continue;
    if (r->changes.empty()) std::cout << "changes: none\n";
    for (auto& c : r->changes) std::cout << c << "\n";
    bool sent = !r->nodes.empty();  // a refusal reaches no node
    if (!r->ok && !sent) {
      std::cerr << "refused, nothing changed:\n" << r->reason << (r->reason.ends_with("\n") ? "" : "\n");
      return 1;
    }
    for (auto& line : r->plan) std::cout << (o.dry_run ? "would " : "") << line << "\n";
    for (auto& line : r->nodes) std::cout << "node " << line << "\n";
    auto revision = fmt::format("{:016x}", r->revision);
    if (o.dry_run) {
      std::cout << "dry run: nothing applied\n";
    } else if (!r->ok) {
      std::cerr << "applied in part: revision " << revision << ": " << r->reason << "\n";
      return 1;
    } else {
      std::cout << "applied: revision " << revision << "\n";
    }
    return 0;
  }
  std::cerr << "no answer from the controller at " << lo.address << " within " << o.timeout_s << " s\n";
  return 2;
}

}  // namespace

void add_apply_command(CLI::App& app, int& rc) {
  auto o = std::make_shared<apply_options>();
  auto* cmd = app.add_subcommand("apply", "move a running cluster to a new cluster file while it serves");
  cmd->add_option("-c,--config", o->config, "the cluster file to run from now on")->required();
  cmd->add_flag("--dry-run", o->dry_run, "only print what would change and what the controller would do");
  cmd->add_option("--address", o->address,
                  "the controller's ZeroMQ address (default: the file's; `up` resolves port 0 in the file it writes)");
  cmd->add_option("--as", o->as, "the node this call is made as (default: the controller)");
  cmd->add_option("--key", o->key,
                  "that node's CurveZMQ key pair, when the file has security: (default: KEYS/NODE.key)");
  cmd->add_option("--timeout", o->timeout_s, "seconds to wait for the controller's answer")->capture_default_str();
  cmd->callback([o, &rc] { rc = run_apply(*o); });
}

}  // namespace sloserve
