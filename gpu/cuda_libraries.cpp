#include "gpu/cuda_libraries.hpp"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>

namespace sloserve {
namespace {

// Libraries whose names start with `stem` in `dir`, newest version first.
void add_from(const std::filesystem::path& dir, const std::string& stem, std::vector<std::string>& out) {
  std::error_code ec;
  std::set<std::string, std::greater<>> found;
  for (auto& f : std::filesystem::directory_iterator(dir, ec))
    if (f.path().filename().string().rfind(stem, 0) == 0) found.insert(f.path().string());
  out.insert(out.end(), found.begin(), found.end());
}

}  // namespace

std::vector<std::string> cuda_library_candidates(const std::string& stem, const char* env, const std::string& wheel,
                                                 const std::vector<std::string>& beside_torch,
                                                 const std::vector<std::string>& sonames) {
  std::vector<std::string> out;
  if (const char* path = std::getenv(env); path && *path) out.emplace_back(path);
  std::ifstream maps("/proc/self/maps");
  std::set<std::string> loaded;
  std::set<std::filesystem::path> sites;  // the folders that hold torch/
  for (std::string line; std::getline(maps, line);) {
    auto begin = line.find('/');
    if (begin == std::string::npos) continue;
    std::filesystem::path file = line.substr(begin);
    if (file.filename().string().rfind(stem + ".so", 0) == 0) loaded.insert(file.string());
    if (auto at = line.find("/torch/lib/"); at != std::string::npos) sites.insert(line.substr(begin, at - begin));
  }
  out.insert(out.end(), loaded.begin(), loaded.end());
  for (auto& site : sites) {
    add_from(site / "nvidia" / wheel / "lib", stem, out);
    for (auto& dir : beside_torch) add_from(site / dir, stem, out);
  }
  for (auto* dir : {"/usr/local/cuda/lib64", "/usr/local/cuda/targets/x86_64-linux/lib"}) add_from(dir, stem, out);
  out.insert(out.end(), sonames.begin(), sonames.end());
  return out;
}

expected<loaded_library> load_first(const std::vector<std::string>& candidates) {
  std::string tried;
  for (auto& path : candidates) {
    if (void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL)) return loaded_library{lib, path};
    tried += (tried.empty() ? "" : ", ") + path;
  }
  return fail("tried " + tried);
}

}  // namespace sloserve
