// Triton's logging extension on the process's log: what is read back is what logs, changes apply
// whole or not at all, a log file is opened with its folders, and the ISO 8601 format stamps UTC.

#include <gtest/gtest.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "ingress/log_settings.hpp"

namespace sloserve::logs {
namespace {

std::string read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(log_settings, are_read_changed_whole_and_written_where_asked) {
  spdlog::set_level(spdlog::level::info);
  auto now = current();
  EXPECT_EQ(std::get<bool>(now.at("log_info")), true);
  EXPECT_EQ(std::get<uint32_t>(now.at("log_verbose_level")), 0u);
  EXPECT_EQ(std::get<std::string>(now.at("log_file")), "");
  EXPECT_EQ(std::get<std::string>(now.at("log_format")), "default");

  auto verbose = update({{"log_verbose_level", uint32_t{1}}});
  ASSERT_TRUE(verbose) << verbose.error();
  EXPECT_EQ(spdlog::get_level(), spdlog::level::debug);
  EXPECT_EQ(std::get<uint32_t>(verbose->at("log_verbose_level")), 1u);

  // Refused whole: nothing of a refused change applies.
  auto why = [](const settings& s) {
    auto r = update(s);
    return r ? std::string("accepted") : r.error();
  };
  EXPECT_NE(why({{"log_verbose_level", uint32_t{0}}, {"log_colour", true}}).find("unknown log setting 'log_colour'"),
            std::string::npos);
  EXPECT_EQ(spdlog::get_level(), spdlog::level::debug);
  EXPECT_NE(why({{"log_info", uint32_t{1}}}).find("'log_info' must be a boolean"), std::string::npos);
  EXPECT_NE(why({{"log_format", std::string("json")}}).find("neither 'default' nor 'ISO8601'"), std::string::npos);
  EXPECT_NE(why({{"log_error", false}}).find("at or above one level"), std::string::npos);
  EXPECT_NE(why({{"log_verbose_level", uint32_t{0}}, {"log_warning", false}}).find("at or above one level"),
            std::string::npos);
  EXPECT_NE(why({{"log_info", false}}).find("needs log_info"), std::string::npos) << "verbose is still 1";
  EXPECT_EQ(spdlog::get_level(), spdlog::level::debug);

  auto quiet = update({{"log_verbose_level", uint32_t{0}}, {"log_info", false}});
  ASSERT_TRUE(quiet) << quiet.error();
  EXPECT_EQ(spdlog::get_level(), spdlog::level::warn);

  // A log file in folders that do not exist yet, in ISO 8601 (UTC).
  auto dir = std::filesystem::temp_directory_path() / ("sloserve-log-" + std::to_string(getpid()));
  auto file = (dir / "a" / "b" / "node.log").string();
  auto moved = update({{"log_file", file}, {"log_format", std::string("ISO8601")}, {"log_info", true}});
  ASSERT_TRUE(moved) << moved.error();
  spdlog::info("a line for the file");
  auto text = read(file);  // written through, without a flush
  EXPECT_NE(text.find("a line for the file"), std::string::npos) << text;
  EXPECT_TRUE(std::regex_search(text, std::regex(R"(^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z \[info\])"))) << text;
  auto nowhere = update({{"log_file", std::string("/proc/sloserve/none/node.log")}});
  ASSERT_FALSE(nowhere);
  EXPECT_NE(nowhere.error().find("log_file '/proc/sloserve/none/node.log'"), std::string::npos) << nowhere.error();
  EXPECT_EQ(std::get<std::string>(current().at("log_file")), file);
  ASSERT_TRUE(update({{"log_file", std::string()}, {"log_format", std::string("default")}}));
  spdlog::info("a line for standard error");
  spdlog::default_logger()->flush();
  EXPECT_EQ(read(file).find("standard error"), std::string::npos);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace sloserve::logs
