#include "ingress/trace_settings.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

namespace sloserve::tracing {
namespace {

const std::string names[] = {"trace_level", "trace_rate", "trace_count", "log_frequency", "trace_file", "trace_mode"};

expected<std::string> one(const std::string& name, const std::vector<std::string>& v) {
  if (v.size() != 1) return fail("trace setting '" + name + "' takes one value");
  return v.front();
}

expected<int64_t> integer(const std::string& name, const std::vector<std::string>& v, int64_t least) {
  auto text = one(name, v);
  if (!text) return fail(text.error());
  size_t used = 0;
  int64_t n = 0;
  try {
    n = std::stoll(*text, &used);
  } catch (...) {
    used = 0;
  }
  if (used == 0 || used != text->size() || n < least)
    return fail("trace setting '" + name + "' must be an integer of at least " + std::to_string(least) + ", not '" +
                *text + "'");
  return n;
}

}  // namespace

bool tracer::unset(const setting& s) {
  return !s.level && !s.file && !s.rate && !s.log_frequency && !s.count;
}

tracer::tracer() {
  global_.s.level = "OFF";
  global_.s.rate = 1000;
  global_.s.count = -1;
  global_.s.log_frequency = 0;
  global_.s.file = "";
}

tracer::~tracer() {
  for (auto& [path, f] : files_) std::fclose(f);
}

tracer::setting tracer::effective(const std::string& pipeline) const {
  auto out = global_.s;
  auto it = own_.find(pipeline);
  if (pipeline.empty() || it == own_.end()) return out;
  auto& o = it->second.s;
  if (o.level) out.level = o.level;
  if (o.file) out.file = o.file;
  if (o.rate) out.rate = o.rate;
  if (o.log_frequency) out.log_frequency = o.log_frequency;
  if (o.count) out.count = o.count;
  return out;
}

const tracer::scope& tracer::holding(const std::string& pipeline) const {
  auto it = own_.find(pipeline);
  return pipeline.empty() || it == own_.end() ? global_ : it->second;
}

tracer::scope& tracer::counting(const std::string& pipeline) {
  return const_cast<scope&>(holding(pipeline));
}

values tracer::to_values(const setting& s) {
  return {{"trace_level", {*s.level}},
          {"trace_rate", {std::to_string(*s.rate)}},
          {"trace_count", {std::to_string(*s.count)}},
          {"log_frequency", {std::to_string(*s.log_frequency)}},
          {"trace_file", {*s.file}},
          {"trace_mode", {"triton"}}};
}

values tracer::settings(const std::string& pipeline) const {
  std::lock_guard lock(mu_);
  auto s = effective(pipeline);
  // The count left: what trace_count allowed less what was taken under it.
  if (*s.count >= 0) s.count = std::max<int64_t>(0, *s.count - static_cast<int64_t>(holding(pipeline).traced));
  return to_values(s);
}

std::FILE* tracer::file(const std::string& path) {
  if (auto it = files_.find(path); it != files_.end()) return it->second;
  std::error_code ec;
  auto folder = std::filesystem::path(path).parent_path();
  if (!folder.empty()) std::filesystem::create_directories(folder, ec);
  std::FILE* f = std::fopen(path.c_str(), "a");
  if (f) files_[path] = f;
  return f;
}

expected<values> tracer::update(const std::string& pipeline, const changes& c) {
  std::lock_guard lock(mu_);
  auto& target = pipeline.empty() ? global_ : own_[pipeline];
  auto next = target.s;
  for (auto& [name, v] : c) {
    if (std::find(std::begin(names), std::end(names), name) == std::end(names))
      return fail("unknown trace setting '" + name +
                  "' (trace_level, trace_rate, trace_count, log_frequency, trace_file, trace_mode)");
    if (!v) {
      if (pipeline.empty()) return fail("trace setting '" + name + "': only a pipeline's own settings are cleared");
      if (name == "trace_level") next.level.reset();
      if (name == "trace_rate") next.rate.reset();
      if (name == "trace_count") next.count.reset();
      if (name == "log_frequency") next.log_frequency.reset();
      if (name == "trace_file") next.file.reset();
      continue;
    }
    if (name == "trace_level") {
      bool off = false, timestamps = false;
      for (auto& x : *v) {
        if (x == "OFF")
          off = true;
        else if (x == "TIMESTAMPS")
          timestamps = true;
        else if (x == "TENSORS")
          return fail("trace_level TENSORS is not served: sloserve traces timestamps, not tensors");
        else
          return fail("trace_level '" + x + "' is none of OFF, TIMESTAMPS");
      }
      if (v->empty()) return fail("trace setting 'trace_level' needs a value");
      next.level = off || !timestamps ? "OFF" : "TIMESTAMPS";
    } else if (name == "trace_rate") {
      auto n = integer(name, *v, 1);
      if (!n) return fail(n.error());
      next.rate = static_cast<uint64_t>(*n);
    } else if (name == "trace_count") {
      auto n = integer(name, *v, -1);
      if (!n) return fail(n.error());
      next.count = *n;
    } else if (name == "log_frequency") {
      auto n = integer(name, *v, 0);
      if (!n) return fail(n.error());
      next.log_frequency = static_cast<uint64_t>(*n);
    } else if (name == "trace_file") {
      auto path = one(name, *v);
      if (!path) return fail(path.error());
      next.file = *path;
    } else {  // trace_mode
      auto mode = one(name, *v);
      if (!mode) return fail(mode.error());
      if (*mode != "triton") return fail("trace_mode '" + *mode + "' is not served (triton is)");
    }
  }
  auto before = target.s;
  target.s = next;
  auto now = effective(pipeline);
  auto undo = [&](std::string why) {
    target.s = before;
    if (!pipeline.empty() && unset(before)) own_.erase(pipeline);
    return fail(std::move(why));
  };
  if (*now.level == "TIMESTAMPS" && now.file->empty()) return undo("trace_level TIMESTAMPS needs a trace_file");
  if (!now.file->empty() && !file(*now.file)) return undo("trace_file '" + *now.file + "': " + std::strerror(errno));
  target.seen = target.traced = 0;
  if (!pipeline.empty() && unset(next)) own_.erase(pipeline);  // every setting of its own cleared
  return to_values(now);
}

bool tracer::sample(const std::string& pipeline) {
  std::lock_guard lock(mu_);
  auto s = effective(pipeline);
  if (*s.level != "TIMESTAMPS" || s.file->empty()) return false;
  auto& sc = counting(pipeline);
  if (*s.count >= 0 && sc.traced >= static_cast<uint64_t>(*s.count)) return false;
  if (sc.seen++ % *s.rate != 0) return false;
  ++sc.traced;
  return true;
}

void tracer::write(const std::string& pipeline, const std::string& line) {
  std::lock_guard lock(mu_);
  auto s = effective(pipeline);
  if (s.file->empty()) return;
  auto* f = file(*s.file);
  if (!f) return;
  std::fwrite(line.data(), 1, line.size(), f);
  std::fputc('\n', f);
  auto& sc = counting(pipeline);
  if (++sc.unflushed >= std::max<uint64_t>(1, *s.log_frequency)) {
    std::fflush(f);
    sc.unflushed = 0;
  }
}

std::string to_json(const values& v) {
  nlohmann::json out = nlohmann::json::object();
  for (auto& [name, list] : v)
    if (name == "trace_level")
      out[name] = list;
    else
      out[name] = list.empty() ? std::string() : list.front();
  return out.dump();
}

expected<changes> changes_from_json(const std::string& text) {
  auto body = nlohmann::json::parse(text, nullptr, false);
  if (body.is_discarded() || !body.is_object()) return fail("the trace settings must be a JSON object");
  changes out;
  for (auto& [name, v] : body.items()) {
    if (v.is_null()) {
      out[name] = std::nullopt;
    } else if (v.is_string()) {
      out[name] = std::vector<std::string>{v.get<std::string>()};
    } else if (v.is_array() && std::all_of(v.begin(), v.end(), [](auto& x) { return x.is_string(); })) {
      out[name] = v.get<std::vector<std::string>>();
    } else {
      return fail("trace setting '" + name + "' must be a string, a list of strings or null");
    }
  }
  return out;
}

}  // namespace sloserve::tracing
