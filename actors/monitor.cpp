// The monitor folds load reports into what the control plane plans on: workers' per-session
// rates, latencies and drops (for the scaler and operators), frontends' per-pipeline query and
// stage counts (for the controller's epochs), and the links to workers: the workers behind slow
// links (from the frontends' transfer times; the controller plans without them) and the models
// too large for a link (from the frontends' probes; planned elsewhere). Nothing else smooths
// measurements.

#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>
#include <optional>

#include "actors/client_registry.hpp"
#include "actors/roles.hpp"
#include "scheduling/link_estimate.hpp"
#include "scheduling/profile_drift.hpp"

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
  // Per (frontend, worker): the latest probe estimate of the link's ms per MB, and when it came.
  std::map<std::pair<std::string, std::string>, std::pair<double, caf::actor_clock::time_point>> probed;
  std::map<std::pair<std::string, std::string>, caf::actor_clock::time_point> far_until;  // (worker, model)
  std::map<std::string, caf::actor_clock::time_point> unheard_until;  // workers a frontend does not hear
  link_verdicts told;                                                 // what the controller has
  // Per (client, pipeline): the latest a frontend reported of it, and when.
  std::map<std::pair<std::string, std::string>, std::pair<caf::actor_clock::time_point, msg::client_load>> clients;
  // How each model's batches run against its profile (scheduler.profile_drift; none at 0).
  std::optional<sched::profile_drift> drift;
};

using self_ptr = monitor_actor::stateful_pointer<monitor_state>;

// Weight of the newest beacon in the moving averages.
constexpr double smoothing = 0.5;

// A worker whose invocations spend more than this outside its queue and device (the way there and
// back) is behind a slow link: a tenth of the tightest SLO, at least 5 ms. Planning avoids it for
// `slow_for`, then tries it again. A model whose request would take longer than this to cross a
// worker's link (by the frontends' probes) is kept off that worker as long.
double slow_link_ms(const cluster_config& cfg) {
  double tightest = 1e18;
  for (auto& p : cfg.pipelines) tightest = std::min(tightest, p.slo_ms);
  return std::max(5.0, 0.1 * tightest);
}
constexpr auto slow_for = std::chrono::seconds(30);
constexpr uint64_t slow_evidence = 5;                   // results in a window before a link is judged
constexpr auto probe_fresh = std::chrono::seconds(10);  // probe estimates older than this are forgotten
// A worker some frontend does not hear (an asymmetric partition: the controller may still hear
// it) is planned without while frontends report it, and this long after the last report.
constexpr auto unheard_for = std::chrono::seconds(3);

void judge_links(self_ptr self, const msg::load_report& r) {
  auto& st = self->state;
  auto now = self->clock().now();
  auto limit = slow_link_ms(*st.cfg);
  for (auto& l : r.links) {
    if (l.ms_per_mb >= 0) st.probed[{r.node, l.node}] = {l.ms_per_mb, now};
    if (l.unheard) {
      if (st.unheard_until.find(l.node) == st.unheard_until.end())
        spdlog::warn("{}: {} does not hear {}: planning without it while that lasts", st.net->self_name(), r.node,
                     l.node);
      st.unheard_until[l.node] = now + unheard_for;
    }
    if (l.results < slow_evidence || l.transfer_ms <= limit) continue;
    if (st.slow_until.find(l.node) == st.slow_until.end())
      spdlog::warn(
          "{}: invocations to {} spend {:.1f} ms on the way there and back (over {:.1f} ms): planning "
          "without it for {} s",
          st.net->self_name(), l.node, l.transfer_ms, limit, slow_for.count());
    st.slow_until[l.node] = now + slow_for;
  }
  std::erase_if(st.slow_until, [&](auto& kv) { return kv.second <= now; });
  std::erase_if(st.unheard_until, [&](auto& kv) { return kv.second <= now; });
  // The worst any frontend measured, per worker.
  std::erase_if(st.probed, [&](auto& kv) { return now - kv.second.second > probe_fresh; });
  std::map<std::string, double> per_mb;
  for (auto& [key, v] : st.probed) per_mb[key.second] = std::max(per_mb[key.second], v.first);
  for (auto& [node, models] : sched::models_too_far(per_mb, st.cfg->models, limit))
    for (auto& m : models) {
      std::pair key{node, m};
      if (st.far_until.find(key) == st.far_until.end()) {
        auto* spec = st.cfg->find_model(m);
        auto bytes = spec ? sched::request_bytes(*spec) : 0;
        spdlog::warn(
            "{}: the link to {} adds {:.0f} ms per MB: a request of '{}' ({} bytes) would take {:.1f} ms "
            "to cross it (over {:.1f} ms); planning '{}' elsewhere for {} s",
            st.net->self_name(), node, per_mb[node], m, bytes, static_cast<double>(bytes) / 1e6 * per_mb[node], limit,
            m, slow_for.count());
      }
      st.far_until[key] = now + slow_for;
    }
  std::erase_if(st.far_until, [&](auto& kv) { return kv.second <= now; });
  link_verdicts v;
  for (auto& [node, until] : st.slow_until) v.slow.push_back(node);
  for (auto& [node, until] : st.unheard_until)
    if (!st.slow_until.count(node)) v.slow.push_back(node);
  std::sort(v.slow.begin(), v.slow.end());
  for (auto& [key, until] : st.far_until) v.far[key.first].push_back(key.second);
  if (v == st.told) return;
  st.told = v;
  if (auto ctl = st.net->local().controller) self->send(ctl, std::move(v));
}

