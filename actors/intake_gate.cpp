#include "actors/intake_gate.hpp"

#include <fmt/format.h>

namespace sloserve {

std::string intake_gate::admit(int64_t now_ns, double slo_s) {
  std::lock_guard lock(mu_);
  auto c = guard_.congested("intake", static_cast<double>(now_ns) / 1e9, slo_s, waiting_ + 1);
  if (!c) {
    ++waiting_;
    return {};
  }
  return fmt::format(
      "the frontend's intake is backed up: requests wait {:.1f} ms to be taken in, and {} waiting at {:.0f} "
      "taken in a second would wait {:.1f} ms of the {:.1f} ms SLO",
      1e3 * c->transit_s, c->in_flight, c->rate, 1e3 * c->wait_s, 1e3 * slo_s);
}

void intake_gate::taken(int64_t now_ns, int64_t handed_ns, double slo_s) {
  std::lock_guard lock(mu_);
  if (waiting_ > 0) --waiting_;
  guard_.on_reply("intake", static_cast<double>(now_ns) / 1e9, static_cast<double>(now_ns - handed_ns) / 1e9, 0, slo_s);
}

uint32_t intake_gate::waiting() const {
  std::lock_guard lock(mu_);
  return waiting_;
}

}  // namespace sloserve
