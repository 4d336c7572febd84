#include "ingress/log_settings.hpp"

#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/spdlog.h>

#include <filesystem>
#include <mutex>
#include <nlohmann/json.hpp>
#include <vector>

namespace sloserve::logs {
namespace {

constexpr const char* default_pattern = "[%H:%M:%S.%e] [%^%l%$] %v";
constexpr const char* iso8601_pattern = "%Y-%m-%dT%H:%M:%S.%fZ [%l] %v";

struct state {
  bool read = false;  // taken from spdlog's level once
  std::string file;
  bool info = true, warning = true, error = true;
  uint32_t verbose = 0;
  std::string format = "default";
  std::vector<spdlog::sink_ptr> first_sinks;              // where the node logged as it started
  std::vector<std::shared_ptr<spdlog::logger>> replaced;  // kept: a thread may still log through one
};

std::mutex mu;
state& the_state() {
  static state s;
  if (!s.read) {
    s.read = true;
    auto level = spdlog::get_level();
    s.verbose = level == spdlog::level::trace ? 2 : level == spdlog::level::debug ? 1 : 0;
    s.info = level <= spdlog::level::info;
    s.warning = level <= spdlog::level::warn;
    s.error = level <= spdlog::level::err;
    s.first_sinks = spdlog::default_logger()->sinks();
  }
  return s;
}

settings of(const state& s) {
  return {{"log_file", s.file},
          {"log_info", s.info},
          {"log_warning", s.warning},
          {"log_error", s.error},
          {"log_verbose_level", s.verbose},
          {"log_format", s.format}};
}

spdlog::level::level_enum level_of(const state& s) {
  if (s.verbose >= 2) return spdlog::level::trace;
  if (s.verbose == 1) return spdlog::level::debug;
  if (s.info) return spdlog::level::info;
  if (s.warning) return spdlog::level::warn;
  if (s.error) return spdlog::level::err;
  return spdlog::level::off;
}

template <class T>
status take(const settings& changes, const std::string& name, T& out, const char* type) {
  auto it = changes.find(name);
  if (it == changes.end()) return {};
  if (auto* v = std::get_if<T>(&it->second)) {
    out = *v;
    return {};
  }
  return fail("log setting '" + name + "' must be a " + type);
}

}  // namespace

settings current() {
  std::lock_guard lock(mu);
  return of(the_state());
}

expected<settings> update(const settings& changes) {
  std::lock_guard lock(mu);
  auto& s = the_state();
  auto next = s;
  for (auto& [name, v] : changes)
    if (!of(s).count(name))
      return fail("unknown log setting '" + name +
                  "' (log_file, log_info, log_warning, log_error, log_verbose_level, log_format)");
  for (auto ok :
       {take(changes, "log_file", next.file, "string"), take(changes, "log_info", next.info, "boolean"),
        take(changes, "log_warning", next.warning, "boolean"), take(changes, "log_error", next.error, "boolean"),
        take(changes, "log_verbose_level", next.verbose, "non-negative integer"),
        take(changes, "log_format", next.format, "string")})
    if (!ok) return fail(ok.error());
  if (next.format != "default" && next.format != "ISO8601")
    return fail("log_format '" + next.format + "' is neither 'default' nor 'ISO8601'");
  if ((next.info && !next.warning) || ((next.info || next.warning) && !next.error))
    return fail(
        "sloserve logs at or above one level: errors stay on while warnings are, and warnings while info is "
        "(turn the lower levels off first)");
  if (next.verbose > 0 && !next.info) return fail("log_verbose_level above 0 needs log_info");
  if (next.file != s.file) {
    std::vector<spdlog::sink_ptr> sinks = s.first_sinks;
    if (!next.file.empty()) {
      std::error_code ec;
      auto folder = std::filesystem::path(next.file).parent_path();
      if (!folder.empty()) std::filesystem::create_directories(folder, ec);
      try {
        sinks = {std::make_shared<spdlog::sinks::basic_file_sink_mt>(next.file)};
      } catch (const spdlog::spdlog_ex& e) {
        return fail("log_file '" + next.file + "': " + e.what());
      }
    }
    auto old = spdlog::default_logger();
    auto logger = std::make_shared<spdlog::logger>(old->name(), sinks.begin(), sinks.end());
    // A file is written through at each line, so that it can be followed as the node serves.
    logger->flush_on(next.file.empty() ? old->flush_level() : spdlog::level::trace);
    s.replaced.push_back(old);
    spdlog::set_default_logger(logger);
  }
  next.replaced = std::move(s.replaced);
  s = std::move(next);
  if (s.format == "ISO8601")
    spdlog::set_pattern(iso8601_pattern, spdlog::pattern_time_type::utc);
  else
    spdlog::set_pattern(default_pattern);
  spdlog::set_level(level_of(s));
  return of(s);
}

std::string to_json(const settings& s) {
  nlohmann::json out = nlohmann::json::object();
  for (auto& [name, v] : s) std::visit([&, n = name](auto& x) { out[n] = x; }, v);
  return out.dump();
}

expected<settings> from_json(const std::string& text) {
  auto body = nlohmann::json::parse(text, nullptr, false);
  if (body.is_discarded() || !body.is_object()) return fail("the log settings must be a JSON object");
  settings out;
  for (auto& [name, v] : body.items()) {
    if (v.is_boolean())
      out[name] = v.get<bool>();
    else if (v.is_number_unsigned() && v.get<uint64_t>() <= UINT32_MAX)
      out[name] = static_cast<uint32_t>(v.get<uint64_t>());
    else if (v.is_string())
      out[name] = v.get<std::string>();
    else
      return fail("log setting '" + name + "' must be a boolean, a non-negative integer or a string");
  }
  return out;
}

}  // namespace sloserve::logs
