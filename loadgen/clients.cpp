#include "loadgen/clients.hpp"

#include <algorithm>
#include <cmath>
#include <deque>
#include <limits>
#include <map>
#include <memory>
#include <random>
#include <thread>
#include <unordered_map>
#include <utility>

#include "loadgen/load.hpp"
#include "loadgen/socket.hpp"
#include "loadgen/uplink.hpp"
#include "messages/codec.hpp"
#include "scheduling/uplink_estimate.hpp"

namespace sloserve {
namespace {

using steady = std::chrono::steady_clock;

double ms(steady::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

}  // namespace

namespace {

struct client_result {
  std::string id;
  double slo_ms = 0, fps = 0;
  uint64_t sent = 0, skipped = 0, ok_within_slo = 0, answered_within = 0;
  double accuracy_sum = 0;
  std::map<std::string, uint64_t> sizes;  // "HxW" -> frames sent
};

struct frame {
  uint64_t id;
  steady::time_point capture, start, deliver;  // captured, its upload began, at the frontend
  size_t size;
  bool measured;
  size_t second;
};

template <class T>
const T& cycled(const std::vector<T>& v, size_t i) {
  return v[i % v.size()];
}

steady::duration ms_duration(double ms) {
  return std::chrono::duration_cast<steady::duration>(std::chrono::duration<double, std::milli>(ms));
}

// One video client: it captures frames at its rate, chooses each one's size from what it knows of
// its uplink (and what replies advise), uploads them over its emulated uplink, gives up those that
// would cross too late, and tallies the replies.
class video_client {
 public:
  video_client(const load_options& o, const client_options& co, size_t index, load_connection& c,
               steady::time_point start, int64_t start_wall_us, const std::vector<tensor>& frames, lane_tally& out,
               client_result& res)
      : o_(o),
        co_(co),
        index_(index),
        c_(c),
        start_(start),
        start_wall_us_(start_wall_us),
        frames_(frames),
        out_(out),
        res_(res),
        link_(co.bandwidth.empty() ? nullptr : &cycled(co.bandwidth, index), start, co.rtt_ms) {
    auto n = static_cast<size_t>(co.clients);
    res.id = "client-" + std::to_string(index);
    res.slo_ms = co.slo_ms.empty() ? o.slo_ms : cycled(co.slo_ms, index);
    res.fps = co.fps.empty() ? std::max(1.0, o.rate / static_cast<double>(n)) : cycled(co.fps, index);
    double total_s = o.warmup_s + o.duration_s;
    measure_from_ = start + ms_duration(o.warmup_s * 1e3);
    stop_ = start + ms_duration(total_s * 1e3);
    gap_ = ms_duration(1e3 / res.fps);
    grace_ = ms_duration(res.slo_ms + o.grace_ms);
    for (size_t i = 0; i < co.sizes.size(); ++i) frame_bytes_.push_back(frames[i].data.size());
    out = lane_tally(static_cast<size_t>(std::ceil(total_s)));
    // A client that joins later sends nothing before it joins.
    auto joins = co.join_s.empty() ? steady::duration{} : ms_duration(cycled(co.join_s, index) * 1e3);
    next_capture_ = start + joins + gap_ * static_cast<int64_t>(index) / static_cast<int64_t>(n);
    limits_.max_payload_bytes = 1ULL << 32;
  }

  void run() {
    std::string buf;
    while (true) {
      auto now = steady::now();
      capture(now);
      give_up_hopeless(now);
      deliver(now);
      expire_lost(expiry_, pending_, now, out_);
      if (next_capture_ >= stop_ && on_link_.empty() && pending_.empty()) break;
      // Wake for the next capture, the next arrival, or within 10 ms to judge the frame crossing.
      auto soon = now + std::chrono::milliseconds(10);
      auto wake = std::min({next_capture_ < stop_ ? next_capture_ : soon, link_.next_arrival().value_or(soon), soon});
      int timeout = static_cast<int>(
          std::clamp<int64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(wake - now).count(), 0, 10));
      for (int wait = timeout; c_.recv(buf, wait); wait = 0) {
        receive(buf);
        auto next = link_.next_arrival();
        if (steady::now() >= next_capture_ || (next && steady::now() >= *next)) break;
      }
    }
  }

