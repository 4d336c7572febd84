#include "scheduling/transit_guard.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace sloserve::sched {

double transit_guard::path::base_s() const {
  double least = std::numeric_limits<double>::infinity();
  for (auto& [second, t] : bases) least = std::min(least, t);
  return std::isfinite(least) ? least : 0;
}

void transit_guard::window_min::push(double at, double v) {
  while (!q.empty() && q.back().second >= v) q.pop_back();
  q.emplace_back(at, v);
}

void transit_guard::window_min::trim(double from) {
  while (!q.empty() && q.front().first < from) q.pop_front();
}

transit_guard::path& transit_guard::trimmed(const std::string& node, double now_s) {
  auto& p = paths_[node];
  double from = now_s - o_.interval_s;
  while (!p.recent.empty() && p.recent.front().first < from) {
    p.worker_sum -= p.recent.front().second;
    p.recent.pop_front();
  }
  if (p.recent.empty()) p.worker_sum = 0;  // no drift from the sums
  p.transit.trim(from);
  p.queued.trim(from);
  while (!p.replies.empty() && p.replies.front() < now_s - o_.rate_window_s) p.replies.pop_front();
  while (!p.bases.empty() && p.bases.front().first + 1 < now_s - o_.base_window_s) p.bases.pop_front();
  return p;
}

void transit_guard::on_reply(const std::string& node, double now_s, double round_s, double worker_s, double budget_s) {
  auto& p = trimmed(node, now_s);
  worker_s = std::clamp(worker_s, 0.0, std::max(0.0, round_s));
  double transit_s = std::max(0.0, round_s - worker_s);
  p.recent.emplace_back(now_s, worker_s);
  p.worker_sum += worker_s;
  p.transit.push(now_s, transit_s);
  // Standing means every reply of the interval queued over standing_share of its budget:
  // transit - base > share × budget for all, that is min(transit - share × budget) > base. A
  // reply without a budget never stands.
  p.queued.push(now_s,
                budget_s > 0 ? transit_s - o_.standing_share * budget_s : -std::numeric_limits<double>::infinity());
  p.replies.push_back(now_s);
  if (p.first_s < 0) p.first_s = now_s;
  double second = std::floor(now_s);
  if (p.bases.empty() || p.bases.back().first != second)
    p.bases.emplace_back(second, transit_s);
  else
    p.bases.back().second = std::min(p.bases.back().second, transit_s);
}

bool transit_guard::standing(const std::string& node, double now_s) {
  auto& p = trimmed(node, now_s);
  return !p.queued.empty() && p.queued.least() > p.base_s();
}

double transit_guard::one_way_s(const std::string& node, double now_s) {
  auto& p = trimmed(node, now_s);
  return p.transit.empty() ? 0 : p.transit.least() / 2;
}

std::optional<transit_guard::backed_up> transit_guard::congested(const std::string& node, double now_s, double left_s,
                                                                 uint32_t in_flight) {
  if (!standing(node, now_s)) return std::nullopt;
  auto& p = paths_[node];
  // Replies per second over the rate window, or since the first reply where that is shorter.
  double span = std::clamp(now_s - p.first_s, 1e-3, o_.rate_window_s);
  double rate = static_cast<double>(p.replies.size()) / span;             // > 0: standing has replies
  double worker_s = p.worker_sum / static_cast<double>(p.recent.size());  // standing: the interval has replies
  double base = p.base_s();
  double wait_s = std::max(0.0, in_flight / rate - worker_s - base);
  if (wait_s <= o_.wait_share * left_s) return std::nullopt;
  return backed_up{p.transit.least(), base, in_flight, rate, wait_s};
}

std::string transit_guard::refusal(const std::string& node, double now_s, double left_s, uint32_t in_flight) {
  auto c = congested(node, now_s, left_s, in_flight);
  if (!c) return {};
  return fmt::format(
      "the path to worker '{}' is backed up: replies spend {:.1f} ms on it (it takes {:.1f} ms unloaded), and {} "
      "invocations in flight at {:.0f} replies/s would queue {:.1f} ms on it of the {:.1f} ms left",
      node, 1e3 * c->transit_s, 1e3 * c->base_s, c->in_flight, c->rate, 1e3 * c->wait_s, 1e3 * left_s);
}

}  // namespace sloserve::sched
