#pragma once
// A file's text, for tests that build cluster files from shared pieces (two_stage.yaml).

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace sloserve::testing {

inline std::string read_text(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace sloserve::testing