 private:
  size_t second_of(steady::time_point t) const {
    return t < measure_from_ ? size_t{0}
                             : static_cast<size_t>(std::chrono::duration<double>(t - measure_from_).count());
  }
  size_t index_of(image_size s) const {
    for (size_t i = 0; i < co_.sizes.size(); ++i)
      if (co_.sizes[i] == s) return i;
    return co_.sizes.size();
  }
  double seconds(steady::time_point t) const { return std::chrono::duration<double>(t - start_).count(); }
  // What the client knows of its uplink: the transfers it has finished (or given up), as the
  // harmonic mean of the last second, or the latest transfer's rate when that is lower (a drop
  // counts at once); before the first, it sends the smallest size.
  void learn(steady::time_point t) {
    for (auto& x : link_.ended(t)) {
      double took = ms(x.end - x.start);
      uplink_seen_.add(seconds(x.end), static_cast<int64_t>(x.bytes), took);
      latest_mbps_ = x.bytes * 8 / (std::max(took, 1e-6) * 1e3);
    }
  }
  double known_mbps(steady::time_point t) { return std::min(uplink_seen_.mbps(seconds(t)), latest_mbps_); }
  // The server's part of the latency as this client has seen it: from a transfer's end to its
  // reply, the least over the last 32 answers (0 before the first).
  double server_ms() const {
    return server_seen_.empty() ? 0 : *std::min_element(server_seen_.begin(), server_seen_.end());
  }

  // The size of a frame captured at `t`.
  size_t choose(steady::time_point t) {
    learn(t);
    double mbps = known_mbps(t);
    // A link still busy with earlier frames carries less than they assumed: the smallest size
    // drains it fastest.
    bool backlog = link_.free_at() > t;
    auto carried = mbps < 0 || backlog ? size_t{0} : largest_carried(frame_bytes_, mbps, res_.fps);
    switch (co_.adaptation) {
      case data_adaptation::off:
        return index_of(co_.fixed);
      case data_adaptation::bandwidth:
        return carried;
      case data_adaptation::slo:
        return within_share(frame_bytes_, carried, mbps, co_.network_share * res_.slo_ms);
      case data_adaptation::jellyfish:
        // A client that knows its SLO sends no size it knows would cross too late: until the
        // replies advise, and when its link fell since they did.
        return jellyfish_size(frame_bytes_, advised_ ? index_of(*advised_) : co_.sizes.size(), carried, mbps,
                              server_ms(), res_.slo_ms);
    }
    return carried;
  }

  void skip(const frame& f) {
    ++skips_untold_;
    if (!f.measured) return;
    out_.skipped();
    ++res_.skipped;
  }

  // The frames captured by `now`, onto the uplink or skipped.
  void capture(steady::time_point now) {
    for (; next_capture_ <= now && next_capture_ < stop_; next_capture_ += gap_) {
      frame f{next_id_++,
              next_capture_,
              {},
              {},
              choose(next_capture_),
              next_capture_ >= measure_from_,
              second_of(next_capture_)};
      auto bytes = static_cast<double>(frames_[f.size].data.size());
      // A frame that, at the uplink the client knows of and behind the bytes still in its send
      // queue, would cross too late to be answered within its SLO only delays the frames after
      // it. On an idle link a frame is sent whatever was seen before: it measures the link anew.
      double mbps = known_mbps(next_capture_);
      if (co_.skip_hopeless && mbps > 0 && link_.free_at() > next_capture_ &&
          (link_.backlog_bytes(next_capture_) + bytes) * 8 / (mbps * 1e3) + server_ms() > res_.slo_ms) {
        skip(f);
        continue;
      }
      link_.send(f.id, f.capture, bytes);
      on_link_.emplace(f.id, f);
    }
  }

