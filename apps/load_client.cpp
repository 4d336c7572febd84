#include "apps/load_client.hpp"

#include <unistd.h>
#include <zmq.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <deque>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>
#include <unordered_map>

#include "messages/codec.hpp"

namespace sloserve {
namespace {

using steady = std::chrono::steady_clock;

double ms(steady::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

double percentile(std::vector<float>& v, double p) {
  if (v.empty()) return 0;
  auto k = static_cast<size_t>(std::min<double>(v.size() - 1, std::ceil(p * v.size()) - 1));
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
  return v[k];
}

struct bucket {
  uint64_t sent = 0, ok = 0, ok_within_slo = 0, dropped = 0, errors = 0;
  std::vector<float> latencies;
};

struct sent_info {
  steady::time_point at;
  bool measured;
  size_t second;
  double slo_ms;
  double network_ms;  // attached to the request: the client's share of the SLO
};

// Inter-arrival gaps of the configured process at `rate`.
class arrivals {
 public:
  arrivals(const load_options& o) : o_(o), rng_(o.seed) {}
  double gap_s(double rate) {
    if (rate <= 0) return 0.1;
    if (o_.arrival == "constant") return 1 / rate;
    if (o_.arrival == "gamma") {
      double k = 1 / std::max(o_.cv * o_.cv, 1e-6);
      return std::gamma_distribution<double>(k, 1 / (rate * k))(rng_);
    }
    return std::exponential_distribution<double>(rate)(rng_);
  }

 private:
  const load_options& o_;
  std::mt19937_64 rng_;
};

class client {
 public:
  explicit client(const load_options& o) : o_(o) {
    ctx_ = zmq_ctx_new();
    sock_ = zmq_socket(ctx_, ZMQ_DEALER);
    int v = 0;
    zmq_setsockopt(sock_, ZMQ_LINGER, &v, sizeof v);
    v = 1000000;
    zmq_setsockopt(sock_, ZMQ_SNDHWM, &v, sizeof v);
    zmq_setsockopt(sock_, ZMQ_RCVHWM, &v, sizeof v);
  }
  ~client() {
    if (monitor_) zmq_close(monitor_);
    zmq_close(sock_);
    zmq_ctx_term(ctx_);
  }
  bool connect(std::string& error) {
    if (!set_curve_client(sock_, o_.key, o_.server_key, error)) return false;
    // Handshake failures (a refused key, a plain client at a CURVE node) come only as monitor
    // events; without them a refused client would just see silence.
    monitor_ = watch_handshake_failures(ctx_, sock_, "inproc://load.monitor");
    if (zmq_connect(sock_, o_.address.c_str()) != 0) {
      error = "cannot connect to " + o_.address + ": " + zmq_strerror(zmq_errno());
      return false;
    }
    return true;
  }
  void send(const std::string& frame) {
    zmq_send(sock_, frame.data(), frame.size(), 0);
  }
  // Why the server refused the handshake, or empty.
  std::string refused() {
    std::string why;
    uint16_t event;
    uint32_t value;
    while (next_handshake_failure(monitor_, event, value))
      why = event == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH
                ? "the node refused this client's public key (is it listed under security.clients?)"
                : o_.key.public_key.empty()
                      ? "the handshake failed; the node requires CurveZMQ (pass --key)"
                      : "the CurveZMQ handshake failed (wrong server key, or the node does not use CURVE)";
    return why;
  }
  // Waits up to `timeout_ms` for one frame.
  bool recv(std::string& out, int timeout_ms) {
    zmq_pollitem_t it{sock_, 0, ZMQ_POLLIN, 0};
    if (zmq_poll(&it, 1, timeout_ms) <= 0) return false;
    zmq_msg_t m;
    zmq_msg_init(&m);
    if (zmq_msg_recv(&m, sock_, ZMQ_DONTWAIT) < 0) {
      zmq_msg_close(&m);
      return false;
    }
    out.assign(static_cast<const char*>(zmq_msg_data(&m)), zmq_msg_size(&m));
    zmq_msg_close(&m);
    return true;
  }

 private:
  const load_options& o_;
  void* ctx_;
  void* sock_;
  void* monitor_ = nullptr;
};

bool wait_ready(client& c, const load_options& o, std::string& error) {
  auto until = steady::now() + std::chrono::milliseconds(static_cast<int64_t>(o.wait_ready_s * 1000));
  std::string detail = "no answer", frame;
  msg::decode_limits limits;
  for (uint64_t token = 1; steady::now() < until; ++token) {
    c.send(msg::encode({{}, msg::status_request{token}}));
    auto wait_until = steady::now() + std::chrono::milliseconds(200);
    while (steady::now() < wait_until) {
      if (auto why = c.refused(); !why.empty()) {
        error = "frontend at " + o.address + ": " + why;
        return false;
      }
      if (!c.recv(frame, 50)) continue;
      auto d = msg::decode(frame, limits);
      if (!d.value) continue;
      if (auto* r = std::get_if<msg::status_reply>(&d.value->content); r && r->token == token) {
        if (r->ready) return true;
        detail = r->detail;
        break;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  error = "frontend at " + o.address + " not ready after " + std::to_string(o.wait_ready_s) + " s: " + detail;
  return false;
}

}  // namespace

std::vector<double> bursty_trace(double base, double factor, int burst_s, int period_s, int duration_s, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<double> out;
  for (int t = 0; t < duration_s; ++t) {
    double mean = base * (period_s > 0 && t % period_s < burst_s ? factor : 1);
    out.push_back(mean > 0 ? static_cast<double>(std::poisson_distribution<long>(mean)(rng)) : 0);
  }
  return out;
}

std::vector<double> stepped_trace(const std::vector<double>& levels, int step_s, int duration_s) {
  std::vector<double> out;
  for (int t = 0; t < duration_s && !levels.empty() && step_s > 0; ++t)
    out.push_back(levels[static_cast<size_t>(t / step_s) % levels.size()]);
  return out;
}

bool read_rate_trace(const std::string& path, std::vector<double>& out, std::string& error) {
  std::ifstream in(path);
  if (!in) {
    error = path + ": cannot open the trace";
    return false;
  }
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (auto h = line.find('#'); h != std::string::npos) line.resize(h);
    std::istringstream ss(line);
    double r;
    if (!(ss >> r)) {
      if (line.find_first_not_of(" \t\r") != std::string::npos) {
        error = path + ":" + std::to_string(n) + ": expected a rate (requests/s)";
        return false;
      }
      continue;
    }
    if (r < 0) {
      error = path + ":" + std::to_string(n) + ": a rate cannot be negative";
      return false;
    }
    out.push_back(r);
  }
  if (out.empty()) {
    error = path + ": the trace has no rates";
    return false;
  }
  return true;
}

bool run_load(const load_options& o, load_summary& s, std::string& error) {
  client c(o);
  if (!c.connect(error) || !wait_ready(c, o, error)) return false;
  msg::decode_limits limits;
  limits.max_payload_bytes = 1ULL << 32;
  // Pipelines to draw from: the mix, or the one pipeline.
  auto mix = o.mix;
  if (mix.empty()) mix.push_back({o.pipeline, 1, o.slo_ms, o.input});
  std::vector<tensor> payloads;
  std::vector<double> weights;
  double max_slo = 0;
  for (auto& m : mix) {
    payloads.push_back(make_tensor(m.input, o.seed, "input"));
    weights.push_back(m.weight);
    max_slo = std::max(max_slo, m.slo_ms);
  }
  std::discrete_distribution<size_t> pick(weights.begin(), weights.end());
  std::mt19937_64 pick_rng(o.seed ^ 0x5bd1e995);
  arrivals gen(o);

  double total_s = o.warmup_s + (o.trace.empty() ? o.duration_s : std::min<double>(o.duration_s, o.trace.size()));
  auto start = steady::now();
  auto measure_from = start + std::chrono::microseconds(static_cast<int64_t>(o.warmup_s * 1e6));
  auto stop_sending = start + std::chrono::microseconds(static_cast<int64_t>(total_s * 1e6));
  auto slo = std::chrono::microseconds(static_cast<int64_t>(max_slo * 1000));
  auto grace = std::chrono::microseconds(static_cast<int64_t>(o.grace_ms * 1000));

  std::unordered_map<uint64_t, sent_info> pending;
  std::deque<std::pair<steady::time_point, uint64_t>> expiry;  // send order = deadline order
  std::vector<bucket> buckets(static_cast<size_t>(std::ceil(total_s)) + 1);
  std::vector<float> all_latencies;
  uint64_t next_id = 1;
  // The second of the measured window `t` falls in (0 during warm-up).
  auto second_of = [&](steady::time_point t) {
    return t < measure_from ? size_t{0}
                            : static_cast<size_t>(std::chrono::duration<double>(t - measure_from).count());
  };
  auto rate_at = [&](steady::time_point t) {
    if (o.trace.empty()) return o.rate;
    return o.trace[std::min(second_of(t), o.trace.size() - 1)];
  };
  // Upload time of the request's payload over that second's bandwidth, or the fixed time.
  auto network_at = [&](steady::time_point t) {
    if (o.bandwidth_mbps.empty()) return o.network_ms;
    double mbps = o.bandwidth_mbps[std::min(second_of(t), o.bandwidth_mbps.size() - 1)];
    return mbps > 0 ? o.payload_kb * 8 / mbps : 1e9;
  };

  auto send_one = [&](steady::time_point now) {
    auto which = mix.size() == 1 ? 0 : pick(pick_rng);
    msg::client_request r;
    r.pipeline = mix[which].pipeline;
    r.request_id = next_id++;
    r.inputs.push_back(payloads[which]);
    r.network_ms = network_at(now);
    bool measured = now >= measure_from;
    auto sec = std::min(second_of(now), buckets.size() - 1);
    pending.emplace(r.request_id, sent_info{now, measured, sec, mix[which].slo_ms, std::max(0.0, r.network_ms)});
    expiry.emplace_back(now + slo + grace, r.request_id);
    c.send(msg::encode({{}, std::move(r)}));
    if (measured) {
      ++s.sent;
      ++buckets[sec].sent;
    }
  };

  // Reasons carry figures ("12.5 ms left"); count them by their words, with numbers as N.
  auto count_reason = [&](const std::string& reason) {
    std::string key;
    for (size_t i = 0; i < reason.size(); ++i) {
      bool digit = reason[i] >= '0' && reason[i] <= '9';
      bool in_number = digit || ((reason[i] == '.' || reason[i] == '-') && i + 1 < reason.size() &&
                                 reason[i + 1] >= '0' && reason[i + 1] <= '9');
      if (!in_number) key += reason[i];
      else if (key.empty() || key.back() != 'N') key += 'N';
    }
    if (s.reasons.size() < 20 || s.reasons.contains(key)) s.reasons[key] = s.reasons.value(key, 0) + 1;
  };

  auto on_reply = [&](const msg::client_reply& r, steady::time_point now) {
    auto it = pending.find(r.request_id);
    if (it == pending.end()) {
      ++s.late;
      return;
    }
    auto info = it->second;
    pending.erase(it);
    if (!info.measured) return;
    auto& b = buckets[info.second];
    double lat = ms(now - info.at);
    switch (r.code) {
      case msg::status::ok:
        ++s.ok;
        ++b.ok;
        b.latencies.push_back(static_cast<float>(lat));
        all_latencies.push_back(static_cast<float>(lat));
        // The user waits for the upload too.
        if (lat + info.network_ms <= info.slo_ms) ++s.ok_within_slo, ++b.ok_within_slo;
        for (auto& t : r.timings)
          if (!t.node.empty()) s.nodes[t.node] = s.nodes.value(t.node, 0) + 1;
        break;
      case msg::status::dropped: ++s.dropped, ++b.dropped; count_reason(r.reason); break;
      case msg::status::overloaded: ++s.overloaded, ++b.errors; count_reason(r.reason); break;
      case msg::status::error: ++s.errors, ++b.errors; count_reason(r.reason); break;
    }
  };

  double next_gap = 0;
  auto next_send = start;
  if (o.concurrency > 0)
    for (int i = 0; i < o.concurrency; ++i) send_one(start);
  auto last_progress = start;
  std::string frame;
  bool tty = o.progress && isatty(2);
  while (true) {
    auto now = steady::now();
    bool sending = now < stop_sending;
    if (o.concurrency <= 0 && sending) {
      while (next_send <= now && next_send < stop_sending) {
        if (now - next_send > std::chrono::milliseconds(2) && next_send >= measure_from) ++s.delayed;
        send_one(now);
        next_gap = gen.gap_s(rate_at(next_send));
        next_send += std::chrono::nanoseconds(static_cast<int64_t>(next_gap * 1e9));
      }
    }
    while (!expiry.empty() && expiry.front().first <= now) {
      auto it = pending.find(expiry.front().second);
      if (it != pending.end()) {
        if (it->second.measured) ++s.lost;
        pending.erase(it);
      }
      expiry.pop_front();
    }
    if (!sending && pending.empty()) break;
    int timeout = 0;
    if (o.concurrency > 0 || !sending) timeout = 20;
    else timeout = static_cast<int>(std::max<int64_t>(0, std::chrono::duration_cast<std::chrono::milliseconds>(next_send - now).count()));
    timeout = std::min(timeout, 20);
    int got = 0;
    for (int wait = timeout; c.recv(frame, wait) && got < 10000; wait = 0, ++got) {
      auto d = msg::decode(frame, limits);
      if (!d.value) continue;
      auto* r = std::get_if<msg::client_reply>(&d.value->content);
      if (!r) continue;
      auto t = steady::now();
      on_reply(*r, t);
      if (o.concurrency > 0 && t < stop_sending) send_one(t);
    }
    if (tty && now - last_progress >= std::chrono::seconds(1)) {
      last_progress = now;
      double el = std::chrono::duration<double>(now - start).count();
      auto lat = all_latencies;
      fprintf(stderr, "\r[%5.1fs] sent %lu  rate %.0f/s  attainment %.2f%%  p99 %.1f ms   ", el,
              static_cast<unsigned long>(s.sent), s.sent / std::max(1e-9, el - o.warmup_s),
              s.sent ? 100.0 * s.ok_within_slo / s.sent : 0.0, percentile(lat, 0.99));
    }
  }
  if (tty) fprintf(stderr, "\n");
  s.measured_s = total_s - o.warmup_s;
  s.attainment = s.sent ? static_cast<double>(s.ok_within_slo) / s.sent : 0;
  s.goodput_rps = s.measured_s > 0 ? s.ok_within_slo / s.measured_s : 0;
  if (!all_latencies.empty()) {
    double sum = 0;
    for (auto x : all_latencies) sum += x;
    s.mean = sum / all_latencies.size();
    s.max = *std::max_element(all_latencies.begin(), all_latencies.end());
    s.p50 = percentile(all_latencies, 0.50);
    s.p90 = percentile(all_latencies, 0.90);
    s.p99 = percentile(all_latencies, 0.99);
  }
  for (size_t i = 0; i + 1 < buckets.size() || (i < buckets.size() && buckets[i].sent); ++i) {
    auto& b = buckets[i];
    s.series.push_back({{"t", i}, {"sent", b.sent}, {"ok", b.ok}, {"ok_within_slo", b.ok_within_slo},
                        {"dropped", b.dropped}, {"errors", b.errors},
                        {"p99_ms", percentile(b.latencies, 0.99)}});
  }
  return true;
}

nlohmann::json load_summary::to_json(const load_options& o) const {
  return {{"pipeline", o.pipeline}, {"address", o.address}, {"arrival", o.arrival},
          {"rate", o.rate}, {"duration_s", measured_s}, {"slo_ms", o.slo_ms},
          {"sent", sent}, {"ok", ok}, {"ok_within_slo", ok_within_slo}, {"dropped", dropped},
          {"overloaded", overloaded}, {"errors", errors}, {"lost", lost}, {"late", late},
          {"delayed", delayed}, {"attainment", attainment}, {"goodput_rps", goodput_rps},
          {"latency_ms", {{"p50", p50}, {"p90", p90}, {"p99", p99}, {"max", max}, {"mean", mean}}},
          {"reasons", reasons}, {"nodes", nodes}, {"series", series}};
}

std::string load_summary::to_text() const {
  char buf[512];
  snprintf(buf, sizeof buf,
           "sent %lu  ok %lu (within SLO %lu)  dropped %lu  overloaded %lu  errors %lu  lost %lu\n"
           "attainment %.2f%%  goodput %.1f req/s  latency ms p50 %.1f  p90 %.1f  p99 %.1f  max %.1f\n",
           (unsigned long)sent, (unsigned long)ok, (unsigned long)ok_within_slo,
           (unsigned long)dropped, (unsigned long)overloaded, (unsigned long)errors,
           (unsigned long)lost, 100 * attainment, goodput_rps, p50, p90, p99, max);
  std::string out = buf;
  for (auto& [reason, n] : reasons.items()) out += "  " + std::to_string(n.get<long>()) + "x " + reason + "\n";
  return out;
}

}  // namespace sloserve