// A frontend's or a worker's load report: clients (the controller hears of one that moved), the
// pipelines' queries, links, and each device session's rates.
void on_report(self_ptr self, msg::load_report& r) {
  auto& st = self->state;
  bool moved = false;  // a client's uplink, much or across a size's rate (sched::uplink_moved)
  for (auto& c : r.clients) {
    auto key = std::make_pair(c.client, c.pipeline);
    auto& slot = st.clients[key];
    double was = slot.second.uplink_mbps;
    moved |= sched::uplink_moved(was, c.uplink_mbps, carried_at_mbps(c.images, c.rate_hz));
    slot = {self->clock().now(), std::move(c)};
  }
  if (auto ctl = st.net->local().controller; moved && ctl) self->send(ctl, clients_atom::value);
  if (!r.pipelines.empty() || !r.links.empty()) judge_links(self, r);
  for (auto& pl : r.pipelines)
    if (auto* p = st.cfg->find_pipeline(pl.pipeline)) {
      std::vector<sched::fragment_count> fragments;
      for (auto& f : pl.fragments)
        fragments.push_back({static_cast<int>(f.start_layer), f.slo_ms, f.queries, static_cast<int>(f.clients)});
      sched::add_shed(pl.queries, pl.stage_invocations, pl.fallthroughs, pl.shed);
      st.pipelines->count(static_cast<size_t>(p - st.cfg->pipelines.data()), pl.queries, pl.stage_invocations,
                          pl.fallthroughs, fragments, r.node, r.window_s);
    }
  if (r.window_s <= 0) return;
  // A worker reports every session its devices hold: the ones it no longer holds are gone.
  std::erase_if(st.sessions, [&](auto& kv) {
    auto& [node, device, model] = kv.first;
    return node == r.node && !r.pipelines.size() && std::none_of(r.sessions.begin(), r.sessions.end(), [&](auto& s) {
             return s.device == device && s.model == model;
           });
  });
  for (auto& s : r.sessions) {
    auto& x = st.sessions[{r.node, s.device, s.model}];
    x.node = r.node;
    x.device = s.device;
    x.model = s.model;
    x.rate = smoothing * (s.arrived / r.window_s) + (1 - smoothing) * x.rate;
    x.last_rate = static_cast<double>(s.arrived) / r.window_s;
    if (s.arrived) x.budget_ms = s.mean_budget_ms;
    x.drop_rate = smoothing * (s.dropped / r.window_s) + (1 - smoothing) * x.drop_rate;
    if (s.completed) x.mean_latency_ms = smoothing * s.mean_latency_ms + (1 - smoothing) * x.mean_latency_ms;
    x.queue_length = s.queue_length;
    x.queue_budgets_ms = s.queue_budgets_ms;
    if (s.arrived) x.arrival_budgets_ms = s.arrival_budgets_ms;
    if (st.drift) st.drift->add(s.model, s.exec_ms, s.expected_exec_ms, s.exec_batches);
  }
  if (!st.drift) return;
  profile_scales changed{st.drift->take_changes()};
  if (changed.scales.empty()) return;
  if (auto scaler = st.net->local().scaler) self->send(scaler, changed);
  if (auto ctl = st.net->local().controller) self->send(ctl, std::move(changed));
}

}  // namespace

monitor_actor spawn_monitor(caf::actor_system& sys, actor_args args) {
  return sys.spawn([args](self_ptr self) -> monitor_actor::behavior_type {
    auto& st = self->state;
    st.cfg = args.cfg;
    st.net = args.net;
    st.pipelines.emplace(pipeline_load_of(*st.cfg));
    if (st.cfg->scheduler.profile_drift > 0) {
      sched::drift_options d;
      d.threshold = st.cfg->scheduler.profile_drift;
      d.windows = st.cfg->scheduler.profile_drift_windows;
      st.drift.emplace(d);
    }
    st.window_start = self->clock().now();
    self->delayed_send(self, std::chrono::seconds(10), beacon_atom::value);
    return {
        [=](msg::load_report& r) { on_report(self, r); },
        [=](new_config& c) {
          // Pipelines that stay keep their rates: the controller plans the changed cluster for them.
          auto& st = self->state;
          std::vector<size_t> stages;
          std::vector<std::optional<size_t>> from;
          for (auto& p : c.cfg->pipelines) {
            stages.push_back(p.stages.size());
            auto* was = st.cfg->find_pipeline(p.name);
            from.push_back(was ? std::optional<size_t>(static_cast<size_t>(was - st.cfg->pipelines.data()))
                               : std::nullopt);
          }
          st.pipelines->remap(stages, from);
          st.cfg = c.cfg;
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
        [=](clients_atom) {
          // Clients some frontend reported within the last two seconds; the others are gone.
          auto& st = self->state;
          auto now = self->clock().now();
          std::erase_if(st.clients, [&](auto& kv) { return now - kv.second.first > std::chrono::seconds(2); });
          std::vector<msg::client_load> out;
          for (auto& [k, c] : st.clients) out.push_back(c.second);
          return out;
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