  // A frame whose upload, at the rate its bytes have been leaving (or, in its first 5 ms, the
  // rate the client knew), would end too late to be answered within its SLO is given up, and the
  // link goes to the frames behind it.
  void give_up_hopeless(steady::time_point now) {
    while (co_.skip_hopeless) {
      auto* x = link_.crossing(now);
      if (!x) break;
      double elapsed = ms(now - x->start), sent = link_.bits_between(x->start, now) / 8;
      double mbps = elapsed >= 5 ? sent * 8 / (elapsed * 1e3) : known_mbps(now);
      if (mbps <= 0 || ms(now - x->captured) + (x->bytes - sent) * 8 / (mbps * 1e3) + server_ms() <= res_.slo_ms) break;
      if (auto it = on_link_.find(x->id); it != on_link_.end()) {
        skip(it->second);
        on_link_.erase(it);
      }
      link_.cancel(now);
      learn(now);
    }
  }

  // The frames whose upload ended by `now`, sent to the frontend as requests.
  void deliver(steady::time_point now) {
    for (auto& x : link_.arrived(now)) {
      auto it = on_link_.find(x.id);
      if (it == on_link_.end()) continue;
      auto f = it->second;
      on_link_.erase(it);
      f.start = x.start;
      f.deliver = x.end + ms_duration(co_.rtt_ms / 2);
      if (f.measured) {  // a request is sent once it is on its way to the frontend whole
        out_.sent(f.second);
        ++res_.sent;
        auto& sz = co_.sizes[f.size];
        ++res_.sizes[std::to_string(sz.height) + "x" + std::to_string(sz.width)];
      }
      msg::client_request r;
      r.pipeline = o_.pipeline;
      r.request_id = f.id;
      r.inputs.push_back(frames_[f.size]);
      r.sent_at_us = start_wall_us_ + std::chrono::duration_cast<std::chrono::microseconds>(f.capture - start_).count();
      r.client = res_.id;
      r.slo_ms = res_.slo_ms;
      r.rate_hz = res_.fps;
      r.rtt_ms = co_.rtt_ms;
      r.queued_ms = ms(f.start - f.capture);
      r.skipped = std::exchange(skips_untold_, 0);
      pending_.emplace(f.id, f);
      // The deadline runs from capture; a reply is awaited from the moment it is on the wire.
      expiry_.emplace_back(f.deliver + grace_, f.id);
      c_.send(msg::encode_frame({{}, std::move(r)}));
    }
  }

  // A reply: its advice, what it says of the server's latency, and its outcome.
  void receive(const std::string& buf) {
    auto d = msg::decode(buf, limits_);
    if (!d.value) return;
    auto* r = std::get_if<msg::client_reply>(&d.value->content);
    if (!r) return;
    auto it = pending_.find(r->request_id);
    if (it == pending_.end()) return out_.late();
    auto f = it->second;
    pending_.erase(it);
    if (r->input_height > 0 && r->input_width > 0)
      advised_ = image_size{static_cast<int>(r->input_height), static_cast<int>(r->input_width)};
    if (r->code == msg::status::ok) {
      server_seen_.push_back(ms(steady::now() - (f.deliver - ms_duration(co_.rtt_ms / 2))));
      if (server_seen_.size() > 32) server_seen_.pop_front();
    }
    if (!f.measured) return;
    double latency = ms(steady::now() - f.capture);
    out_.reply(*r, f.second, latency, 0, res_.slo_ms);
    if (r->code != msg::status::ok || latency > res_.slo_ms || !r->late_paths.empty()) return;
    ++res_.ok_within_slo;
    if (r->timings.empty()) return;
    if (auto m = co_.model_size.find(r->timings.front().model); m != co_.model_size.end()) {
      res_.accuracy_sum += co_.size_accuracy[std::min(m->second, f.size)];
      ++res_.answered_within;
    }
  }

