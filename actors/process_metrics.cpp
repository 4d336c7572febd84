// The process collector's families (process_*), from /proc/self.

#include <sys/resource.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "actors/exposition.hpp"
#include "actors/metrics.hpp"

namespace sloserve {

using namespace exposition;

process_sample read_process() {
  process_sample p;
  // /proc/self/stat: fields after the command's closing parenthesis, the first being field 3.
  std::ifstream stat("/proc/self/stat");
  std::string line;
  if (std::getline(stat, line)) {
    std::istringstream rest(line.substr(line.rfind(')') + 2));
    std::vector<std::string> f{"", "", ""};  // fields 1 and 2 left out, indexed from 1
    for (std::string x; rest >> x;) f.push_back(x);
    double tick = static_cast<double>(sysconf(_SC_CLK_TCK));
    auto field = [&](size_t i) { return i < f.size() ? std::strtod(f[i].c_str(), nullptr) : 0.0; };
    p.cpu_seconds = (field(14) + field(15)) / tick;
    p.virtual_bytes = field(23);
    p.resident_bytes = field(24) * static_cast<double>(sysconf(_SC_PAGESIZE));
    std::ifstream boot("/proc/stat");
    for (std::string l; std::getline(boot, l);)
      if (l.rfind("btime ", 0) == 0) p.start_time_seconds = std::strtod(l.c_str() + 6, nullptr) + field(22) / tick;
  }
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator("/proc/self/fd", ec); !ec && it != std::filesystem::end(it);
       it.increment(ec))
    ++p.open_fds;
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) == 0) p.max_fds = static_cast<double>(lim.rlim_cur);
  return p;
}

void render_process(std::string& out, const process_sample& p) {
  struct family {
    const char *name, *type, *help;
    double value;
  };
  for (auto& f : {family{"process_cpu_seconds_total", "counter", "Total user and system CPU time spent in seconds.",
                         p.cpu_seconds},
                  family{"process_resident_memory_bytes", "gauge", "Resident memory size in bytes.", p.resident_bytes},
                  family{"process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes.", p.virtual_bytes},
                  family{"process_start_time_seconds", "gauge",
                         "Start time of the process since unix epoch in seconds.", p.start_time_seconds},
                  family{"process_open_fds", "gauge", "Number of open file descriptors.", p.open_fds},
                  family{"process_max_fds", "gauge", "Maximum number of open file descriptors.", p.max_fds}}) {
    header(out, f.name, f.type, f.help);
    sample(out, f.name, {}, f.value);
  }
}

}  // namespace sloserve
