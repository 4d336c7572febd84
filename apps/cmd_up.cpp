// `sloserve up`: one OS process per node of a cluster file, on this host.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>

#include "apps/commands.hpp"
#include "config/knob_option.hpp"
#include "messages/endpoint.hpp"
#include "pipelines/write_file.hpp"

namespace sloserve {
namespace {

// A port on `host` (IPv4) held by a bound socket: no other pick gets it while it is held. Port
// 0 when none can be had.
class held_port {
 public:
  explicit held_port(const std::string& host) : fd_(socket(AF_INET, SOCK_STREAM, 0)) {
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    if (fd_ < 0 || inet_pton(AF_INET, host == "*" ? "0.0.0.0" : host.c_str(), &sa.sin_addr) != 1) return;
    socklen_t len = sizeof sa;
    if (bind(fd_, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0 &&
        getsockname(fd_, reinterpret_cast<sockaddr*>(&sa), &len) == 0)
      port_ = ntohs(sa.sin_port);
  }
  held_port(const held_port&) = delete;
  held_port& operator=(const held_port&) = delete;
  ~held_port() {
    if (fd_ >= 0) close(fd_);
  }
  int port() const { return port_; }

 private:
  int fd_ = -1;
  int port_ = 0;
};

// Replaces port 0 in tcp:// addresses and in http ingresses with a free port, so that every node
// knows every other and clients know where to go.
status resolve_ports(cluster_config& cfg) {
  // Every pick is held until all are made: two nodes never get the same port.
  std::vector<std::unique_ptr<held_port>> held;
  auto free_port = [&](const std::string& host) {
    return held.emplace_back(std::make_unique<held_port>(bindable_host(host)))->port();
  };
  auto ends_in_zero = [](const std::string& a) { return a.size() >= 2 && a.compare(a.size() - 2, 2, ":0") == 0; };
  for (auto& n : cfg.nodes) {
    auto& a = n.address;
    if (a.rfind("tcp://", 0) == 0 && ends_in_zero(a)) {
      auto host = a.substr(6, a.size() - 8);
      int port = free_port(host);
      if (!port)
        return fail("node '" + n.name + "': cannot pick a port for host '" + host +
                    "' (use an IPv4 address or a host name)");
      a = "tcp://" + host + ":" + std::to_string(port);
    }
    for (auto* hp : {&n.http, &n.grpc, &n.metrics}) {
      if (!ends_in_zero(*hp)) continue;
      auto host = hp->substr(0, hp->size() - 2);
      int port = free_port(host);
      if (!port)
        return fail("node '" + n.name + "': cannot pick a port for " +
                    (hp == &n.http   ? "http"
                     : hp == &n.grpc ? "grpc"
                                     : "metrics") +
                    " on host '" + host + "' (use an IPv4 address or a host name)");
      *hp = host + ":" + std::to_string(port);
    }
  }
  return {};
}

struct child {
  std::string name;
  pid_t pid = -1;
  int ready_fd = -1;
  bool ready = false;
  std::string endpoint;
};

void stop_all(std::vector<child>& kids, int sig) {
  for (auto& k : kids)
    if (k.pid > 0) kill(k.pid, sig);
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  for (auto& k : kids) {
    while (k.pid > 0) {
      int status;
      auto r = waitpid(k.pid, &status, WNOHANG);
      if (r == k.pid || r < 0) {
        k.pid = -1;
        break;
      }
      if (std::chrono::steady_clock::now() > until) {
        kill(k.pid, SIGKILL);
        waitpid(k.pid, &status, 0);
        k.pid = -1;
        break;
      }
      usleep(20000);
    }
  }
}

// How long `up` waits for the nodes: 20 s, or 620 s where a worker measures real models at
// start-up (tens of seconds for ResNet-50 on a CPU), said so.
double startup_timeout(const cluster_config& cfg) {
  int profiled = 0;
  for (auto& n : cfg.nodes)
    for (auto& m : cfg.models)
      for (int d = 0; m.needs_profile && d < n.device_count(); ++d)
        if (n.serves(d, m.name) && n.group_of(d)->kind != device_kind::emulated) {
          ++profiled;
          break;
        }
  double timeout = profiled ? 620 : 20;
  if (profiled)
    std::cerr << "sloserve up: " << profiled << " model" << (profiled > 1 ? "s are" : " is")
              << " profiled at start-up; waiting up to " << timeout << " s for the nodes\n";
  return timeout;
}

// Waits until every node says it is ready, within `timeout_s`; false (the reason said) when one
// fails or time runs out.
bool wait_ready(std::vector<child>& kids, double timeout_s) {
  auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000));
  size_t ready = 0;
  while (ready < kids.size()) {
    if (std::chrono::steady_clock::now() > until) {
      std::cerr << "sloserve up: nodes did not start within " << timeout_s << " s\n";
      return false;
    }
    for (auto& k : kids) {
      if (k.ready) continue;
      pollfd p{k.ready_fd, POLLIN, 0};
      if (poll(&p, 1, 10) > 0) {
        char buf[256];
        auto n = read(k.ready_fd, buf, sizeof buf - 1);
        if (n > 6 && std::string(buf, 6) == "ready ") {
          k.ready = true;
          k.endpoint = std::string(buf + 6, static_cast<size_t>(n - 7));
          ++ready;
        } else {
          int status = 0;
          waitpid(k.pid, &status, 0);
          k.pid = -1;
          std::cerr << "sloserve up: node '" << k.name << "' failed to start (exit status "
                    << (WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status)) << ")\n";
          return false;
        }
        close(k.ready_fd);
      }
    }
  }
  return true;
}