  const load_options& o_;
  const client_options& co_;
  size_t index_;
  load_connection& c_;
  steady::time_point start_;
  int64_t start_wall_us_;
  const std::vector<tensor>& frames_;
  lane_tally& out_;
  client_result& res_;
  emulated_uplink link_;
  msg::decode_limits limits_;
  steady::time_point measure_from_, stop_, next_capture_;
  steady::duration gap_{}, grace_{};
  std::vector<size_t> frame_bytes_;  // what a frame of each size weighs
  std::optional<image_size> advised_;
  sched::uplink_estimate uplink_seen_;
  double latest_mbps_ = -1;
  std::deque<double> server_seen_;
  std::unordered_map<uint64_t, frame> pending_;  // at the frontend, awaiting a reply
  std::unordered_map<uint64_t, frame> on_link_;  // captured, not yet at the frontend
  uint32_t skips_untold_ = 0;                    // frames skipped since the last request, told with the next
  std::deque<std::pair<steady::time_point, uint64_t>> expiry_;  // capture order = deadline order
  uint64_t next_id_ = 1;
};

void run_client(const load_options& o, const client_options& co, size_t index, load_connection& c,
                steady::time_point start, int64_t start_wall_us, const std::vector<tensor>& frames, lane_tally& out,
                client_result& res) {
  video_client(o, co, index, c, start, start_wall_us, frames, out, res).run();
}

}  // namespace

expected<load_summary> run_clients(const load_options& o, const client_options& co) {
  if (co.clients <= 0 || co.sizes.empty()) return fail("--clients needs at least one client and one image size");
  auto n = static_cast<size_t>(co.clients);
  std::vector<std::unique_ptr<load_connection>> conns;
  for (size_t i = 0; i < n; ++i) {
    conns.push_back(std::make_unique<load_socket>(o));
    if (auto connected = conns.back()->connect(); !connected) return fail(connected.error());
  }
  if (auto ready = wait_ready(*conns.front(), o); !ready) return fail(ready.error());
  std::vector<tensor> frames;
  for (size_t i = 0; i < co.sizes.size(); ++i) {
    frames.push_back(encoded_image(camera_frame_jpeg(co.sizes[i].height, co.sizes[i].width, o.seed)));
  }
  auto start = steady::now() + std::chrono::milliseconds(20);
  auto start_wall_us = std::chrono::duration_cast<std::chrono::microseconds>(
                           (std::chrono::system_clock::now() + std::chrono::milliseconds(20)).time_since_epoch())
                           .count();
  std::vector<lane_tally> tallies(n);
  std::vector<client_result> results(n);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < n; ++i)
    threads.emplace_back([&, i] {
      std::this_thread::sleep_until(start);
      run_client(o, co, i, *conns[i], start, start_wall_us, frames, tallies[i], results[i]);
    });
  for (auto& t : threads) t.join();
  auto s = merge_lanes(tallies, o.duration_s);
  s.started_at_unix_s = static_cast<double>(start_wall_us) / 1e6 + o.warmup_s;
  double acc = 0;
  uint64_t answered = 0;
  s.clients = nlohmann::json::object();
  for (auto& r : results) {
    s.clients[r.id] = {
        {"slo_ms", r.slo_ms},
        {"fps", r.fps},
        {"sent", r.sent},
        {"skipped", r.skipped},
        {"ok_within_slo", r.ok_within_slo},
        {"miss_rate",
         r.sent + r.skipped ? 1 - static_cast<double>(r.ok_within_slo) / static_cast<double>(r.sent + r.skipped) : 0},
        {"accuracy", r.answered_within ? r.accuracy_sum / r.answered_within : 0},
        {"sizes", r.sizes}};
    acc += r.accuracy_sum;
    answered += r.answered_within;
  }
  s.accuracy = answered ? acc / static_cast<double>(answered) : 0;
  return s;
}

}  // namespace sloserve
