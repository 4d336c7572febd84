// `sloserve run`: every role in one process; optionally drive it with the built-in client.
// `sloserve node`: one node of a cluster file.

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <fstream>
#include <iostream>

#include "actors/node_runtime.hpp"
#include "apps/commands.hpp"
#include "config/knob_option.hpp"
#include "loadgen/load.hpp"
#include "pipelines/write_file.hpp"

namespace sloserve {
namespace {

// A client cannot connect to a wildcard address; use loopback instead.
std::string connectable(std::string ep) {
  for (auto wild : {"0.0.0.0", "*"})
    if (auto p = ep.find(wild); p != std::string::npos) ep.replace(p, std::string(wild).size(), "127.0.0.1");
  return ep;
}

}  // namespace

void add_run_command(CLI::App& app, int& rc) {
  struct opts {
    std::string config, address, pipeline, json;
    arrival_kind arrival = arrival_kind::poisson;
    double rate = 0, duration = 10, cv = 1;
  };
  auto o = std::make_shared<opts>();
  auto* cmd = app.add_subcommand("run", "Run every role in one process (the embedded default config when no file)");
  cmd->add_option("-c,--config", o->config, "cluster file (default: the embedded default.yaml)");
  cmd->add_option("--address", o->address, "bind here instead of the frontend's configured address");
  cmd->add_option("--load", o->rate, "drive the pipeline at this many requests/s with the built-in client, then exit");
  cmd->add_option("--duration", o->duration, "seconds of load")->capture_default_str();
  cmd->add_option("--pipeline", o->pipeline, "pipeline to load (default: the first)");
  add_knob_option(cmd, "--arrival", o->arrival, "arrival process");
  cmd->add_option("--cv", o->cv, "gamma arrivals: coefficient of variation")->capture_default_str();
  cmd->add_option("--json", o->json, "write the load summary here");
  cmd->callback([o, &rc] {
    auto cfg = load_config_or_report(o->config);
    if (!cfg) return void(rc = 2);
    auto one = std::make_shared<cluster_config>(single_node(*cfg));
    if (!o->address.empty()) {
      if (auto ok = check_address(o->address); !ok) {
        std::cerr << "--address: " << ok.error() << "\n";
        return void(rc = 2);
      }
      one->nodes[0].address = o->address;
    }
    const pipeline* p =
        o->pipeline.empty() ? (one->pipelines.empty() ? nullptr : &one->pipelines[0]) : one->find_pipeline(o->pipeline);
    if (o->rate > 0 && !p) {
      std::cerr << "no pipeline '" << o->pipeline << "' to load\n";
      return void(rc = 2);
    }
    if (o->rate == 0) block_stop_signals();
    node_runtime node(one, "local");
    if (auto started = node.start(); !started) {
      std::cerr << "sloserve run: " << started.error() << "\n";
      return void(rc = 1);
    }
    if (o->rate <= 0) {
      spdlog::info("serving {} pipeline(s) at {}; Ctrl-C stops", one->pipelines.size(), node.endpoint());
      wait_for_stop();
      node.stop();
      return;
    }
    load_options lo;
    lo.address = connectable(node.endpoint());
    lo.pipeline = p->name;
    lo.slo_ms = p->slo_ms;
    lo.input = one->models[p->stages[p->roots().front()].model_index].input;
    lo.rate = o->rate;
    lo.duration_s = o->duration;
    lo.arrival = o->arrival;
    lo.cv = o->cv;
    lo.progress = true;
    if (one->security.enabled()) {
      // The built-in client is this node: it authenticates with the node's own pair.
      auto own = read_curve_file(one->security.keys + "/local.key", true);
      if (!own) {
        std::cerr << "sloserve run: " << own.error() << "\n";
        node.stop();
        return void(rc = 1);
      }
      lo.key = *own;
      lo.server_key = lo.key.public_key;
    }
    spdlog::info("driving pipeline '{}' (SLO {} ms) at {} req/s for {} s", p->name, p->slo_ms, o->rate, o->duration);
    auto ran = run_load(lo);
    if (!ran) {
      std::cerr << "sloserve run: " << ran.error() << "\n";
      node.stop();
      return void(rc = 1);
    }
    auto& s = *ran;
    node.stop();
    std::cout << s.to_text();
    rc = s.lost == 0 ? 0 : 3;
    if (o->json.empty()) return;
    if (auto written = write_file(o->json, s.to_json(lo).dump(2) + "\n"); !written) {
      std::cerr << "sloserve run: " << written.error() << "\n";
      rc = 1;
    }
  });
}

void add_node_command(CLI::App& app, int& rc) {
  struct opts {
    std::string config, name;
  };
  auto o = std::make_shared<opts>();
  auto* cmd = app.add_subcommand("node", "Run one node of a cluster file (what deploy/ runs on each host)");
  cmd->add_option("-c,--config", o->config, "cluster file")->required();
  cmd->add_option("--name", o->name, "which node of the file this process is")->required();
  cmd->callback([o, &rc] {
    auto cfg = load_config_or_report(o->config);
    if (!cfg) return void(rc = 2);
    if (!cfg->find_node(o->name)) {
      std::cerr << o->config << ": has no node named '" << o->name << "'\n";
      return void(rc = 2);
    }
    block_stop_signals();
    node_runtime node(cfg, o->name);
    if (auto started = node.start(); !started) {
      std::cerr << "sloserve node " << o->name << ": " << started.error() << "\n";
      return void(rc = 1);
    }
    // `sloserve up` passes a pipe here and waits for this line.
    if (auto* fd = getenv("SLOSERVE_READY_FD")) {
      std::string line = "ready " + node.endpoint() + "\n";
      [[maybe_unused]] auto n = write(std::atoi(fd), line.data(), line.size());
      close(std::atoi(fd));
    }
    wait_for_stop();
    spdlog::info("{}: stopping", o->name);
    node.drain();
    node.stop();
  });
}

}  // namespace sloserve
