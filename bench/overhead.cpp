// bench/overhead: what sloserve's data plane costs over raw ZeroMQ.
//
// sloserve: client -> frontend node -> worker node -> frontend node -> client, a no-op emulated
// model (l = 0), two `sloserve node` processes on loopback.
// raw:      client -> relay process -> echo process -> relay -> client, ZeroMQ ROUTER/DEALER,
// the same request frame, the same four hops.
// Both are measured in this run with the same closed-loop client: latency at concurrency 1, then
// throughput at high concurrency. Prints the figures and the ratios. The nodes' CAF threads wait
// for work as `runtime.actor_scheduling` says (sharing, the default, or stealing); `both`
// measures each in turn, raw ZeroMQ beside each.

#include <arpa/inet.h>
#include <malloc.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zmq.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench/raw_zmq.hpp"
#include "loadgen/shared_inputs.hpp"
#include "loadgen/socket.hpp"
#include "messages/codec.hpp"

namespace {

using steady = std::chrono::steady_clock;
using namespace sloserve::raw_zmq;

pid_t spawn_node(const std::string& cfg, const std::string& name) {
  return fork_fn([&] {
    execl(SLOSERVE_BIN, "sloserve", "--log-level", "warn", "node", "-c", cfg.c_str(), "--name", name.c_str(), nullptr);
  });
}

// ---- one closed-loop client for both ----

struct result {
  double p50_us = 0, p99_us = 0, rps = 0;
  uint64_t bad = 0;
};

// `make(id)` builds a request frame; `id_of(frame)` returns the id of a reply (0: not a good one).
result closed_loop(const std::string& address, int concurrency, double seconds,
                   const std::function<sloserve::bytes(uint64_t)>& make,
                   const std::function<uint64_t(std::string_view)>& id_of) {
  void* ctx = zmq_ctx_new();
  void* s = zmq_socket(ctx, ZMQ_DEALER);
  int zero = 0;
  zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof zero);
  zmq_connect(s, address.c_str());
  std::vector<steady::time_point> sent_at(1 << 20);
  std::vector<float> lat;
  lat.reserve(1 << 20);
  uint64_t next = 1, done = 0;
  result r;
  auto send = [&](uint64_t id) {
    // The frame goes to ZeroMQ by reference, as the nodes send theirs.
    auto* f = new sloserve::bytes(make(id));
    sent_at[id % sent_at.size()] = steady::now();
    zmq_msg_t m;
    zmq_msg_init_data(
        &m, const_cast<char*>(f->data()), f->size(),
        [](void*, void* hint) { delete static_cast<sloserve::bytes*>(hint); }, f);
    zmq_msg_send(&m, s, 0);
  };
  // Warm up: 200 round trips, not measured.
  for (int i = 0; i < 200; ++i) {
    send(next++);
    zmq_msg_t m;
    zmq_msg_init(&m);
    zmq_msg_recv(&m, s, 0);
    zmq_msg_close(&m);
  }
  auto start = steady::now();
  auto stop = start + std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
  for (int i = 0; i < concurrency; ++i) send(next++);
  uint64_t outstanding = concurrency;
  while (outstanding > 0) {
    zmq_msg_t m;
    zmq_msg_init(&m);
    zmq_pollitem_t it{s, 0, ZMQ_POLLIN, 0};
    if (zmq_poll(&it, 1, 2000) <= 0) break;
    zmq_msg_recv(&m, s, 0);
    auto now = steady::now();
    auto id = id_of({static_cast<char*>(zmq_msg_data(&m)), zmq_msg_size(&m)});
    zmq_msg_close(&m);
    --outstanding;
    if (id == 0)
      ++r.bad;
    else
      lat.push_back(std::chrono::duration<float, std::micro>(now - sent_at[id % sent_at.size()]).count());
    ++done;
    if (now < stop) {
      send(next++);
      ++outstanding;
    }
  }
  double el = std::chrono::duration<double>(steady::now() - start).count();
  r.rps = done / el;
  std::sort(lat.begin(), lat.end());
  if (!lat.empty()) {
    r.p50_us = lat[lat.size() / 2];
    r.p99_us = lat[std::min(lat.size() - 1, lat.size() * 99 / 100)];
  }
  zmq_close(s);
  zmq_ctx_term(ctx);
  return r;
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// The models: and pipelines: of a cluster file: pipeline "noop", one stage of a no-op model (l = 0)
// that takes `in` and answers `out`.
std::string noop_pipeline(const sloserve::tensor_spec& in, const sloserve::tensor_spec& out) {
  return "models:\n  - {name: noop, input: {dtype: float32, shape: " + shape_text(in.shape) +
         "}, output: {dtype: float32, shape: " + shape_text(out.shape) +
         "}, max_batch: 256, profile: {alpha_ms: 0, beta_ms: 0}}\n"
         "pipelines:\n  - {name: noop, slo_ms: 10000, stages: [{name: s, model: noop}]}\n";
}

// Asks the frontend for readiness until it says so (about 15 s at most).
bool wait_ready(const std::string& address) {
  using namespace sloserve;
  msg::decode_limits limits;
  void* ctx = zmq_ctx_new();
  void* s = zmq_socket(ctx, ZMQ_DEALER);
  zmq_connect(s, address.c_str());
  bool ready = false;
  for (uint64_t t = 1; t < 300 && !ready; ++t) {
    auto f = msg::encode({{}, msg::status_request{t}});
    zmq_send(s, f.data(), f.size(), 0);
    zmq_pollitem_t it{s, 0, ZMQ_POLLIN, 0};
    if (zmq_poll(&it, 1, 100) > 0) {
      zmq_msg_t m;
      zmq_msg_init(&m);
      zmq_msg_recv(&m, s, 0);
      auto d = msg::decode({static_cast<char*>(zmq_msg_data(&m)), zmq_msg_size(&m)}, limits);
      zmq_msg_close(&m);
      if (d.value)
        if (auto* r = std::get_if<msg::status_reply>(&d.value->content)) ready = r->ready;
    }
    if (!ready) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  int zero = 0;
  zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof zero);
  zmq_close(s);
  zmq_ctx_term(ctx);
  return ready;
}

struct shape_result {
  result raw_lat, slo_lat, raw_tp, slo_tp;
  size_t frame_bytes = 0;
  double idle_core_share = 0;  // both nodes' CPU time while idle, per second of wall time
};

// CPU seconds (user and system) that process `pid` has used.
double cpu_seconds(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto close = text.rfind(')');  // past the command name, which may hold spaces
  if (close == std::string::npos) return 0;
  std::istringstream fields(text.substr(close + 2));
  std::string f;
  double ticks = 0;
  for (int i = 3; i <= 15 && fields >> f; ++i)
    if (i == 14 || i == 15) ticks += std::atof(f.c_str());
  return ticks / static_cast<double>(sysconf(_SC_CLK_TCK));
}

// Both paths for requests of `in` answered with `out`: latency at concurrency 1, then throughput
// at `concurrency`, the nodes' threads scheduled by `scheduling`. Returns false when the sloserve
// nodes did not become ready.
bool measure(const sloserve::tensor_spec& in, const sloserve::tensor_spec& out, double seconds, int concurrency,
             const std::string& scheduling, shape_result& res) {
  using namespace sloserve;
  auto payload = make_tensor(in, 1, "input");
  auto make = [&](uint64_t id) { return msg::encode_frame({{}, msg::client_request{"noop", id, {payload}, -1}}); };
  msg::decode_limits limits;
  // Both clients decode each reply the same way (a client reply: the raw echo sends one too when
  // the output differs from the input, else the request itself).
  auto id_of = [&](std::string_view f) -> uint64_t {
    auto d = msg::decode(f, limits);
    if (!d.value) return 0;
    if (auto* r = std::get_if<msg::client_reply>(&d.value->content))
      return r->code == msg::status::ok ? r->request_id : 0;
    auto* q = std::get_if<msg::client_request>(&d.value->content);
    return q ? q->request_id : 0;
  };

  int fe_port = free_port(), w_port = free_port();
  std::string cfg_path = "/tmp/sloserve-bench-overhead-" + std::to_string(getpid()) + ".yaml";
  std::ofstream(cfg_path) << "nodes:\n"
                          << "  - {name: fe, address: " << ep(fe_port) << ", roles: [controller, frontend]}\n"
                          << "  - {name: w, address: " << ep(w_port)
                          << ", roles: [worker], devices: [{kind: emulated, count: 1}]}\n"
                          << noop_pipeline(in, out) << "runtime: {actor_scheduling: " << scheduling << "}\n";
  std::vector<pid_t> kids{spawn_node(cfg_path, "fe"), spawn_node(cfg_path, "w")};
  auto stop_all = [&] {
    for (auto k : kids) kill(k, SIGTERM);
    for (auto k : kids) waitpid(k, nullptr, 0);
    unlink(cfg_path.c_str());
  };
  if (!wait_ready(ep(fe_port))) {
    fprintf(stderr, "sloserve nodes did not become ready\n");
    stop_all();
    return false;
  }
  // The nodes at rest: connected, planned, no requests.
  std::this_thread::sleep_for(std::chrono::seconds(1));
  double before = cpu_seconds(kids[0]) + cpu_seconds(kids[1]);
  std::this_thread::sleep_for(std::chrono::seconds(3));
  res.idle_core_share = (cpu_seconds(kids[0]) + cpu_seconds(kids[1]) - before) / 3;
  int relay_port = free_port(), echo_port = free_port();
  std::optional<tensor_spec> reply;
  if (in.shape != out.shape) reply = out;
  kids.push_back(fork_fn([&] { run_echo(echo_port, reply); }));
  kids.push_back(fork_fn([&] { run_relay(relay_port, echo_port); }));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  res.frame_bytes = make(1).size();
  res.raw_lat = closed_loop(ep(relay_port), 1, seconds, make, id_of);
  res.slo_lat = closed_loop(ep(fe_port), 1, seconds, make, id_of);
  res.raw_tp = closed_loop(ep(relay_port), concurrency, seconds, make, id_of);
  res.slo_tp = closed_loop(ep(fe_port), concurrency, seconds, make, id_of);
  stop_all();
  return true;
}

// One node with every role (frontend and worker in one process) and the same client, requests of
// `in` sent two ways: their bytes over ZeroMQ TCP, or left in a shared-memory region registered
// with the node (runtime.client_shared_memory), each request naming it. Throughput at
// `concurrency`, then latency at 1.
struct shared_result {
  result tcp_tp, shm_tp, tcp_lat, shm_lat;
};
bool measure_shared(const sloserve::tensor_spec& in, const sloserve::tensor_spec& out, double seconds, int concurrency,
                    shared_result& res) {
  using namespace sloserve;
  auto payload = make_tensor(in, 1, "input");
  msg::decode_limits limits;
  auto id_of = [&](std::string_view f) -> uint64_t {
    auto d = msg::decode(f, limits);
    auto* r = d.value ? std::get_if<msg::client_reply>(&d.value->content) : nullptr;
    return r && r->code == msg::status::ok ? r->request_id : 0;
  };
  int port = free_port();
  std::string cfg_path = "/tmp/sloserve-bench-shm-" + std::to_string(getpid()) + ".yaml";
  std::ofstream(cfg_path) << "nodes:\n"
                          << "  - {name: n, address: " << ep(port)
                          << ", roles: [controller, frontend, worker], devices: [{kind: emulated, count: 1}]}\n"
                          << noop_pipeline(in, out) << "runtime: {client_shared_memory: true}\n";
  pid_t node = spawn_node(cfg_path, "n");
  auto stop_node = [&] {
    kill(node, SIGTERM);
    waitpid(node, nullptr, 0);
    unlink(cfg_path.c_str());
  };
  if (!wait_ready(ep(port))) {
    fprintf(stderr, "the sloserve node did not become ready\n");
    stop_node();
    return false;
  }
  load_options o;
  o.address = ep(port);
  load_socket control(o);
  auto region = shared_inputs::create({payload}, {});
  status registered = region ? control.connect() : status(fail(region.error()));
  if (registered) registered = (*region)->register_with(control, 5);
  if (!registered) {
    fprintf(stderr, "%s\n", registered.error().c_str());
    stop_node();
    return false;
  }
  auto by_tcp = [&](uint64_t id) { return msg::encode_frame({{}, msg::client_request{"noop", id, {payload}, -1}}); };
  auto by_shm = [&](uint64_t id) {
    msg::client_request r{"noop", id, {}, -1};
    r.shm_inputs.push_back((*region)->payload(0));
    return msg::encode_frame({{}, std::move(r)});
  };
  res.tcp_tp = closed_loop(ep(port), concurrency, seconds, by_tcp, id_of);
  res.shm_tp = closed_loop(ep(port), concurrency, seconds, by_shm, id_of);
  res.tcp_lat = closed_loop(ep(port), 1, seconds, by_tcp, id_of);
  res.shm_lat = closed_loop(ep(port), 1, seconds, by_shm, id_of);
  region->reset();  // unregisters over `control`
  stop_node();
  return true;
}

void print(const char* title, const shape_result& r, int concurrency) {
  printf("\n%s: %zu-byte request frames\n", title, r.frame_bytes);
  printf("%-34s %12s %12s %12s\n", "", "raw zmq", "sloserve", "ratio");
  printf("%-34s %12.1f %12.1f %11.2fx\n", "latency p50 (us), concurrency 1", r.raw_lat.p50_us, r.slo_lat.p50_us,
         r.slo_lat.p50_us / r.raw_lat.p50_us);
  printf("%-34s %12.1f %12.1f %11.2fx\n", "latency p99 (us), concurrency 1", r.raw_lat.p99_us, r.slo_lat.p99_us,
         r.slo_lat.p99_us / r.raw_lat.p99_us);
  printf("%-34s %12.0f %12.0f %11.2fx\n", ("throughput (req/s), concurrency " + std::to_string(concurrency)).c_str(),
         r.raw_tp.rps, r.slo_tp.rps, r.slo_tp.rps / r.raw_tp.rps);
  printf("sloserve's two nodes at rest use %.0f%% of a core\n", 100 * r.idle_core_share);
  printf("non-OK replies: sloserve %lu, raw %lu\n", (unsigned long)(r.slo_lat.bad + r.slo_tp.bad),
         (unsigned long)(r.raw_lat.bad + r.raw_tp.bad));
}

}  // namespace

