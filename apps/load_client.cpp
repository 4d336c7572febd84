#include "apps/load_client.hpp"

#include <unistd.h>
#include <zmq.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <memory>
#include <thread>
#include <unordered_map>

#include "messages/codec.hpp"

namespace sloserve {
namespace {

using steady = std::chrono::steady_clock;

// A request sent later than this after its arrival time counts as sent late by the generator.
constexpr std::chrono::milliseconds late_after{2};

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
  // The frame's bytes go to ZeroMQ by reference.
  void send(bytes frame) {
    auto* held = new bytes(std::move(frame));
    zmq_msg_t m;
    zmq_msg_init_data(&m, const_cast<char*>(held->data()), held->size(),
                      [](void*, void* hint) { delete static_cast<bytes*>(hint); }, held);
    if (zmq_msg_send(&m, sock_, 0) < 0) zmq_msg_close(&m);
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
    c.send(msg::encode_frame({{}, msg::status_request{token}}));
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

bool read_images(const std::string& path, std::vector<tensor>& out, std::string& error) {
  namespace fs = std::filesystem;
  std::vector<fs::path> files;
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    for (auto& e : fs::directory_iterator(path, ec)) {
      auto ext = e.path().extension().string();
      std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char ch) { return std::tolower(ch); });
      if (e.is_regular_file() && (ext == ".jpg" || ext == ".jpeg")) files.push_back(e.path());
    }
    std::sort(files.begin(), files.end());
    if (files.empty()) {
      error = path + ": the folder has no .jpg or .jpeg files";
      return false;
    }
  } else {
    files.push_back(path);
  }
  for (auto& f : files) {
    std::ifstream in(f, std::ios::binary);
    if (!in) {
      error = f.string() + ": cannot open the image";
      return false;
    }
    std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (data.size() < 4 || static_cast<unsigned char>(data[0]) != 0xFF || static_cast<unsigned char>(data[1]) != 0xD8) {
      error = f.string() + ": not a JPEG file";
      return false;
    }
    tensor t;
    t.name = "image";
    t.type = dtype::uint8;
    t.shape = {static_cast<int64_t>(data.size())};
    t.data = std::move(data);
    out.push_back(std::move(t));
  }
  return true;
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

namespace {

// What one lane (one thread, one connection) saw; lanes are merged at the end.
struct lane_result {
  load_summary s;
  std::vector<bucket> buckets;
  std::vector<float> latencies;
  std::array<std::vector<float>, 4> parts;  // of OK replies: client, frontend, queue, exec (ms)
};

// Where an OK reply's latency went: in the client and on the wire (latency less the frontend's
// total), in the frontend and between nodes (its total less the stages' own times), queued at
// the devices, and executing. The stage times add up along a chain; branches of a DAG overlap.
const std::array<const char*, 4> part_names{"client", "frontend", "queue", "exec"};

// One lane of the load: its share of the arrivals (rate / lanes, an independent process) or of
// the closed loop's outstanding requests, over its own connection. Request ids are lane + k·lanes.
void run_lane(const load_options& o, size_t lane, size_t lanes, client& c, steady::time_point start,
              int64_t start_wall_us, const std::vector<mix_entry>& mix, const std::vector<tensor>& payloads,
              lane_result& out) {
  auto& s = out.s;
  msg::decode_limits limits;
  limits.max_payload_bytes = 1ULL << 32;
  std::vector<double> weights;
  double max_slo = 0;
  for (auto& m : mix) {
    weights.push_back(m.weight);
    max_slo = std::max(max_slo, m.slo_ms);
  }
  std::discrete_distribution<size_t> pick(weights.begin(), weights.end());
  std::mt19937_64 pick_rng((o.seed + lane) ^ 0x5bd1e995);
  load_options lane_o = o;
  lane_o.seed = o.seed + 7919 * lane;
  arrivals gen(lane_o);
  double share = 1.0 / static_cast<double>(lanes);

  double total_s = o.warmup_s + (o.trace.empty() ? o.duration_s : std::min<double>(o.duration_s, o.trace.size()));
  auto measure_from = start + std::chrono::microseconds(static_cast<int64_t>(o.warmup_s * 1e6));
  auto stop_sending = start + std::chrono::microseconds(static_cast<int64_t>(total_s * 1e6));
  auto slo = std::chrono::microseconds(static_cast<int64_t>(max_slo * 1000));
  auto grace = std::chrono::microseconds(static_cast<int64_t>(o.grace_ms * 1000));

  std::unordered_map<uint64_t, sent_info> pending;
  std::deque<std::pair<steady::time_point, uint64_t>> expiry;  // send order = deadline order
  auto& buckets = out.buckets;
  buckets.assign(static_cast<size_t>(std::ceil(total_s)) + 1, bucket{});
  auto& all_latencies = out.latencies;
  uint64_t next_id = lane + 1;
  size_t next_payload = lane;
  // The second of the measured window `t` falls in (0 during warm-up).
  auto second_of = [&](steady::time_point t) {
    return t < measure_from ? size_t{0}
                            : static_cast<size_t>(std::chrono::duration<double>(t - measure_from).count());
  };
  auto rate_at = [&](steady::time_point t) {
    if (o.trace.empty()) return o.rate * share;
    return o.trace[std::min(second_of(t), o.trace.size() - 1)] * share;
  };
  // Upload time of the request's payload over that second's bandwidth, or the fixed time.
  auto network_at = [&](steady::time_point t) {
    if (o.bandwidth_mbps.empty()) return o.network_ms;
    double mbps = o.bandwidth_mbps[std::min(second_of(t), o.bandwidth_mbps.size() - 1)];
    return mbps > 0 ? o.payload_kb * 8 / mbps : 1e9;
  };

  // `intended`: when the arrival process meant to send it; latency and the deadline count from
  // there, and the request carries it as its send time.
  auto send_one = [&](steady::time_point intended) {
    auto which = mix.size() == 1 ? 0 : pick(pick_rng);
    msg::client_request r;
    r.pipeline = mix[which].pipeline;
    r.request_id = next_id;
    next_id += lanes;
    if (!o.images.empty()) r.inputs.push_back(o.images[next_payload++ % o.images.size()]);
    else r.inputs.push_back(payloads[which]);
    r.network_ms = network_at(intended);
    r.sent_at_us = start_wall_us + std::chrono::duration_cast<std::chrono::microseconds>(intended - start).count();
    bool measured = intended >= measure_from;
    auto sec = std::min(second_of(intended), buckets.size() - 1);
    pending.emplace(r.request_id, sent_info{intended, measured, sec, mix[which].slo_ms, std::max(0.0, r.network_ms)});
    expiry.emplace_back(intended + slo + grace, r.request_id);
    c.send(msg::encode_frame({{}, std::move(r)}));
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
        {
          double queue = 0, exec = 0;
          for (auto& t : r.timings) queue += t.queue_ms, exec += t.exec_ms;
          double part[4] = {lat - r.total_ms, r.total_ms - queue - exec, queue, exec};
          for (size_t k = 0; k < 4; ++k) out.parts[k].push_back(static_cast<float>(std::max(0.0, part[k])));
        }
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

  // Constant arrivals of several lanes interleave: lane k starts k/lanes of a gap later.
  auto next_send = start;
  if (o.arrival == "constant" && lanes > 1 && o.rate > 0)
    next_send += std::chrono::nanoseconds(static_cast<int64_t>(1e9 / o.rate * static_cast<double>(lane)));
  int closed = o.concurrency > 0 ? static_cast<int>((o.concurrency + lanes - 1 - lane) / lanes) : 0;
  for (int i = 0; i < closed; ++i) send_one(start);
  auto last_progress = start;
  std::string frame;
  bool tty = lane == 0 && o.progress && isatty(2);
  while (true) {
    auto now = steady::now();
    bool sending = now < stop_sending;
    if (o.concurrency <= 0 && sending) {
      while (next_send <= now && next_send < stop_sending) {
        if (now - next_send > late_after && next_send >= measure_from) ++s.delayed;
        send_one(next_send);
        next_send += std::chrono::nanoseconds(static_cast<int64_t>(gen.gap_s(rate_at(next_send)) * 1e9));
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
      // An open loop must not fall behind its arrivals while replies pour in.
      if (o.concurrency <= 0 && t >= next_send && t < stop_sending) break;
    }
    if (tty && now - last_progress >= std::chrono::seconds(1)) {
      last_progress = now;
      double el = std::chrono::duration<double>(now - start).count();
      auto lat = all_latencies;
      fprintf(stderr, "\r[%5.1fs] sent %lu  rate %.0f/s  attainment %.2f%%  p99 %.1f ms   ", el,
              static_cast<unsigned long>(s.sent * lanes),
              static_cast<double>(s.sent * lanes) / std::max(1e-9, el - o.warmup_s),
              s.sent ? 100.0 * s.ok_within_slo / s.sent : 0.0, percentile(lat, 0.99));
    }
  }
  if (tty) fprintf(stderr, "\n");
}

}  // namespace

size_t default_lanes(const load_options& o) {
  // One lane sends about 20,000 small requests/s, or about 300 MB/s of payload, on one core.
  double bytes = 0;
  for (auto& t : o.images) bytes = std::max(bytes, static_cast<double>(t.data.size()));
  if (o.images.empty()) bytes = static_cast<double>(o.input.byte_size().value_or(0));
  for (auto& m : o.mix) bytes = std::max(bytes, static_cast<double>(m.input.byte_size().value_or(0)));
  double peak = o.rate;
  for (auto r : o.trace) peak = std::max(peak, r);
  double need = std::max(peak / 20000, peak * bytes / 300e6);
  if (o.concurrency > 0) need = std::min<double>(need, o.concurrency);
  auto cap = std::max<size_t>(1, std::thread::hardware_concurrency() / 2);
  return std::clamp<size_t>(static_cast<size_t>(std::ceil(need)), 1, cap);
}

bool run_load(const load_options& o, load_summary& s, std::string& error) {
  size_t lanes = o.threads > 0 ? static_cast<size_t>(o.threads) : default_lanes(o);
  if (o.concurrency > 0) lanes = std::min(lanes, static_cast<size_t>(o.concurrency));
  std::vector<std::unique_ptr<client>> clients;
  for (size_t i = 0; i < lanes; ++i) {
    clients.push_back(std::make_unique<client>(o));
    if (!clients.back()->connect(error)) return false;
  }
  if (!wait_ready(*clients.front(), o, error)) return false;
  // Pipelines to draw from: the mix, or the one pipeline.
  auto mix = o.mix;
  if (mix.empty()) mix.push_back({o.pipeline, 1, o.slo_ms, o.input});
  std::vector<tensor> payloads;
  for (auto& m : mix) payloads.push_back(make_tensor(m.input, o.seed, "input"));

  auto start = steady::now() + std::chrono::milliseconds(20);  // every lane starts at once
  auto start_wall_us = std::chrono::duration_cast<std::chrono::microseconds>(
                           (std::chrono::system_clock::now() + std::chrono::milliseconds(20)).time_since_epoch())
                           .count();
  std::vector<lane_result> results(lanes);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < lanes; ++i)
    threads.emplace_back([&, i] {
      std::this_thread::sleep_until(start);
      run_lane(o, i, lanes, *clients[i], start, start_wall_us, mix, payloads, results[i]);
    });
  for (auto& t : threads) t.join();

  // Merge the lanes.
  s = {};
  s.lanes = lanes;
  std::vector<bucket> buckets;
  std::vector<float> all_latencies;
  std::array<std::vector<float>, 4> parts;
  for (auto& r : results) {
    using counter = uint64_t load_summary::*;
    for (counter f : {&load_summary::sent, &load_summary::ok, &load_summary::ok_within_slo, &load_summary::dropped,
                    &load_summary::overloaded, &load_summary::errors, &load_summary::lost, &load_summary::late,
                    &load_summary::delayed})
      s.*f += r.s.*f;
    for (auto& [k, v] : r.s.reasons.items()) s.reasons[k] = s.reasons.value(k, 0) + v.get<long>();
    for (auto& [k, v] : r.s.nodes.items()) s.nodes[k] = s.nodes.value(k, 0) + v.get<long>();
    all_latencies.insert(all_latencies.end(), r.latencies.begin(), r.latencies.end());
    for (size_t k = 0; k < r.parts.size(); ++k) parts[k].insert(parts[k].end(), r.parts[k].begin(), r.parts[k].end());
    if (buckets.size() < r.buckets.size()) buckets.resize(r.buckets.size());
    for (size_t i = 0; i < r.buckets.size(); ++i) {
      auto& a = buckets[i];
      auto& b = r.buckets[i];
      a.sent += b.sent, a.ok += b.ok, a.ok_within_slo += b.ok_within_slo, a.dropped += b.dropped, a.errors += b.errors;
      a.latencies.insert(a.latencies.end(), b.latencies.begin(), b.latencies.end());
    }
  }
  double total_s = o.warmup_s + (o.trace.empty() ? o.duration_s : std::min<double>(o.duration_s, o.trace.size()));
  s.measured_s = total_s - o.warmup_s;
  s.attainment = s.sent ? static_cast<double>(s.ok_within_slo) / s.sent : 0;
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
  }
  for (size_t k = 0; k < parts.size(); ++k)
    s.breakdown[part_names[k]] = {{"p50", percentile(parts[k], 0.50)}, {"p99", percentile(parts[k], 0.99)}};
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
          {"delayed", delayed}, {"generator_late_fraction", generator_late_fraction}, {"threads", lanes},
          {"warnings", warnings()}, {"attainment", attainment}, {"goodput_rps", goodput_rps},
          {"latency_ms", {{"p50", p50}, {"p90", p90}, {"p99", p99}, {"max", max}, {"mean", mean}}},
          {"latency_breakdown_ms", breakdown}, {"reasons", reasons}, {"nodes", nodes}, {"series", series}};
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
           (unsigned long)sent, (unsigned long)ok, (unsigned long)ok_within_slo,
           (unsigned long)dropped, (unsigned long)overloaded, (unsigned long)errors,
           (unsigned long)lost, 100 * attainment, goodput_rps, p50, p90, p99, max);
  std::string out = buf;
  if (ok) {
    out += "where the time went, ms p50/p99:";
    for (auto name : part_names)
      if (breakdown.contains(name))
        out += fmt_part(name, breakdown[name]["p50"].get<double>(), breakdown[name]["p99"].get<double>());
    out += "\n";
  }
  for (auto& [reason, n] : reasons.items()) out += "  " + std::to_string(n.get<long>()) + "x " + reason + "\n";
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

}  // namespace sloserve
