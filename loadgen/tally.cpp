#include "loadgen/tally.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "config/knob_option.hpp"

namespace sloserve {
namespace {

// Where an OK reply's latency went: in the client and on the wire (latency less the frontend's
// total), in the frontend and between nodes (its total less the stages' own times), queued at
// the devices, and executing. The stage times add up along a chain; branches of a DAG overlap.
const std::array<const char*, 4> part_names{"client", "frontend", "queue", "exec"};

}  // namespace

double percentile(std::vector<float>& v, double p) {
  if (v.empty()) return 0;
  auto k = static_cast<size_t>(std::min<double>(v.size() - 1, std::ceil(p * v.size()) - 1));
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
  return v[k];
}

lane_tally::lane_tally(size_t seconds) : buckets_(seconds + 1) {}

void lane_tally::sent(size_t second) {
  ++s_.sent;
  ++buckets_[std::min(second, buckets_.size() - 1)].sent;
}

double lane_tally::p99_ms() const {
  auto copy = latencies_;
  return percentile(copy, 0.99);
}

// Reasons carry figures ("12.5 ms left"); count them by their words, with numbers as N.
void lane_tally::count_reason(const std::string& reason) {
  std::string key;
  for (size_t i = 0; i < reason.size(); ++i) {
    bool digit = reason[i] >= '0' && reason[i] <= '9';
    bool in_number = digit || ((reason[i] == '.' || reason[i] == '-') && i + 1 < reason.size() &&
                               reason[i + 1] >= '0' && reason[i + 1] <= '9');
    if (!in_number)
      key += reason[i];
    else if (key.empty() || key.back() != 'N')
      key += 'N';
  }
  if (s_.reasons.size() < 20 || s_.reasons.contains(key)) s_.reasons[key] = s_.reasons.value(key, 0) + 1;
}

void lane_tally::reply(const msg::client_reply& r, size_t second, double lat, double network_ms, double slo_ms) {
  auto& b = buckets_[std::min(second, buckets_.size() - 1)];
  switch (r.code) {
    case msg::status::ok: {
      ++s_.ok;
      ++b.ok;
      b.latencies.push_back(static_cast<float>(lat));
      latencies_.push_back(static_cast<float>(lat));
      double queue = 0, exec = 0;
      for (auto& t : r.timings) queue += t.queue_ms, exec += t.exec_ms;
      double part[4] = {lat - r.total_ms, r.total_ms - queue - exec, queue, exec};
      for (size_t k = 0; k < 4; ++k) parts_[k].push_back(static_cast<float>(std::max(0.0, part[k])));
      // The user waits for the upload too.
      if (lat + network_ms <= slo_ms && r.late_paths.empty()) ++s_.ok_within_slo, ++b.ok_within_slo;
      for (auto& leaf : r.late_paths) s_.late_paths[leaf] = s_.late_paths.value(leaf, 0) + 1;
      for (auto& t : r.timings) {
        if (!t.node.empty()) s_.nodes[t.node] = s_.nodes.value(t.node, 0) + 1;
        if (!t.model.empty()) s_.models[t.model] = s_.models.value(t.model, 0) + 1;
        if (!t.model.empty()) {
          auto version = std::to_string(std::max<uint32_t>(1, t.version));
          auto suffix = ":v" + version;
          auto family = t.model.ends_with(suffix) ? t.model.substr(0, t.model.size() - suffix.size()) : t.model;
          auto& per = s_.versions[family];
          if (!per.is_object()) per = nlohmann::json::object();
          per[version] = per.value(version, 0) + 1;
        }
        // Its share of its batch (KServe replies say no batch: their device time is unknown).
        if (t.batch > 0) s_.device_busy_s += t.exec_ms / t.batch / 1e3;
      }
      break;
    }
    case msg::status::dropped:
      ++s_.dropped, ++b.dropped;
      count_reason(r.reason);
      break;
    case msg::status::overloaded:
      ++s_.overloaded, ++b.errors;
      count_reason(r.reason);
      break;
    case msg::status::error:
      ++s_.errors, ++b.errors;
      count_reason(r.reason);
      break;
  }
}

load_summary merge_lanes(std::vector<lane_tally>& lanes, double measured_s) {
  load_summary s;
  s.lanes = lanes.size();
  std::vector<lane_tally::bucket> buckets;
  std::vector<float> all_latencies;
  std::array<std::vector<float>, 4> parts;
  for (auto& r : lanes) {
    using counter = uint64_t load_summary::*;
    for (counter f : {&load_summary::sent, &load_summary::ok, &load_summary::ok_within_slo, &load_summary::dropped,
                      &load_summary::overloaded, &load_summary::errors, &load_summary::lost, &load_summary::late,
                      &load_summary::delayed, &load_summary::skipped})
      s.*f += r.s_.*f;
    for (auto& [k, v] : r.s_.reasons.items()) s.reasons[k] = s.reasons.value(k, 0) + v.get<long>();
    for (auto& [k, v] : r.s_.nodes.items()) s.nodes[k] = s.nodes.value(k, 0) + v.get<long>();
    for (auto& [k, v] : r.s_.models.items()) s.models[k] = s.models.value(k, 0) + v.get<long>();
    for (auto& [k, per] : r.s_.versions.items()) {
      auto& into = s.versions[k];
      if (!into.is_object()) into = nlohmann::json::object();
      for (auto& [v, n] : per.items()) into[v] = into.value(v, 0) + n.get<long>();
    }
    for (auto& [k, v] : r.s_.late_paths.items()) s.late_paths[k] = s.late_paths.value(k, 0) + v.get<long>();
    s.device_busy_s += r.s_.device_busy_s;
    all_latencies.insert(all_latencies.end(), r.latencies_.begin(), r.latencies_.end());
    for (size_t k = 0; k < r.parts_.size(); ++k)
      parts[k].insert(parts[k].end(), r.parts_[k].begin(), r.parts_[k].end());
    if (buckets.size() < r.buckets_.size()) buckets.resize(r.buckets_.size());
    for (size_t i = 0; i < r.buckets_.size(); ++i) {
      auto& a = buckets[i];
      auto& b = r.buckets_[i];
      a.sent += b.sent, a.ok += b.ok, a.ok_within_slo += b.ok_within_slo, a.dropped += b.dropped, a.errors += b.errors;
      a.latencies.insert(a.latencies.end(), b.latencies.begin(), b.latencies.end());
    }
  }
  s.measured_s = measured_s;
  s.attainment =
      s.sent + s.skipped ? static_cast<double>(s.ok_within_slo) / static_cast<double>(s.sent + s.skipped) : 0;
  s.goodput_rps = s.measured_s > 0 ? s.ok_within_slo / s.measured_s : 0;
  s.generator_late_fraction = s.sent ? static_cast<double>(s.delayed) / s.sent : 0;
  if (!all_latencies.empty()) {
    double sum = 0;
    for (auto x : all_latencies) sum += x;
    s.mean = sum / all_latencies.size();
    s.max = *std::max_element(all_latencies.begin(), all_latencies.end());
    s.p50 = percentile(all_latencies, 0.50);
    s.p90 = percentile(all_latencies, 0.90);
    s.p99 = percentile(all_latencies, 0.99);
    std::sort(all_latencies.begin(), all_latencies.end());
    for (int q = 0; q <= 200; ++q) {
      double f = q / 200.0;
      auto i = std::min(all_latencies.size() - 1, static_cast<size_t>(f * static_cast<double>(all_latencies.size())));
      s.cdf.emplace_back(all_latencies[i], f);
    }
  }
  for (size_t k = 0; k < parts.size(); ++k)
    s.breakdown[part_names[k]] = {{"p50", percentile(parts[k], 0.50)}, {"p99", percentile(parts[k], 0.99)}};
  for (size_t i = 0; i + 1 < buckets.size() || (i < buckets.size() && buckets[i].sent); ++i) {
    auto& b = buckets[i];
    s.series.push_back({{"t", i},
                        {"sent", b.sent},
                        {"ok", b.ok},
                        {"ok_within_slo", b.ok_within_slo},
                        {"dropped", b.dropped},
                        {"errors", b.errors},
                        {"p99_ms", percentile(b.latencies, 0.99)}});
  }
  return s;
}

nlohmann::json load_summary::to_json(const load_options& o) const {
  return {{"pipeline", o.pipeline},
          {"address", o.address},
          {"arrival", knob_name(o.arrival)},
          {"rate", o.rate},
          {"duration_s", measured_s},
          {"started_at_unix_s", started_at_unix_s},
          {"slo_ms", o.slo_ms},
          {"sent", sent},
          {"ok", ok},
          {"ok_within_slo", ok_within_slo},
          {"dropped", dropped},
          {"overloaded", overloaded},
          {"errors", errors},
          {"lost", lost},
          {"skipped", skipped},
          {"late", late},
          {"dummies", dummies},
          {"delayed", delayed},
          {"generator_late_fraction", generator_late_fraction},
          {"threads", lanes},
          {"warnings", warnings()},
          {"attainment", attainment},
          {"goodput_rps", goodput_rps},
          {"latency_ms", {{"p50", p50}, {"p90", p90}, {"p99", p99}, {"max", max}, {"mean", mean}}},
          {"latency_breakdown_ms", breakdown},
          {"reasons", reasons},
          {"nodes", nodes},
          {"models", models},
          {"versions", versions},
          {"late_paths", late_paths},
          {"clients", clients},
          {"device_busy_s", device_busy_s},
          {"accuracy", accuracy},
          {"series", series}};
}

namespace {
std::string fmt_part(const char* name, double p50, double p99) {
  char buf[96];
  snprintf(buf, sizeof buf, "  %s %.2f/%.2f", name, p50, p99);
  return buf;
}
}  // namespace

std::string load_summary::to_text() const {
  char buf[512];
  snprintf(buf, sizeof buf,
           "sent %lu  ok %lu (within SLO %lu)  dropped %lu  overloaded %lu  errors %lu  lost %lu\n"
           "attainment %.2f%%  goodput %.1f req/s  latency ms p50 %.1f  p90 %.1f  p99 %.1f  max %.1f\n",
           (unsigned long)sent, (unsigned long)ok, (unsigned long)ok_within_slo, (unsigned long)dropped,
           (unsigned long)overloaded, (unsigned long)errors, (unsigned long)lost, 100 * attainment, goodput_rps, p50,
           p90, p99, max);
  std::string out = buf;
  if (skipped)
    out += "frames the clients skipped, as they could not have been answered within their SLO (counted missed): " +
           std::to_string(skipped) + "\n";
  if (dummies)
    out += "dummy requests the frontend sent meanwhile (not counted above): " + std::to_string(dummies) + "\n";
  if (ok) {
    out += "where the time went, ms p50/p99:";
    for (auto name : part_names)
      if (breakdown.contains(name))
        out += fmt_part(name, breakdown[name]["p50"].get<double>(), breakdown[name]["p99"].get<double>());
    out += "\n";
  }
  for (auto& [reason, n] : reasons.items()) out += "  " + std::to_string(n.get<long>()) + "x " + reason + "\n";
  for (auto& [leaf, n] : late_paths.items())
    out += "  " + std::to_string(n.get<long>()) + "x OK but late on the path to '" + leaf + "' (its own SLO)\n";
  for (auto& [id, c] : clients.items()) {
    snprintf(buf, sizeof buf,
             "  %s: SLO %.0f ms, %.0f fps: sent %lu, skipped %lu, missed %.2f%%, accuracy %.2f%%, sizes %s\n",
             id.c_str(), c["slo_ms"].get<double>(), c["fps"].get<double>(), (unsigned long)c["sent"].get<uint64_t>(),
             (unsigned long)c.value("skipped", uint64_t{0}), 100 * c["miss_rate"].get<double>(),
             c["accuracy"].get<double>(), c["sizes"].dump().c_str());
    out += buf;
  }
  if (!clients.empty()) {
    snprintf(buf, sizeof buf, "accuracy of the answers within their SLO: %.2f%%\n", accuracy);
    out += buf;
  }
  for (auto& w : warnings()) out += "warning: " + w + "\n";
  return out;
}

std::vector<std::string> load_summary::warnings() const {
  std::vector<std::string> out;
  if (generator_late_fraction > 0.01) {
    char buf[256];
    snprintf(buf, sizeof buf,
             "the load client sent %.1f%% of the requests more than %lld ms after their arrival time (%zu threads): "
             "these figures measure the client, not the server; raise --threads or lower the rate",
             100 * generator_late_fraction, static_cast<long long>(late_after.count()), lanes);
    out.push_back(buf);
  }
  return out;
}

double load_summary::attainment_in(size_t from_s, size_t to_s) const {
  return attainment_in(series, from_s, to_s);
}

double load_summary::attainment_in(const nlohmann::json& series, size_t from_s, size_t to_s) {
  double sent = 0, within = 0;
  for (auto& x : series) {
    auto t = x.value("t", size_t{0});
    if (t < from_s || t >= to_s) continue;
    sent += x.value("sent", 0.0);
    within += x.value("ok_within_slo", 0.0);
  }
  return sent > 0 ? within / sent : 1;
}

}  // namespace sloserve
