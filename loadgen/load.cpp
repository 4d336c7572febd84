#include "loadgen/load.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <thread>
#include <unordered_map>

#include "config/knob_option.hpp"
#include "loadgen/grpc_connection.hpp"
#include "loadgen/http_connection.hpp"
#include "loadgen/shared_inputs.hpp"
#include "loadgen/socket.hpp"
#include "messages/codec.hpp"
#include "pipelines/model.hpp"

namespace sloserve {
namespace {

using steady = std::chrono::steady_clock;

double ms(steady::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

struct sent_info {
  steady::time_point at;
  bool measured;
  size_t second;
  double slo_ms;
  double network_ms;  // attached to the request: the client's share of the SLO
};

// One lane of the load: its share of the arrivals (rate / lanes, an independent process) or of
// the closed loop's outstanding requests, over its own connection. Request ids are lane + k·lanes.
class load_lane {
 public:
  load_lane(const load_options& o, size_t lane, size_t lanes, load_connection& c, steady::time_point start,
            int64_t start_wall_us, const std::vector<mix_entry>& mix, const std::vector<tensor>& payloads,
            const shared_inputs* shared, lane_tally& out)
      : o_(o),
        lane_(lane),
        lanes_(lanes),
        c_(c),
        start_(start),
        start_wall_us_(start_wall_us),
        mix_(mix),
        payloads_(payloads),
        shared_(shared),
        out_(out),
        pick_rng_((o.seed + lane) ^ 0x5bd1e995),
        gen_(o.arrival, o.cv, o.seed + 7919 * lane),
        share_(1.0 / static_cast<double>(lanes)),
        next_id_(lane + 1),
        next_payload_(lane) {
    limits_.max_payload_bytes = 1ULL << 32;
    std::vector<double> weights;
    double max_slo = 0;
    for (auto& m : mix) {
      weights.push_back(m.weight);
      max_slo = std::max(max_slo, m.slo_ms);
    }
    pick_ = std::discrete_distribution<size_t>(weights.begin(), weights.end());
    double total_s = o.warmup_s + (o.trace.empty() ? o.duration_s : std::min<double>(o.duration_s, o.trace.size()));
    measure_from_ = start + std::chrono::microseconds(static_cast<int64_t>(o.warmup_s * 1e6));
    stop_sending_ = start + std::chrono::microseconds(static_cast<int64_t>(total_s * 1e6));
    deadline_after_ = std::chrono::microseconds(static_cast<int64_t>(max_slo * 1000)) +
                      std::chrono::microseconds(static_cast<int64_t>(o.grace_ms * 1000));
    out = lane_tally(static_cast<size_t>(std::ceil(total_s)));
  }

  void run() {
    // Constant arrivals of several lanes interleave: lane k starts k/lanes of a gap later.
    auto next_send = start_;
    if (!o_.trace.empty() && o_.trace[0] <= 0) next_send = next_after(start_);  // it starts silent
    if (o_.arrival == arrival_kind::constant && lanes_ > 1 && o_.rate > 0)
      next_send += std::chrono::nanoseconds(static_cast<int64_t>(1e9 / o_.rate * static_cast<double>(lane_)));
    bool closed_loop = o_.concurrency > 0;
    int closed = closed_loop ? static_cast<int>((o_.concurrency + lanes_ - 1 - lane_) / lanes_) : 0;
    for (int i = 0; i < closed; ++i) send_one(start_);
    auto last_progress = start_;
    std::string frame;
    bool tty = lane_ == 0 && o_.progress && isatty(2);
    while (true) {
      auto now = steady::now();
      // An open loop sends every arrival scheduled before the stop, also those a late wake-up
      // finds after it: the arrivals are the same however busy the machine is.
      bool sending = !closed_loop ? next_send < stop_sending_ : now < stop_sending_;
      for (; !closed_loop && next_send <= now && next_send < stop_sending_; next_send = next_after(next_send)) {
        if (now - next_send > late_after && next_send >= measure_from_) out_.delayed();
        send_one(next_send);
      }
      expire_lost(expiry_, pending_, now, out_);
      if (!sending && pending_.empty()) break;
      int timeout = closed_loop || !sending
                        ? 20
                        : static_cast<int>(std::clamp<int64_t>(
                              std::chrono::duration_cast<std::chrono::milliseconds>(next_send - now).count(), 0, 20));
      int got = 0;
      for (int wait = timeout; c_.recv(frame, wait) && got < 10000; wait = 0, ++got) {
        auto d = msg::decode(frame, limits_);
        auto* r = d.value ? std::get_if<msg::client_reply>(&d.value->content) : nullptr;
        if (!r) continue;
        auto t = steady::now();
        on_reply(*r, t);
        if (closed_loop && t < stop_sending_) send_one(t);
        // An open loop must not fall behind its arrivals while replies pour in.
        if (!closed_loop && t >= next_send && t < stop_sending_) break;
      }
      if (tty && now - last_progress >= std::chrono::seconds(1)) {
        last_progress = now;
        progress(now);
      }
    }
    if (tty) fprintf(stderr, "\n");
  }

 private:
  // The second of the measured window `t` falls in (0 during warm-up).
  size_t second_of(steady::time_point t) const {
    return t < measure_from_ ? size_t{0}
                             : static_cast<size_t>(std::chrono::duration<double>(t - measure_from_).count());
  }
  // The next arrival after one at `t`: a trace's silent seconds send nothing.
  steady::time_point next_after(steady::time_point t) {
    if (o_.trace.empty()) return t + std::chrono::nanoseconds(static_cast<int64_t>(gen_.gap_s(o_.rate * share_) * 1e9));
    double at = next_arrival_s(gen_, o_.trace, share_, std::chrono::duration<double>(t - measure_from_).count());
    if (!(at < 1e7)) return stop_sending_;
    return measure_from_ + std::chrono::nanoseconds(static_cast<int64_t>(at * 1e9));
  }
  // Upload time of the request's payload over that second's bandwidth, or the fixed time.
  double network_at(steady::time_point t) const {
    if (o_.bandwidth_mbps.empty()) return o_.network_ms;
    double mbps = o_.bandwidth_mbps[std::min(second_of(t), o_.bandwidth_mbps.size() - 1)];
    return mbps > 0 ? o_.payload_kb * 8 / mbps : 1e9;
  }

  // `intended`: when the arrival process meant to send it; latency and the deadline count from
  // there, and the request carries it as its send time.
  void send_one(steady::time_point intended) {
    auto which = mix_.size() == 1 ? 0 : pick_(pick_rng_);
    auto& m = mix_[which];
    msg::client_request r;
    r.pipeline = m.pipeline;
    r.request_id = next_id_;
    next_id_ += lanes_;
    if (shared_)
      r.shm_inputs.push_back(o_.images.empty() ? shared_->payload(which)
                                               : shared_->image(next_payload_++ % o_.images.size()));
    else
      r.inputs.push_back(o_.images.empty() ? input_of(which, r.request_id)
                                           : o_.images[next_payload_++ % o_.images.size()]);
    r.start_layer = m.start_layer;
    r.tenant = o_.tenant;
    if (m.declare_slo) r.slo_ms = m.slo_ms;
    if (m.clients > 0)
      r.client = fmt::format("{}@{}/{:g}#{}", r.pipeline, r.start_layer, m.slo_ms,
                             r.request_id / static_cast<uint64_t>(lanes_) % static_cast<uint64_t>(m.clients));
    r.network_ms = network_at(intended);
    r.sent_at_us = start_wall_us_ + std::chrono::duration_cast<std::chrono::microseconds>(intended - start_).count();
    bool measured = intended >= measure_from_;
    auto sec = second_of(intended);
    pending_.emplace(r.request_id, sent_info{intended, measured, sec, m.slo_ms, std::max(0.0, r.network_ms)});
    expiry_.emplace_back(intended + deadline_after_, r.request_id);
    c_.send(msg::encode_frame({{}, std::move(r)}));
    if (measured) out_.sent(sec);
  }

  // The input of pipeline `which`'s request `id`: its payload, or under --repeat one sent before
  // or one of its own.
  tensor input_of(size_t which, uint64_t id) {
    auto& base = payloads_[which];
    if (o_.repeat < 0) return base;
    auto& sent = fresh_[which];
    if (!sent.empty() && std::bernoulli_distribution(o_.repeat)(pick_rng_))
      return sent[std::uniform_int_distribution<size_t>(0, sent.size() - 1)(pick_rng_)];
    std::string data(base.data.view());
    std::memcpy(data.data(), &id, std::min(sizeof id, data.size()));
    tensor t{base.name, base.type, base.shape, bytes(std::move(data))};
    if (sent.size() < 64)
      sent.push_back(t);
    else
      sent[next_fresh_++ % 64] = t;
    return t;
  }

  void on_reply(const msg::client_reply& r, steady::time_point now) {
    auto it = pending_.find(r.request_id);
    if (it == pending_.end()) return out_.late();
    auto info = it->second;
    pending_.erase(it);
    if (info.measured) out_.reply(r, info.second, ms(now - info.at), info.network_ms, info.slo_ms);
  }

  void progress(steady::time_point now) {
    double el = std::chrono::duration<double>(now - start_).count();
    auto& s = out_.counts();
    fprintf(stderr, "\r[%5.1fs] sent %lu  rate %.0f/s  attainment %.2f%%  p99 %.1f ms   ", el,
            static_cast<unsigned long>(s.sent * lanes_),
            static_cast<double>(s.sent * lanes_) / std::max(1e-9, el - o_.warmup_s),
            s.sent ? 100.0 * s.ok_within_slo / s.sent : 0.0, out_.p99_ms());
  }

  const load_options& o_;
  size_t lane_, lanes_;
  load_connection& c_;
  steady::time_point start_;
  int64_t start_wall_us_;
  const std::vector<mix_entry>& mix_;
  const std::vector<tensor>& payloads_;
  const shared_inputs* shared_;  // --shared-memory: where the payloads and images lie; else null
  lane_tally& out_;
  msg::decode_limits limits_;
  std::discrete_distribution<size_t> pick_;
  std::mt19937_64 pick_rng_;
  arrivals gen_;
  double share_;
  steady::time_point measure_from_, stop_sending_;
  steady::duration deadline_after_{};
  std::unordered_map<uint64_t, sent_info> pending_;
  std::deque<std::pair<steady::time_point, uint64_t>> expiry_;  // send order = deadline order
  uint64_t next_id_;
  size_t next_payload_;
  std::map<size_t, std::vector<tensor>> fresh_;  // --repeat: per pipeline, its last fresh inputs
  size_t next_fresh_ = 0;
};

void run_lane(const load_options& o, size_t lane, size_t lanes, load_connection& c, steady::time_point start,
              int64_t start_wall_us, const std::vector<mix_entry>& mix, const std::vector<tensor>& payloads,
              const shared_inputs* shared, lane_tally& out) {
  load_lane(o, lane, lanes, c, start, start_wall_us, mix, payloads, shared, out).run();
}

}  // namespace

tensor encoded_image(std::string data) {
  tensor t;
  t.name = "image";
  t.type = dtype::uint8;
  t.shape = {static_cast<int64_t>(data.size())};
  t.data = std::move(data);
  return t;
}

expected<std::vector<tensor>> read_images(const std::string& path) {
  std::vector<tensor> out;
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
    if (files.empty()) return fail(path + ": the folder has no .jpg or .jpeg files");
  } else {
    files.push_back(path);
  }
  for (auto& f : files) {
    std::ifstream in(f, std::ios::binary);
    if (!in) return fail(f.string() + ": cannot open the image");
    std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (data.size() < 4 || static_cast<unsigned char>(data[0]) != 0xFF || static_cast<unsigned char>(data[1]) != 0xD8)
      return fail(f.string() + ": not a JPEG file");
    out.push_back(encoded_image(std::move(data)));
  }
  return out;
}

expected<std::vector<tensor>> random_images(const std::string& hxw, uint64_t seed, int count) {
  int h = 0, w = 0;
  char x = 0;
  std::istringstream in(hxw);
  if (!(in >> h >> x >> w) || x != 'x' || h < 1 || w < 1 || h > max_image_side || w > max_image_side)
    return fail("--image-size " + hxw + ": expected HxW, e.g. 480x640");
  std::vector<tensor> out;
  for (int i = 0; i < count; ++i)
    out.push_back(make_tensor({dtype::uint8, {h, w, 3}}, seed + static_cast<uint64_t>(i), "image"));
  return out;
}

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

expected<load_summary> run_load(const load_options& o) {
  size_t lanes = o.threads > 0 ? static_cast<size_t>(o.threads) : default_lanes(o);
  if (o.concurrency > 0) lanes = std::min(lanes, static_cast<size_t>(o.concurrency));
  std::vector<std::unique_ptr<load_connection>> clients;
  for (size_t i = 0; i < lanes; ++i) {
    if (o.protocol == load_protocol::http)
      clients.push_back(make_http_connection(o, (http_connections(o) + lanes - 1 - i) / lanes));
    else if (o.protocol == load_protocol::grpc)
      clients.push_back(make_grpc_connection(o));
    else
      clients.push_back(std::make_unique<load_socket>(o));
    if (auto connected = clients.back()->connect(); !connected) return fail(connected.error());
  }
  auto ready = wait_ready(*clients.front(), o);
  if (!ready) return fail(ready.error());
  // Pipelines to draw from: the mix, or the one pipeline.
  auto mix = o.mix;
  if (mix.empty()) mix.push_back({o.pipeline, 1, o.slo_ms, o.input});
  std::vector<tensor> payloads;
  for (auto& m : mix) payloads.push_back(make_tensor(m.input, o.seed, "input"));
  std::unique_ptr<shared_inputs> shared;  // before the connections it unregisters over are closed
  if (o.shared_memory) {
    auto made = shared_inputs::create(payloads, o.images);
    if (!made) return fail(made.error());
    shared = std::move(*made);
    if (auto registered = shared->register_with(*clients.front(), 5.0); !registered) return fail(registered.error());
  }

  auto start = steady::now() + std::chrono::milliseconds(20);  // every lane starts at once
  auto start_wall_us = std::chrono::duration_cast<std::chrono::microseconds>(
                           (std::chrono::system_clock::now() + std::chrono::milliseconds(20)).time_since_epoch())
                           .count();
  std::vector<lane_tally> results(lanes);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < lanes; ++i)
    threads.emplace_back([&, i] {
      std::this_thread::sleep_until(start);
      run_lane(o, i, lanes, *clients[i], start, start_wall_us, mix, payloads, shared.get(), results[i]);
    });
  for (auto& t : threads) t.join();

  double total_s = o.warmup_s + (o.trace.empty() ? o.duration_s : std::min<double>(o.duration_s, o.trace.size()));
  auto out = merge_lanes(results, total_s - o.warmup_s);
  out.started_at_unix_s = static_cast<double>(start_wall_us) / 1e6 + o.warmup_s;
  if (auto after = wait_ready(*clients.front(), o); after && after->dummies >= ready->dummies)
    out.dummies = after->dummies - ready->dummies;
  return out;
}

}  // namespace sloserve
