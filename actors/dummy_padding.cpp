#include "actors/dummy_padding.hpp"

#include <algorithm>

#include "scheduling/placement.hpp"

namespace sloserve {

void dummy_padding::apply(const msg::routing_table& t) {
  std::vector<source> fresh;
  double share = 1.0 / std::max<uint32_t>(1, t.frontends);
  for (auto& mr : t.routes)
    for (auto& inst : mr.instances) {
      if (inst.dummy_rate <= 0) continue;
      source s;
      s.d = {mr.model, inst.node, inst.device, tightest_budget_ms(t.budgets, mr.model)};
      if (!(s.d.budget_ms > 0)) continue;  // no stage runs it
      s.rate = inst.dummy_rate * share;
      auto old = std::find_if(sources_.begin(), sources_.end(), [&](const source& o) {
        return o.d.model == s.d.model && o.d.node == s.d.node && o.d.device == s.d.device;
      });
      if (old != sources_.end()) s.credit = old->credit;
      fresh.push_back(std::move(s));
    }
  sources_ = std::move(fresh);
}

std::vector<dummy_padding::dummy> dummy_padding::due(double now_s) {
  std::vector<dummy> out;
  double dt = last_s_ < 0 ? 0 : std::clamp(now_s - last_s_, 0.0, 1.0);
  last_s_ = now_s;
  for (auto& s : sources_) {
    s.credit += s.rate * dt;
    for (; s.credit >= 1; s.credit -= 1) out.push_back(s.d);
  }
  return out;
}

double dummy_padding::rate() const {
  double r = 0;
  for (auto& s : sources_) r += s.rate;
  return r;
}

}  // namespace sloserve
