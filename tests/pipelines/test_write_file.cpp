// write_file: what commands write lands with its folders made, or fails naming the path and why.

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "pipelines/write_file.hpp"

namespace sloserve {
namespace {

namespace fs = std::filesystem;

struct write_file_test : ::testing::Test {
  fs::path dir = fs::temp_directory_path() / ("sloserve-write-" + std::to_string(getpid()));
  void SetUp() override { fs::remove_all(dir); }
  void TearDown() override { fs::remove_all(dir); }
  static std::string read(const fs::path& p) {
    std::ifstream in(p);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
};

TEST_F(write_file_test, creates_the_folders_it_names_and_replaces_what_was_there) {
  auto path = (dir / "a" / "b" / "out.json").string();
  ASSERT_TRUE(write_file(path, "{\"x\": 1}\n"));
  EXPECT_EQ(read(path), "{\"x\": 1}\n");
  ASSERT_TRUE(write_file(path, "2"));
  EXPECT_EQ(read(path), "2");
}

TEST_F(write_file_test, fails_with_the_path_and_the_reason) {
  fs::create_directories(dir);
  std::ofstream(dir / "plain") << "x";
  // A folder that would have to be a file.
  auto under_a_file = (dir / "plain" / "out.json").string();
  auto s = write_file(under_a_file, "y");
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().find("cannot write " + under_a_file + ": cannot create the folder"), std::string::npos)
      << s.error();
  EXPECT_FALSE(fs::exists(under_a_file));
  // A path that is a folder.
  s = write_file(dir.string(), "y");
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error(), "cannot write " + dir.string() + ": it is a folder");
  // A folder it may not write into (root may write anywhere: then there is nothing to refuse).
  if (geteuid() != 0) {
    fs::create_directories(dir / "ro");
    fs::permissions(dir / "ro", fs::perms::owner_read | fs::perms::owner_exec);
    s = write_file((dir / "ro" / "f").string(), "y");
    ASSERT_FALSE(s);
    EXPECT_NE(s.error().find("Permission denied"), std::string::npos) << s.error();
    fs::permissions(dir / "ro", fs::perms::owner_all);
  }
  EXPECT_FALSE(write_file("", "y"));
}

}  // namespace
}  // namespace sloserve
