// `sloserve load`: the built-in load client.

#include <spdlog/spdlog.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "apps/commands.hpp"
#include "config/knob_option.hpp"
#include "loadgen/clients.hpp"
#include "loadgen/load.hpp"
#include "loadgen/report.hpp"
#include "messages/curve.hpp"
#include "pipelines/write_file.hpp"
#include "scheduling/policies/jellyfish/config.hpp"

namespace sloserve {

namespace {

// `--clients N`: the sizes the pipeline's variants take, each client's uplink trace, then the run.
int run_clients_command(const cluster_config& cfg, const pipeline& p, const std::string& traces,
                        const std::string& adaptation, const std::string& json, load_options& lo, client_options& co) {
  if (auto sized = set_image_sizes(cfg, p, co); !sized) {
    std::cerr << sized.error() << "\n";
    return 2;
  }
  // Jellyfish as its paper runs it: clients send every frame.
  if (cfg.scheduler.policy == scheduler_policy::jellyfish &&
      cfg.scheduler.section_as<sched::jellyfish::options>().paper())
    co.skip_hopeless = false;
  co.adaptation = adaptation == "off"         ? data_adaptation::off
                  : adaptation == "bandwidth" ? data_adaptation::bandwidth
                  : adaptation == "slo"       ? data_adaptation::slo
                                              : data_adaptation::jellyfish;
  // Traces: FILE, FILE,FILE,..., or a folder of files (in name order).
  std::vector<std::string> files;
  std::error_code ec;
  if (!traces.empty() && std::filesystem::is_directory(traces, ec)) {
    for (auto& e : std::filesystem::directory_iterator(traces, ec))
      if (e.is_regular_file()) files.push_back(e.path().string());
    std::sort(files.begin(), files.end());
  } else {
    std::stringstream in(traces);
    for (std::string f; std::getline(in, f, ',');)
      if (!f.empty()) files.push_back(f);
  }
  for (auto& f : files) {
    auto t = read_rate_trace(f, "Mbps");
    if (!t) {
      std::cerr << t.error() << "\n";
      return 2;
    }
    co.bandwidth.push_back(std::move(*t));
  }
  for (auto v : co.slo_ms)
    if (!(v > 0)) return std::cerr << "--client-slo-ms: SLOs must be positive\n", 2;
  for (auto v : co.fps)
    if (!(v > 0 && v <= 1000)) return std::cerr << "--client-fps: rates must be in (0, 1000]\n", 2;
  for (auto v : co.join_s)
    if (!(v >= 0 && v < lo.warmup_s + lo.duration_s))
      return std::cerr << "--client-join-s: each must be in [0, the warm-up and duration)\n", 2;
  lo.progress = false;
  auto ran = run_clients(lo, co);
  if (!ran) {
    std::cerr << "sloserve load: " << ran.error() << "\n";
    return 1;
  }
  std::cout << ran->to_text();
  if (!json.empty())
    if (auto written = write_file(json, ran->to_json(lo).dump(2) + "\n"); !written)
      return std::cerr << "sloserve load: " << written.error() << "\n", 1;
  return 0;
}

// `--fragments START:SLO_MS[:WEIGHT],...`: the traffic mix of a partitioned model's clients.
expected<std::vector<mix_entry>> fragment_mix(const cluster_config& cfg, const pipeline& p, const std::string& text) {
  auto& m = cfg.models[p.stages[p.roots().front()].model_index];
  if (!m.partitioned() || p.stages.size() != 1)
    return fail("pipeline '" + p.name + "' does not run a partitioned model (models[].layers)");
  std::vector<mix_entry> out;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) {
    std::stringstream f(item);
    std::vector<std::string> parts;
    for (std::string x; std::getline(f, x, ':');) parts.push_back(x);
    char* end = nullptr;
    if (parts.size() < 2 || parts.size() > 4) return fail("'" + item + "' is not START:SLO_MS[:WEIGHT[:CLIENTS]]");
    long start = std::strtol(parts[0].c_str(), &end, 10);
    if (*end || start < 0 || start >= static_cast<long>(m.layers.size()))
      return fail("'" + item + "': START must be a layer of model '" + m.name + "' (0 to " +
                  std::to_string(m.layers.size() - 1) + ")");
    double slo = std::strtod(parts[1].c_str(), &end);
    if (*end || !(slo > 0)) return fail("'" + item + "': SLO_MS must be positive");
    double w = parts.size() >= 3 ? std::strtod(parts[2].c_str(), &end) : 1;
    if (*end || !(w > 0)) return fail("'" + item + "': WEIGHT must be positive");
    long clients = parts.size() == 4 ? std::strtol(parts[3].c_str(), &end, 10) : 0;
    if (*end || clients < 0 || clients > 10000) return fail("'" + item + "': CLIENTS must be in [0, 10000]");
    mix_entry e{p.name, w, slo, m.layers[static_cast<size_t>(start)].input, m.input_name};
    e.start_layer = static_cast<uint32_t>(start);
    e.declare_slo = true;
    e.clients = static_cast<int>(clients);
    out.push_back(std::move(e));
  }
  if (out.empty()) return fail("no fragment given");
  return out;
}

// What `sloserve load` was given.
struct load_args {
  std::string config, address, pipeline, json, trace, key, bandwidth, images, image_size, protocol = "zmq", token,
                                                                                          report, fragments;
  load_options lo;
  client_options co;
  std::string adaptation = "jellyfish";
  CLI::Option* duration = nullptr;
};

// Where to connect and what traffic to send.
void add_traffic_options(CLI::App* cmd, load_args& o) {
  auto& lo = o.lo;
  cmd->add_option("-c,--config", o.config, "cluster file (frontend address, pipeline SLO and input)")->required();
  cmd->add_option("--address", o.address,
                  "frontend address (default: the first frontend of the file; with --protocol http, its http)");
  cmd->add_option(
         "--protocol", o.protocol,
         "zmq: sloserve's own; http: KServe v2 over HTTP (nodes[].http); grpc: KServe v2 over gRPC (nodes[].grpc)")
      ->check(CLI::IsMember({"zmq", "http", "grpc"}))
      ->capture_default_str();
  cmd->add_option("--token", o.token, "http, grpc under security: a file holding a bearer token the ingress admits");
  cmd->add_option("--pipeline", o.pipeline, "pipeline name")->required();
  cmd->add_option("--tenant", o.lo.tenant,
                  "the tenant to send as (security.tenants; a cluster with keys takes it from --key or --token)");
  cmd->add_option("--rate", lo.rate, "requests/s (open loop)")->capture_default_str();
  o.duration = cmd->add_option("--duration", lo.duration_s, "seconds of measured load (with --trace: the whole trace)")
                   ->capture_default_str();
  add_knob_option(cmd, "--arrival", lo.arrival, "arrival process");
  cmd->add_option("--cv", lo.cv, "gamma arrivals: coefficient of variation of the gaps")->capture_default_str();
  cmd->add_option("--trace", o.trace, "file of per-second rates, one per line (replaces --rate)");
  cmd->add_option("--concurrency", lo.concurrency, "closed loop: keep this many requests outstanding");
  cmd->add_option("--warmup", lo.warmup_s, "seconds sent before the measured window")->capture_default_str();
  cmd->add_option("--grace-ms", lo.grace_ms, "a request with no reply by send + SLO + this is lost")
      ->capture_default_str();
  cmd->add_option("--network-ms", lo.network_ms, "network time to attach to every request");
  cmd->add_option("--bandwidth-trace", o.bandwidth,
                  "file of per-second uplink Mbps: each request carries payload·8/Mbps ms of network time; with "
                  "--clients, each client's uplink: one file, FILE,FILE,... (cycled) or a folder of them");
  cmd->add_option("--payload-kb", lo.payload_kb, "payload size for --bandwidth-trace (default: the input tensor's)");
  cmd->add_option("--fragments", o.fragments,
                  "a partitioned model's clients: START:SLO_MS[:WEIGHT[:CLIENTS]],... (each request starts at layer "
                  "START, carries what the layers before make, and declares SLO_MS; from CLIENTS named clients)");
  cmd->add_option("--seed", lo.seed, "random seed of arrivals and payloads")->capture_default_str();
  cmd->add_option("--repeat", lo.repeat,
                  "this share of requests (0 to 1) repeats one of the last 64 inputs sent, the rest carry inputs of "
                  "their own (default: every request the same input)")
      ->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--wait-ready", lo.wait_ready_s, "seconds to wait for the frontend to be ready")
      ->capture_default_str();
  cmd->add_option("--key", o.key,
                  "this client's CurveZMQ key pair (NAME.key from `sloserve keys`), when the file has security:");
  cmd->add_option("--threads", lo.threads,
                  "sending threads, each with its own connection (default: enough for the rate)");
  cmd->add_flag("--shared-memory", lo.shared_memory,
                "on the frontend's host: pass the tensors through a shared-memory region registered with its node "
                "(runtime.client_shared_memory) instead of sending their bytes; over http and grpc by Triton's "
                "system shared-memory extension");
  cmd->add_option("--images", o.images,
                  "send these JPEG files (a file, or a folder of *.jpg) in turn; the model needs preprocess:");
  cmd->add_option("--image-size", o.image_size,
                  "send random uint8 HxW RGB images (e.g. 480x640); the model needs preprocess:");
}

// Video clients of their own (--clients), and what is written besides the summary.
void add_client_options(CLI::App* cmd, load_args& o) {
  cmd->add_option("--clients", o.co.clients,
                  "N video clients of their own, each sending JPEG frames over an emulated uplink (see --client-fps, "
                  "--client-slo-ms, --bandwidth-trace, --rtt-ms, --data-adaptation); the model needs preprocess:");
  cmd->add_option("--client-slo-ms", o.co.slo_ms, "with --clients: each client's SLO, cycled (default: the pipeline's)")
      ->delimiter(',');
  cmd->add_option("--client-fps", o.co.fps, "with --clients: each client's frames/s, cycled (default: rate / N)")
      ->delimiter(',');
  cmd->add_option("--client-join-s", o.co.join_s,
                  "with --clients: the second each client starts sending, cycled (default: all at once; "
                  "0,30,30,...: one client, then the rest join at 30 s)")
      ->delimiter(',');
  cmd->add_option("--rtt-ms", o.co.rtt_ms, "with --clients: each client's round trip to the frontend")
      ->capture_default_str();
  cmd->add_option("--network-share", o.co.network_share,
                  "with --data-adaptation slo: the share of its SLO a client gives its upload")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  auto* co = &o.co;
  cmd->add_flag_callback(
      "--send-every-frame", [co] { co->skip_hopeless = false; },
      "with --clients: send even the frames that could not cross the uplink in time to be answered within their "
      "SLO (by default a client skips them, and they count as missed)");
  cmd->add_option("--data-adaptation", o.adaptation,
                  "with --clients: jellyfish (send the size replies advise, or the largest the uplink carries), "
                  "bandwidth (the largest the uplink carries), off (always the middle size), slo (the largest the "
                  "uplink carries that uploads within --network-share of the SLO)")
      ->check(CLI::IsMember({"jellyfish", "bandwidth", "off", "slo"}))
      ->capture_default_str();
  cmd->add_option("--json", o.json, "write the summary (and per-second series) here");
  cmd->add_option("--report", o.report,
                  "write one self-contained HTML page here: latency CDF, per-second series, attainment, the "
                  "cluster file and the command");
}

// The frontend to send to and how: its ingress for the protocol (its ZeroMQ address,
// nodes[].http or nodes[].grpc), TLS and token, or CurveZMQ keys.
status choose_frontend(const cluster_config& cfg, load_args& o) {
  auto& lo = o.lo;
  lo.address = o.address;
  auto ingress = [&](const node_spec* f) -> const std::string& {
    return o.protocol == "http" ? f->http : o.protocol == "grpc" ? f->grpc : f->address;
  };
  auto* frontend = cfg.with_role(role::frontend).front();
  for (auto* f : cfg.with_role(role::frontend))
    if (f->address == lo.address || (!lo.address.empty() && ingress(f) == lo.address)) frontend = f;
  if (lo.address.empty())
    for (auto* f : cfg.with_role(role::frontend))
      if (ingress(frontend).empty()) frontend = f;
  if (o.protocol == "http" || o.protocol == "grpc") {
    lo.protocol = o.protocol == "http" ? load_protocol::http : load_protocol::grpc;
    if (lo.address.empty()) lo.address = ingress(frontend);
    if (lo.address.empty())
      return fail(o.config + ": no frontend has a " + o.protocol + " ingress (nodes[]." + o.protocol +
                  "); pass --address HOST:PORT");
    if (!o.key.empty() || !o.images.empty() || !o.image_size.empty())
      return fail("--protocol " + o.protocol + " takes neither --key nor images");
    if (cfg.security.enabled()) {
      // TLS against the cluster's own certificate; the token from --token.
      lo.http_ca = cfg.security.tls_cert;
      if (!o.token.empty()) {
        auto token = read_token_file(o.token);
        if (!token) return fail("--token: " + token.error());
        lo.http_token = *token;
      }
    }
  }
  if (lo.address.empty()) lo.address = frontend->address;
  if (!o.key.empty() && lo.protocol == load_protocol::zmq) {
    if (!cfg.security.enabled()) return fail(o.config + ": --key given, but the file has no security: section");
    auto ours = read_curve_file(o.key, true);
    if (!ours) return fail(ours.error());
    auto server = read_curve_file(cfg.security.keys + "/" + frontend->name + ".pub", false);
    if (!server) return fail(server.error());
    lo.key = *ours;
    lo.server_key = server->public_key;
  } else if (cfg.security.enabled() && lo.protocol == load_protocol::zmq) {
    spdlog::warn("{} enables security; without --key the frontend will refuse this client", o.config);
  }
  if (lo.address.find("*") != std::string::npos || lo.address.find("0.0.0.0") != std::string::npos)
    return fail("frontend address " + lo.address + " is a wildcard; pass --address");
  if (!lo.tenant.empty() && !cfg.security.find_tenant(lo.tenant)) {
    std::string names;
    for (auto& t : cfg.security.tenants) names += (names.empty() ? "" : ", ") + t.name;
    return fail(o.config + " has no tenant '" + lo.tenant + "'" + (names.empty() ? "" : "; its tenants: " + names));
  }
  if (!lo.tenant.empty() && cfg.security.enabled())
    spdlog::warn("{} enables security: the cluster takes this client's tenant from its key or token, not --tenant",
                 o.config);
  return {};
}

// What the requests carry: a rate or bandwidth trace, images; none over the frontend's frame
// limit (it would disconnect the sender without a reply).
status choose_payloads(const cluster_config& cfg, load_args& o) {
  auto& lo = o.lo;
  // Reads a file named on the command line into `into`, if one is.
  auto read = [](const std::string& path, auto reader, auto& into) -> status {
    if (path.empty()) return {};
    auto got = reader(path);
    if (!got) return fail(got.error());
    into = std::move(*got);
    return {};
  };
  if (auto ok = read(
          o.bandwidth, [](auto& f) { return read_rate_trace(f, "Mbps"); }, lo.bandwidth_mbps);
      !ok)
    return ok;
  if (auto ok = read(
          o.trace, [](auto& f) { return read_rate_trace(f); }, lo.trace);
      !ok)
    return ok;
  if (auto ok = read(o.images, read_images, lo.images); !ok) return ok;
  if (lo.repeat >= 0 && (lo.shared_memory || !o.images.empty() || !o.image_size.empty()))
    return fail("--repeat makes inputs of their own: not with --shared-memory, --images or --image-size");
  if (!lo.bandwidth_mbps.empty() && lo.payload_kb <= 0)
    lo.payload_kb = static_cast<double>(lo.input.byte_size().value_or(0)) / 1024;
  // A trace is replayed whole unless --duration cuts it short.
  if (!lo.trace.empty() && o.duration->count() == 0) lo.duration_s = static_cast<double>(lo.trace.size());
  if (!o.image_size.empty()) {
    auto made = random_images(o.image_size, lo.seed);
    if (!made) return fail(made.error());
    for (auto& t : *made) lo.images.push_back(std::move(t));
  }
  uint64_t largest = lo.images.empty() ? lo.input.byte_size().value_or(0) : 0;
  for (auto& t : lo.images) largest = std::max<uint64_t>(largest, t.data.size());
  for (auto& m : lo.mix) largest = std::max<uint64_t>(largest, m.input.byte_size().value_or(0));
  if (largest > static_cast<uint64_t>(cfg.runtime.max_payload_bytes))
    return fail("a request of " + std::to_string(largest) + " bytes exceeds runtime.max_payload_bytes (" +
                std::to_string(cfg.runtime.max_payload_bytes) + ") of " + o.config);
  return {};
}

// Runs the load `o` describes; the exit code.
int run_load_command(load_args& o) {
  auto cfg = load_config_or_report(o.config);
  if (!cfg) return 2;
  auto& lo = o.lo;
  auto* p = cfg->find_pipeline(o.pipeline);
  if (!p) return std::cerr << o.config << ": has no pipeline '" << o.pipeline << "'\n", 2;
  lo.pipeline = p->name;
  lo.slo_ms = p->slo_ms;
  auto& root = cfg->models[p->stages[p->roots().front()].model_index];
  lo.input = root.input;
  lo.input_name = root.input_name;
  if (auto ok = choose_frontend(*cfg, o); !ok) return std::cerr << ok.error() << "\n", 2;
  if (!o.fragments.empty()) {
    auto mix = fragment_mix(*cfg, *p, o.fragments);
    if (!mix) return std::cerr << "--fragments: " << mix.error() << "\n", 2;
    lo.mix = std::move(*mix);
    lo.slo_ms = 0;
    for (auto& m : lo.mix) lo.slo_ms = std::max(lo.slo_ms, m.slo_ms);
  }
  if (o.co.clients > 0) return run_clients_command(*cfg, *p, o.bandwidth, o.adaptation, o.json, lo, o.co);
  if (auto ok = choose_payloads(*cfg, o); !ok) return std::cerr << ok.error() << "\n", 2;
  lo.progress = true;
  auto ran = run_load(lo);
  if (!ran) return std::cerr << "sloserve load: " << ran.error() << "\n", 1;
  std::cout << ran->to_text();
  int rc = 0;
  if (!o.json.empty())
    if (auto written = write_file(o.json, ran->to_json(lo).dump(2) + "\n"); !written) {
      std::cerr << "sloserve load: " << written.error() << "\n";
      rc = 1;
    }
  if (!o.report.empty()) {
    std::ifstream file(o.config);
    std::stringstream text;
    text << file.rdbuf();
    if (auto written = write_file(o.report, html_report({&*ran, &lo, command_line(), text.str()})); !written) {
      std::cerr << "sloserve load: " << written.error() << "\n";
      rc = 1;
    }
  }
  return rc;
}

}  // namespace

void add_load_command(CLI::App& app, int& rc) {
  auto o = std::make_shared<load_args>();
  auto* cmd = app.add_subcommand("load", "Drive a pipeline with requests and summarise what came back");
  add_traffic_options(cmd, *o);
  add_client_options(cmd, *o);
  cmd->callback([o, &rc] { rc = run_load_command(*o); });
}

}  // namespace sloserve