// bench_overhead [seconds] [concurrency] [small|resnet|shm|all] [sharing|stealing|both]
int main(int argc, char** argv) {
  double seconds = argc > 1 ? std::atof(argv[1]) : 5;
  int concurrency = argc > 2 ? std::atoi(argv[2]) : 128;
  std::string which = argc > 3 ? argv[3] : "all";
  std::string scheduling = argc > 4 ? argv[4] : "sharing";
  std::vector<std::string> schedulings{scheduling};
  if (scheduling == "both") schedulings = {"sharing", "stealing"};
  signal(SIGPIPE, SIG_IGN);
  // The same heap settings as the sloserve binary, for the client, the relay and the echo (forked
  // from here): both paths keep large frames on the heap.
  mallopt(M_MMAP_THRESHOLD, 256 << 20);
  mallopt(M_TRIM_THRESHOLD, 512 << 20);
  using namespace sloserve;
  printf("%.0f s per measurement; the client, both nodes, the relay and the echo share this machine\n", seconds);
  bool ok = true;
  for (auto& sched : schedulings) {
    printf("\nruntime.actor_scheduling: %s\n", sched.c_str());
    if (which == "small" || which == "all") {
      shape_result r;
      ok &= measure({dtype::float32, {16}}, {dtype::float32, {16}}, seconds, concurrency, sched, r);
      print("small: float32[16] in and out", r, concurrency);
      printf("targets: p50 <= 3x raw (%s); >= 20000 req/s through one frontend (%s)\n",
             r.slo_lat.p50_us <= 3 * r.raw_lat.p50_us ? "met" : "NOT met", r.slo_tp.rps >= 20000 ? "met" : "NOT met");
    }
    if (which == "resnet" || which == "all") {
      // ResNet-shaped: 602,112 bytes in, 4,000 out; 32 in flight.
      shape_result r;
      int c = std::min(concurrency, 32);
      ok &= measure({dtype::float32, {3, 224, 224}}, {dtype::float32, {1000}}, seconds, c, sched, r);
      print("resnet-shaped: float32[3,224,224] in, float32[1000] out", r, c);
      printf("targets: throughput >= 0.8x raw (%s); p50 <= 3x raw (%s)\n",
             r.slo_tp.rps >= 0.8 * r.raw_tp.rps ? "met" : "NOT met",
             r.slo_lat.p50_us <= 3 * r.raw_lat.p50_us ? "met" : "NOT met");
    }
  }
  if (which == "shm" || which == "all") {
    // ResNet-shaped requests from a client on the node's host: over TCP, or through shared memory.
    shared_result r;
    int c = std::min(concurrency, 32);
    ok &= measure_shared({dtype::float32, {3, 224, 224}}, {dtype::float32, {1000}}, seconds, c, r);
    printf("\nshared memory: float32[3,224,224] in, float32[1000] out, one node with every role\n");
    printf("%-34s %12s %12s %12s\n", "", "zmq tcp", "shared mem", "ratio");
    printf("%-34s %12.0f %12.0f %11.2fx\n", ("throughput (req/s), concurrency " + std::to_string(c)).c_str(),
           r.tcp_tp.rps, r.shm_tp.rps, r.shm_tp.rps / r.tcp_tp.rps);
    printf("%-34s %12.1f %12.1f %11.2fx\n", "latency p50 (us), concurrency 1", r.tcp_lat.p50_us, r.shm_lat.p50_us,
           r.shm_lat.p50_us / r.tcp_lat.p50_us);
    printf("non-OK replies: tcp %lu, shared memory %lu\n", (unsigned long)(r.tcp_tp.bad + r.tcp_lat.bad),
           (unsigned long)(r.shm_tp.bad + r.shm_lat.bad));
    printf("target: shared memory >= 2x tcp (%s)\n", r.shm_tp.rps >= 2 * r.tcp_tp.rps ? "met" : "NOT met");
  }
  return ok ? 0 : 1;
}
