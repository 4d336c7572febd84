// Server timing: what a reply says of where its time went, as KServe parameters and back.
#include <algorithm>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <utility>

#include "messages/json_scan.hpp"
#include "messages/kserve_v2.hpp"

namespace sloserve::kserve {

using json = nlohmann::json;

server_timing timing_of(const msg::client_reply& r) {
  auto& stages = r.timings;
  auto total_ms = r.total_ms;
  double queue = 0, compute = 0;
  std::vector<std::pair<std::string, std::pair<double, double>>> by_stage;
  for (auto& t : stages) {
    queue += t.queue_ms, compute += t.exec_ms;
    if (t.stage.empty()) continue;
    auto it = std::find_if(by_stage.begin(), by_stage.end(), [&](auto& x) { return x.first == t.stage; });
    if (it == by_stage.end()) it = by_stage.insert(by_stage.end(), {t.stage, {0.0, 0.0}});
    it->second.first += t.queue_ms;
    it->second.second += t.exec_ms;
  }
  auto us = [](double ms) { return static_cast<int64_t>(std::llround(std::max(0.0, ms) * 1e3)); };
  server_timing out{us(total_ms), us(queue), us(compute), {}};
  for (auto& [name, t] : by_stage) out.stages.push_back({name, us(t.first), us(t.second)});
  out.late_paths = r.late_paths;
  return out;
}

std::string join_late_paths(const std::vector<std::string>& leaves) {
  std::string out;
  for (auto& l : leaves) out += (out.empty() ? "" : ",") + l;
  return out;
}

std::vector<std::string> split_late_paths(std::string_view text) {
  std::vector<std::string> out;
  while (!text.empty()) {
    auto comma = text.find(',');
    if (auto part = text.substr(0, comma); !part.empty()) out.emplace_back(part);
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  return out;
}

std::vector<std::pair<std::string, int64_t>> timing_parameters(const server_timing& t) {
  std::vector<std::pair<std::string, int64_t>> out{
      {timing_keys[0], t.total_us}, {timing_keys[1], t.queue_us}, {timing_keys[2], t.compute_us}};
  for (auto& s : t.stages) {
    out.push_back({"sloserve_stage_" + s.name + "_queue_us", s.queue_us});
    out.push_back({"sloserve_stage_" + s.name + "_compute_us", s.compute_us});
  }
  return out;
}

void apply_timing(const server_timing& t, msg::client_reply& r) {
  r.total_ms = static_cast<double>(t.total_us) / 1e3;
  msg::stage_timing st;
  st.queue_ms = static_cast<double>(t.queue_us) / 1e3;
  st.exec_ms = static_cast<double>(t.compute_us) / 1e3;
  r.timings = {st};
  r.late_paths = t.late_paths;
}

namespace {

// Picks the timing keys out of the top-level "parameters" object as the header is read, without
// building the document (the load client reads every response's).
struct timing_reader : nlohmann::json_sax<json> {
  int depth = 0;
  bool in_parameters = false;  // inside the top-level "parameters" object
  std::string last_key;        // the last key read
  std::optional<int64_t> v[3];
  std::string late;
  bool top_level_object = false;

  bool take(int64_t x) {
    if (in_parameters && depth == 2)
      for (size_t k = 0; k < 3; ++k)
        if (last_key == timing_keys[k]) v[k] = x;
    return true;
  }
  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t x) override { return take(x); }
  bool number_unsigned(number_unsigned_t x) override {
    return x <= static_cast<number_unsigned_t>(std::numeric_limits<int64_t>::max()) ? take(static_cast<int64_t>(x))
                                                                                    : true;
  }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t& s) override {
    if (in_parameters && depth == 2 && last_key == late_paths_key) late = s;
    return true;
  }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override {
    if (depth == 0) top_level_object = true;
    if (depth == 1 && last_key == "parameters") in_parameters = true;
    ++depth;
    return true;
  }
  bool end_object() override {
    if (--depth == 1) in_parameters = false;
    return true;
  }
  bool start_array(std::size_t) override {
    ++depth;
    return true;
  }
  bool end_array() override {
    --depth;
    return true;
  }
  bool key(string_t& k) override {
    last_key = k;
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override { return false; }
};

}  // namespace

// The timing read in one pass over the form sloserve's replies take; nothing when the header is
// in another form (escapes, negative numbers, ...), for the full reader to decide.
std::optional<server_timing> response_timing_fast(std::string_view header) {
  json_scan::scanner s(header);
  std::optional<uint64_t> v[3];
  std::string_view late;
  bool in_parameters = false;
  if (!s.take('{')) return std::nullopt;
  bool ok = true;
  if (!s.take('}')) do {
      std::string_view k;
      if (!s.key(k)) return std::nullopt;
      if (k != "parameters") {
        if (!s.skip_value()) return std::nullopt;
        continue;
      }
      if (std::exchange(in_parameters, true)) return std::nullopt;
      if (!s.take('{')) return std::nullopt;
      bool inner = true;
      if (!s.take('}')) do {
          std::string_view p;
          if (!s.key(p)) return std::nullopt;
          size_t which = 3;
          for (size_t i = 0; i < 3; ++i)
            if (p == timing_keys[i]) which = i;
          if (which < 3) {
            uint64_t x;
            if (v[which] || !s.uint(x) || x > static_cast<uint64_t>(INT64_MAX)) return std::nullopt;
            v[which] = x;
          } else if (p == late_paths_key) {
            if (!s.string(late)) return std::nullopt;
          } else if (!s.skip_value()) {
            return std::nullopt;
          }
        } while (s.more('}', inner));
      if (!inner) return std::nullopt;
    } while (s.more('}', ok));
  if (!ok || !s.at_end() || !v[0] || !v[1] || !v[2]) return std::nullopt;
  return server_timing{static_cast<int64_t>(*v[0]),
                       static_cast<int64_t>(*v[1]),
                       static_cast<int64_t>(*v[2]),
                       {},
                       split_late_paths(late)};
}

std::optional<server_timing> response_timing(std::string_view body, std::optional<size_t> header_length) {
  auto header = body.substr(0, std::min(body.size(), header_length.value_or(body.size())));
  if (auto fast = response_timing_fast(header)) return fast;
  timing_reader r;
  if (!json::sax_parse(header, &r) || !r.top_level_object) return std::nullopt;
  for (auto& x : r.v)
    if (!x) return std::nullopt;
  return server_timing{*r.v[0], *r.v[1], *r.v[2], {}, split_late_paths(r.late)};
}

}  // namespace sloserve::kserve
