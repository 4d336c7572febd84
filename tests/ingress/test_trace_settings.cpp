// Triton's trace extension's settings: defaults, sampling by rate and count, a pipeline's own
// settings over the global ones, refusals that change nothing, and lines written to the file.

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "ingress/trace_settings.hpp"

namespace sloserve::tracing {
namespace {

std::vector<std::string> one(const std::string& v) {
  return {v};
}

TEST(trace_settings, sample_every_rate_th_request_while_the_count_lasts_and_write_lines) {
  tracer t;
  auto d = t.settings("");
  EXPECT_EQ(d.at("trace_level"), one("OFF"));
  EXPECT_EQ(d.at("trace_rate"), one("1000"));
  EXPECT_EQ(d.at("trace_count"), one("-1"));
  EXPECT_EQ(d.at("trace_file"), one(""));
  EXPECT_FALSE(t.sample("p")) << "off by default";

  auto dir = std::filesystem::temp_directory_path() / ("sloserve-trace-" + std::to_string(getpid()));
  auto file = (dir / "t" / "trace.jsonl").string();
  auto why = [&](const std::string& pipeline, const changes& c) {
    auto r = t.update(pipeline, c);
    return r ? std::string("accepted") : r.error();
  };
  EXPECT_NE(why("", {{"trace_level", one("TIMESTAMPS")}}).find("needs a trace_file"), std::string::npos);
  EXPECT_NE(why("", {{"trace_level", one("TENSORS")}, {"trace_file", one(file)}}).find("not served"),
            std::string::npos);
  EXPECT_NE(why("", {{"trace_rate", one("0")}}).find("at least 1"), std::string::npos);
  EXPECT_NE(why("", {{"trace_rate", one("2x")}}).find("at least 1"), std::string::npos);
  EXPECT_NE(why("", {{"trace_colour", one("x")}}).find("unknown trace setting"), std::string::npos);
  EXPECT_NE(why("", {{"trace_rate", std::nullopt}}).find("only a pipeline's own"), std::string::npos);
  EXPECT_NE(why("", {{"trace_level", one("TIMESTAMPS")}, {"trace_file", one("/proc/sloserve/none/t.jsonl")}})
                .find("trace_file '/proc/sloserve/none/t.jsonl'"),
            std::string::npos);
  EXPECT_EQ(t.settings("").at("trace_level"), one("OFF")) << "nothing of a refused change applies";

  auto on = t.update("", {{"trace_level", one("TIMESTAMPS")},
                          {"trace_rate", one("2")},
                          {"trace_file", one(file)},
                          {"trace_count", one("3")}});
  ASSERT_TRUE(on) << on.error();
  std::vector<bool> taken;
  for (int i = 0; i < 8; ++i) taken.push_back(t.sample("p"));
  EXPECT_EQ(taken, (std::vector<bool>{true, false, true, false, true, false, false, false}))
      << "every 2nd, three in all";
  EXPECT_EQ(t.settings("").at("trace_count"), one("0")) << "the count left";

  // A pipeline's own rate: counted apart from the global ones; cleared, it follows them again.
  ASSERT_TRUE(t.update("q", {{"trace_rate", one("1")}, {"trace_count", one("-1")}}));
  EXPECT_EQ(t.settings("q").at("trace_rate"), one("1"));
  EXPECT_EQ(t.settings("q").at("trace_file"), one(file)) << "the rest from the global settings";
  EXPECT_TRUE(t.sample("q"));
  EXPECT_TRUE(t.sample("q"));
  EXPECT_FALSE(t.sample("p")) << "the global count is spent";
  ASSERT_TRUE(t.update("q", {{"trace_rate", std::nullopt}, {"trace_count", std::nullopt}}));
  EXPECT_EQ(t.settings("q").at("trace_rate"), one("2"));

  t.write("q", R"({"id": 1})");
  t.write("p", R"({"id": 2})");
  std::ifstream in(file);
  std::string a, b;
  std::getline(in, a);
  std::getline(in, b);
  EXPECT_EQ(a, R"({"id": 1})");
  EXPECT_EQ(b, R"({"id": 2})");

  auto json = changes_from_json(R"({"trace_level": ["OFF"], "trace_rate": "5", "trace_file": null})");
  ASSERT_TRUE(json) << json.error();
  EXPECT_EQ(json->at("trace_rate"), one("5"));
  EXPECT_FALSE(json->at("trace_file"));
  EXPECT_FALSE(changes_from_json(R"({"trace_rate": 5})"));
  EXPECT_NE(to_json(t.settings("")).find(R"("trace_level":["TIMESTAMPS"])"), std::string::npos);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace sloserve::tracing
