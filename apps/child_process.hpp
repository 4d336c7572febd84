#pragma once
// A child process of the sloserve binary with its output in a file: what the integration tests
// and bench/soak use to start clusters (`up`), single nodes (`node`) and load clients (`load`).

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace sloserve {

struct child_process {
  pid_t pid = -1;
  std::filesystem::path out;

  // True once it exited within `limit`, with `status` from waitpid.
  bool wait_for(std::chrono::milliseconds limit, int& status) {
    auto until = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < until) {
      if (waitpid(pid, &status, WNOHANG) == pid) {
        pid = -1;
        return true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  }
  // SIGTERM, then SIGKILL after 10 s.
  void stop() {
    if (pid <= 0) return;
    kill(pid, SIGTERM);
    int status;
    if (!wait_for(std::chrono::seconds(10), status)) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      pid = -1;
    }
  }
  std::string output() const {
    std::ifstream in(out);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
};

// Runs `binary` with `args` (argv[0] included), stdout and stderr into `out`.
inline child_process spawn_child(const std::string& binary, std::vector<std::string> args,
                                 const std::filesystem::path& out) {
  child_process p;
  p.out = out;
  p.pid = fork();
  if (p.pid == 0) {
    auto fd = open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, 1);
    dup2(fd, 2);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(binary.c_str(), argv.data());
    _exit(127);
  }
  return p;
}

// `sloserve up` (the binary `sloserve`) on `dir`/cluster.yaml, writing `dir`/resolved.yaml and
// logging to `dir`/up.log; returns once it says "cluster up" or after 15 s (check output()).
inline child_process spawn_up(const std::string& sloserve, const std::filesystem::path& dir) {
  auto up = spawn_child(
      sloserve,
      {"sloserve", "up", "-c", (dir / "cluster.yaml").string(), "--write-config", (dir / "resolved.yaml").string()},
      dir / "up.log");
  for (int i = 0; i < 300 && up.output().find("cluster up") == std::string::npos; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  return up;
}

}  // namespace sloserve
