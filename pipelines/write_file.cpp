#include "pipelines/write_file.hpp"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace sloserve {

status write_file(const std::string& path, std::string_view text) {
  namespace fs = std::filesystem;
  if (path.empty()) return fail("cannot write a file with no name");
  auto folder = fs::path(path).parent_path();
  std::error_code ec;
  if (!folder.empty() && !fs::is_directory(folder, ec)) {
    fs::create_directories(folder, ec);
    if (ec) return fail("cannot write " + path + ": cannot create the folder " + folder.string() + ": " + ec.message());
  }
  if (fs::is_directory(path, ec)) return fail("cannot write " + path + ": it is a folder");
  errno = 0;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return fail("cannot write " + path + ": " + std::strerror(errno ? errno : EIO));
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  out.close();
  if (!out) return fail("cannot write " + path + ": " + std::strerror(errno ? errno : EIO));
  return {};
}

}  // namespace sloserve