// Serves until SIGINT or SIGTERM, saying which nodes exit meanwhile.
void serve_until_signalled(std::vector<child>& kids, const sigset_t& set) {
  while (true) {
    siginfo_t info;
    int sig = sigwaitinfo(&set, &info);
    if (sig == SIGCHLD) {
      int status;
      pid_t pid;
      while ((pid = waitpid(-1, &status, WNOHANG)) > 0)
        for (auto& k : kids)
          if (k.pid == pid) {
            spdlog::warn("node {} (pid {}) exited with status {}", k.name, pid,
                         WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
            k.pid = -1;
          }
      continue;
    }
    if (sig == SIGINT || sig == SIGTERM) break;
  }
}

}  // namespace

void add_up_command(CLI::App& app, int& rc) {
  struct opts {
    std::string config, write_config, level = "info";
    double timeout = 0;  // 0: 20 s, plus 10 minutes when a worker profiles models at start-up
  };
  auto o = std::make_shared<opts>();
  auto* cmd = app.add_subcommand("up", "Start one OS process per node of a cluster file on this host");
  cmd->add_option("-c,--config", o->config, "cluster file")->required();
  cmd->add_option("--write-config", o->write_config,
                  "write the cluster file with port-0 addresses resolved here (for `sloserve load -c`)");
  cmd->add_option(
      "--start-timeout", o->timeout,
      "seconds to wait for every node to start (default 20, or 620 when a worker profiles models at start-up)");
  cmd->callback([o, &rc] {
    auto cfg = load_config_or_report(o->config);
    if (!cfg) return void(rc = 2);
    if (auto ports = resolve_ports(*cfg); !ports) {
      std::cerr << "sloserve up: " << ports.error() << "\n";
      return void(rc = 1);
    }
    auto path = o->write_config;
    if (path.empty()) path = "/tmp/sloserve-up-" + std::to_string(getpid()) + ".yaml";
    if (auto written = write_file(path, to_yaml(*cfg)); !written) {
      std::cerr << "sloserve up: " << written.error() << "\n";
      return void(rc = 1);
    }
    // Signals reach us through sigtimedwait; children get the default dispositions back.
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGCHLD);
    sigprocmask(SIG_BLOCK, &set, nullptr);
    std::vector<child> kids;
    for (auto& n : cfg->nodes) {
      int fds[2];
      if (pipe(fds) != 0) {
        stop_all(kids, SIGTERM);
        return void(rc = 1);
      }
      pid_t pid = fork();
      if (pid == 0) {
        sigprocmask(SIG_UNBLOCK, &set, nullptr);
        close(fds[0]);
        setenv("SLOSERVE_READY_FD", std::to_string(fds[1]).c_str(), 1);
        execl("/proc/self/exe", "sloserve", "node", "-c", path.c_str(), "--name", n.name.c_str(), nullptr);
        _exit(127);
      }
      close(fds[1]);
      kids.push_back({n.name, pid, fds[0], false, {}});
    }
    // Wait until every node says it is ready; any failure stops them all. A worker that measures
    // models at start-up takes as long as the models take (tens of seconds for ResNet-50 on a CPU).
    if (o->timeout <= 0) o->timeout = startup_timeout(*cfg);
    if (!wait_ready(kids, o->timeout)) {
      stop_all(kids, SIGTERM);
      return void(rc = 1);
    }
    for (auto& k : kids) std::cout << "node " << k.name << " pid " << k.pid << " at " << k.endpoint << "\n";
    std::cout << "cluster up; config with resolved addresses: " << path << std::endl;
    serve_until_signalled(kids, set);
    stop_all(kids, SIGTERM);
    if (o->write_config.empty()) unlink(path.c_str());
  });
}

}  // namespace sloserve
