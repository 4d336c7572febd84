#include "loadgen/uplink.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace sloserve {

emulated_uplink::emulated_uplink(const std::vector<double>* trace, clock::time_point start, double rtt_ms)
    : trace_(trace && !trace->empty() ? trace : nullptr),
      start_(start),
      half_rtt_(std::chrono::duration_cast<clock::duration>(std::chrono::duration<double, std::milli>(rtt_ms / 2))),
      free_(start) {}

double emulated_uplink::seconds_of(clock::time_point t) const {
  return std::chrono::duration<double>(t - start_).count();
}

emulated_uplink::clock::time_point emulated_uplink::at_seconds(double s) const {
  return start_ + std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(s));
}

double emulated_uplink::mbps_at(clock::time_point t) const {
  if (!trace_) return std::numeric_limits<double>::infinity();
  auto s = static_cast<size_t>(std::max(0.0, seconds_of(t)));
  return std::max(0.05, (*trace_)[std::min(s, trace_->size() - 1)]);
}

double emulated_uplink::transfer_ms(clock::time_point begin, double bits) const {
  if (!trace_ || bits <= 0) return 0;
  double at = std::max(0.0, seconds_of(begin)), took_s = 0;
  while (true) {
    double mbps = mbps_at(at_seconds(at));
    double left = std::floor(at) + 1 - at;  // of this second
    if (bits <= mbps * 1e6 * left) return (took_s + bits / (mbps * 1e6)) * 1e3;
    bits -= mbps * 1e6 * left;
    took_s += left;
    at = std::floor(at) + 1;
  }
}

double emulated_uplink::bits_between(clock::time_point a, clock::time_point b) const {
  if (b <= a) return 0;
  if (!trace_) return std::numeric_limits<double>::infinity();
  double from = std::max(0.0, seconds_of(a)), to = std::max(0.0, seconds_of(b)), bits = 0;
  while (from < to) {
    double until = std::min(to, std::floor(from) + 1);
    bits += mbps_at(at_seconds(from)) * 1e6 * (until - from);
    from = until;
  }
  return bits;
}

const emulated_uplink::transfer& emulated_uplink::send(uint64_t id, clock::time_point at, double bytes) {
  frames_.push_back({id, at, {}, {}, bytes});
  schedule(frames_.size() - 1, free_);
  return frames_.back();
}

void emulated_uplink::schedule(size_t from, clock::time_point free) {
  for (size_t i = from; i < frames_.size(); ++i) {
    auto& f = frames_[i];
    f.start = std::max(f.captured, free);
    f.end = f.start + std::chrono::duration_cast<clock::duration>(
                          std::chrono::duration<double, std::milli>(transfer_ms(f.start, f.bytes * 8)));
    free = f.end;
  }
  free_ = free;
}

double emulated_uplink::backlog_bytes(clock::time_point t) const {
  double out = 0;
  for (auto& f : frames_)
    if (f.end > t) out += f.start >= t ? f.bytes : std::max(0.0, f.bytes - bits_between(f.start, t) / 8);
  return out;
}

const emulated_uplink::transfer* emulated_uplink::crossing(clock::time_point t) const {
  for (auto& f : frames_)
    if (f.end > t) return f.start <= t ? &f : nullptr;
  return nullptr;
}

bool emulated_uplink::cancel(clock::time_point t) {
  auto it = std::find_if(frames_.begin(), frames_.end(), [&](auto& f) { return f.end > t; });
  if (it == frames_.end() || it->start > t) return false;
  auto i = static_cast<size_t>(it - frames_.begin());
  transfer gave_up = *it;
  gave_up.bytes = std::min(gave_up.bytes, bits_between(gave_up.start, t) / 8);
  gave_up.end = t;
  if (i < reported_)
    --reported_;  // already given as ended: not again
  else
    unreported_.push_back(gave_up);
  frames_.erase(it);
  schedule(i, t);
  return true;
}

std::vector<emulated_uplink::transfer> emulated_uplink::ended(clock::time_point t) {
  std::vector<transfer> out;
  for (auto it = unreported_.begin(); it != unreported_.end();)
    if (it->end <= t) {
      out.push_back(*it);
      it = unreported_.erase(it);
    } else {
      ++it;
    }
  for (; reported_ < frames_.size() && frames_[reported_].end <= t; ++reported_) out.push_back(frames_[reported_]);
  std::stable_sort(out.begin(), out.end(), [](auto& a, auto& b) { return a.end < b.end; });
  return out;
}

std::vector<emulated_uplink::transfer> emulated_uplink::arrived(clock::time_point t) {
  std::vector<transfer> out;
  while (!frames_.empty() && frames_.front().end + half_rtt_ <= t) {
    if (reported_ > 0)
      --reported_;
    else
      unreported_.push_back(frames_.front());
    out.push_back(frames_.front());
    frames_.pop_front();
  }
  return out;
}

std::optional<emulated_uplink::clock::time_point> emulated_uplink::next_arrival() const {
  if (frames_.empty()) return std::nullopt;
  return frames_.front().end + half_rtt_;
}

}  // namespace sloserve
