// The monitor folds load reports into what the control plane plans on: workers' per-session
// rates, latencies and drops (for the scaler and operators), frontends' per-pipeline query and
// stage counts (for the controller's epochs), and the workers behind slow links (from the
// frontends' transfer times; the controller plans without them). Nothing else smooths
// measurements.

#include <spdlog/spdlog.h>

#include <map>
#include <optional>

#include "actors/roles.hpp"

namespace sloserve {
namespace {

struct monitor_state {
  static inline const char* name = "monitor";
  std::shared_ptr<const cluster_config> cfg;
  std::shared_ptr<link> net;
  std::map<std::tuple<std::string, uint32_t, std::string>, session_rate> sessions;
  std::optional<sched::pipeline_load> pipelines;
  caf::actor_clock::time_point window_start;
  std::map<std::string, caf::actor_clock::time_point> slow_until;  // workers behind slow links
  std::vector<std::string> told;                                   // the slow set the controller has
};

using self_ptr = monitor_actor::stateful_pointer<monitor_state>;

// Weight of the newest beacon in the moving averages.
constexpr double smoothing = 0.5;

// A worker whose invocations spend more than this outside its queue and device (the way there and
// back) is behind a slow link: a tenth of the tightest SLO, at least 5 ms. Planning avoids it for
// `slow_for`, then tries it again.
double slow_link_ms(const cluster_config& cfg) {
  double tightest = 1e18;
  for (auto& p : cfg.pipelines) tightest = std::min(tightest, p.slo_ms);
  return std::max(5.0, 0.1 * tightest);
}
constexpr auto slow_for = std::chrono::seconds(30);
constexpr uint64_t slow_evidence = 5;  // results in a window before a link is judged

void judge_links(self_ptr self, const msg::load_report& r) {
  auto& st = self->state;
  auto now = self->clock().now();
  auto limit = slow_link_ms(*st.cfg);
  for (auto& l : r.links) {
    if (l.results < slow_evidence || l.transfer_ms <= limit) continue;
    if (st.slow_until.find(l.node) == st.slow_until.end())
      spdlog::warn(
          "{}: invocations to {} spend {:.1f} ms on the way there and back (over {:.1f} ms): planning "
          "without it for {} s",
          st.net->self_name(), l.node, l.transfer_ms, limit, slow_for.count());
    st.slow_until[l.node] = now + slow_for;
  }
  std::erase_if(st.slow_until, [&](auto& kv) { return kv.second <= now; });
  std::vector<std::string> slow;
  for (auto& [node, until] : st.slow_until) slow.push_back(node);
  if (slow == st.told) return;
  st.told = slow;
  if (auto ctl = st.net->local().controller) self->send(ctl, slow_atom::value, slow);
}

}  // namespace

monitor_actor spawn_monitor(caf::actor_system& sys, actor_args args) {
  return sys.spawn([args](self_ptr self) -> monitor_actor::behavior_type {
    auto& st = self->state;
    st.cfg = args.cfg;
    st.net = args.net;
    std::vector<size_t> stages;
    for (auto& p : st.cfg->pipelines) stages.push_back(p.stages.size());
    st.pipelines.emplace(stages, sched::settle_windows(st.cfg->runtime.beacon_ms));
    st.window_start = self->clock().now();
    self->delayed_send(self, std::chrono::seconds(10), beacon_atom::value);
    return {
        [=](msg::load_report& r) {
          auto& st = self->state;
          if (!r.pipelines.empty()) judge_links(self, r);
          for (auto& pl : r.pipelines)
            if (auto* p = st.cfg->find_pipeline(pl.pipeline))
              st.pipelines->count(static_cast<size_t>(p - st.cfg->pipelines.data()), pl.queries, pl.stage_invocations);
          if (r.window_s <= 0) return;
          // A worker reports every session its devices hold: the ones it no longer holds are gone.
          std::erase_if(self->state.sessions, [&](auto& kv) {
            auto& [node, device, model] = kv.first;
            return node == r.node && !r.pipelines.size() &&
                   std::none_of(r.sessions.begin(), r.sessions.end(),
                                [&](auto& s) { return s.device == device && s.model == model; });
          });
          for (auto& s : r.sessions) {
            auto& x = self->state.sessions[{r.node, s.device, s.model}];
            x.node = r.node;
            x.device = s.device;
            x.model = s.model;
            x.rate = smoothing * (s.arrived / r.window_s) + (1 - smoothing) * x.rate;
            x.last_rate = static_cast<double>(s.arrived) / r.window_s;
            if (s.arrived) x.budget_ms = s.mean_budget_ms;
            x.drop_rate = smoothing * (s.dropped / r.window_s) + (1 - smoothing) * x.drop_rate;
            if (s.completed) x.mean_latency_ms = smoothing * s.mean_latency_ms + (1 - smoothing) * x.mean_latency_ms;
            x.queue_length = s.queue_length;
          }
        },
        [=](beacon_atom) {
          double total = 0, drops = 0;
          for (auto& [k, x] : self->state.sessions) total += x.rate, drops += x.drop_rate;
          if (total > 0)
            spdlog::info("{}: monitor: {:.1f} invocations/s across {} sessions, {:.1f} drops/s",
                         self->state.net->self_name(), total, self->state.sessions.size(), drops);
          self->delayed_send(self, std::chrono::seconds(10), beacon_atom::value);
        },
        [=](rates_atom) {
          auto& st = self->state;
          auto now = self->clock().now();
          st.pipelines->close_window(std::chrono::duration<double>(now - st.window_start).count());
          st.window_start = now;
          return st.pipelines->rates();
        },
        [=](stats_atom) {
          cluster_load out;
          for (auto& [k, x] : self->state.sessions) out.sessions.push_back(x);
          return out;
        },
    };
  });
}

}  // namespace sloserve
