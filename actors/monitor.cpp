// The monitor folds load reports into what the control plane plans on: workers' per-session
// rates, latencies and drops (for the scaler and operators) and frontends' per-pipeline query and
// stage counts (for the controller's epochs). Nothing else smooths measurements.

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
};

using self_ptr = monitor_actor::stateful_pointer<monitor_state>;

// Weight of the newest beacon in the moving averages.
constexpr double smoothing = 0.5;

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
