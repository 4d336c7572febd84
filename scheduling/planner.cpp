#include "scheduling/planner.hpp"

#include <algorithm>
#include <cmath>

#include "scheduling/packing.hpp"

namespace sloserve::sched {
namespace {

constexpr double eps = 1e-9;

double l_ms(const session& s, int b) {
  return s.model->profile.latency_ms_at(b);
}

}  // namespace

plan nexus_planner::make_impl(const std::vector<session>& ss, const device_caps& caps, const plan* previous,
                              const std::vector<session>* previous_sessions, const batch_tables& tables) const {
  return squishy_packing(ss, caps, tables).make(previous, previous_sessions);
}

plan batch_oblivious_planner::make_impl(const std::vector<session>& ss, const device_caps& caps, const plan*,
                                        const std::vector<session>*, const batch_tables& tables) const {
  plan out;
  struct item {
    size_t s;
    int batch;
    double share;  // of one device
    double T;
  };
  std::vector<item> items;
  int next_id = 0;
  for (size_t i = 0; i < ss.size(); ++i) {
    if (ss[i].rate <= 0) continue;
    auto& t = tables.of(*ss[i].model);
    int B = t.saturating_batch(ss[i].slo_ms);
    if (!B) {
      out.infeasible.push_back(i);
      continue;
    }
    double T = B / t.ms(B) * 1000;
    double share = ss[i].rate / T;
    while (share >= 1 - eps) {
      auto d = dedicated_device(ss, i, B, T, tables);
      d.id = next_id++;
      out.devices.push_back(std::move(d));
      share -= 1;
    }
    if (share > 1e-6) items.push_back({i, B, share, T});
  }
  std::sort(items.begin(), items.end(), [](const item& a, const item& b) { return a.share > b.share; });
  std::vector<device_plan> bins;
  for (auto& it : items) {
    bool done = false;
    for (auto& bin : bins) {
      if (bin.occupancy + it.share > 1 + eps) continue;
      auto as = bin.sessions;
      as.push_back({it.s, it.batch, it.share * it.T});
      double mem = memory_of(as, ss);
      if (caps.memory_mb > 0 && mem > caps.memory_mb + eps) continue;
      bin.sessions = std::move(as);
      bin.memory_mb = mem;
      bin.occupancy += it.share;
      done = true;
      break;
    }
    if (done) continue;
    device_plan bin;
    bin.sessions.push_back({it.s, it.batch, it.share * it.T});
    bin.occupancy = it.share;
    bin.memory_mb = memory_of(bin.sessions, ss);
    bins.push_back(std::move(bin));
  }
  for (auto& b : bins) {
    b.id = next_id++;
    // Each session runs its own best batch; the cycle is their sum.
    for (auto& a : b.sessions) b.duty_cycle_ms += l_ms(ss[a.session], a.batch);
    out.devices.push_back(std::move(b));
  }
  return out;
}

std::vector<std::string> check_plan(const plan& p, const std::vector<session>& ss, const device_caps& caps) {
  std::vector<std::string> bad;
  std::vector<double> covered(ss.size(), 0);
  auto where = [&](const device_plan& d) { return "device " + std::to_string(d.id); };
  for (auto& d : p.devices) {
    double busy = 0;
    for (auto& a : d.sessions) {
      auto& s = ss[a.session];
      double l = l_ms(s, a.batch);
      covered[a.session] += a.rate;
      if (a.batch > s.model->batch_limit())
        bad.push_back(where(d) + ": " + s.model->name + " batch " + std::to_string(a.batch) + " over its limit");
      if (d.dedicated) {
        if (2 * l > s.slo_ms + eps) bad.push_back(where(d) + ": " + s.model->name + " worst case 2·l(B) over its SLO");
        if (a.rate > a.batch / l * 1000 + 1e-6)
          bad.push_back(where(d) + ": " + s.model->name + " rate over its throughput");
        continue;
      }
      busy += l;
      if (l + d.duty_cycle_ms > s.slo_ms + eps)
        bad.push_back(where(d) + ": " + s.model->name + " worst case duty cycle + l(b) over its SLO");
      if (a.batch + 1e-6 < d.duty_cycle_ms * a.rate / 1000)
        bad.push_back(where(d) + ": " + s.model->name + " batch too small for its rate in one cycle");
    }
    if (!d.dedicated && busy > d.duty_cycle_ms + eps) bad.push_back(where(d) + ": batches overrun the duty cycle");
    if (caps.memory_mb > 0 && memory_of(d.sessions, ss) > caps.memory_mb + eps)
      bad.push_back(where(d) + ": over memory");
  }
  for (size_t i = 0; i < ss.size(); ++i) {
    if (std::find(p.infeasible.begin(), p.infeasible.end(), i) != p.infeasible.end()) continue;
    if (covered[i] + 1e-6 < ss[i].rate)
      bad.push_back("session " + ss[i].model->name + " has " + std::to_string(covered[i]) + " of " +
                    std::to_string(ss[i].rate) + " req/s placed");
  }
  return bad;
}

}  // namespace sloserve::sched
