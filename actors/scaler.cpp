// The scaler (scaler: in the cluster file): every vertical period it reads the monitor's
// per-second rates, queues and budgets, and every horizontal period it also consults the rate
// predictor; the policy (fa2, sponge or biscale; scheduling/autoscaler) turns them into a shape
// per stage, which the provisioner realises: instances started, stopped and resized in place.

#include <spdlog/spdlog.h>

#include <cmath>
#include <deque>
#include <set>

#include "actors/provisioner.hpp"
#include "actors/roles.hpp"
#include "scheduling/autoscaler.hpp"
#include "scheduling/predictor.hpp"
#include "scheduling/query_analyzer.hpp"

namespace sloserve {
namespace {

using clock_time = caf::actor_clock::time_point;

struct stage_info {
  size_t pipeline = 0, stage = 0;
  const model_spec* model = nullptr;
  core_latency l;
  double split_budget_ms = 0;  // the stage's share of the SLO: the budget when nothing was measured
  std::unique_ptr<sched::rate_predictor> predictor;
  std::deque<double> recent;  // per-period rates over the last horizontal period
  double poll_sum = 0;        // rates seen by the polls of the current vertical period
  int poll_count = 0;
  sched::stage_shape shape;
  sched::scale_stage last;    // what the policy saw last
  bool told_no_room = false;  // warned that its next instance found no place
};

struct scaler_state {
  static inline const char* name = "scaler";
  std::shared_ptr<const cluster_config> cfg;
  std::shared_ptr<link> net;
  std::unique_ptr<provisioner> prov;
  std::vector<stage_info> stages;
  uint64_t ticks = 0;  // vertical periods
  int ticks_per_horizontal = 10;
  uint64_t polls = 0;  // looks at the monitor: every load report, several per vertical period
  int polls_per_tick = 1;
  clock_time last_tick;
  bool started = false;
  scaler_stats stats;
  // Instances that have served: their workers acknowledged them (loaded the model). One that
  // has not yet carries nothing, so instance 0 of its stage keeps its cores until it does.
  std::set<uint64_t> serving;
  std::vector<std::string> up;          // workers up, as the controller last said
  std::set<instance_key> acknowledged;  // instances the controller routes to
};

using self_ptr = scaler_actor::stateful_pointer<scaler_state>;

// How often the scaler looks at the monitor: at each load report, or each vertical period if
// that is shorter.
std::chrono::milliseconds poll_period(const cluster_config& cfg) {
  auto per = std::max<long>(1, std::lround(cfg.scaler.vertical_s * 1000));
  auto polls = std::max<long>(1, std::lround(cfg.scaler.vertical_s * 1000 / cfg.runtime.beacon_ms));
  return std::chrono::milliseconds(std::max<long>(1, per / polls));
}

// l(b, c) of a model: its `cores` entry, else its profile at any core count.
core_latency latency_of(const model_spec& m) {
  if (m.cores) return *m.cores;
  core_latency l;
  // l(b) = alpha·b + beta does not change with cores: delta·b + eta.
  l.delta = m.profile.latency_ms_at(2) - m.profile.latency_ms_at(1);
  l.eta = m.profile.latency_ms_at(1) - l.delta;
  return l;
}

// Hands the provisioner every stage's budget, `budget(stage)`, for the next deployment's table.
template <class F>
void route_budgets(scaler_state& st, F budget) {
  std::vector<msg::stage_budget> budgets;
  for (auto& s : st.stages)
    budgets.push_back(
        {st.cfg->pipelines[s.pipeline].name, st.cfg->pipelines[s.pipeline].stages[s.stage].name, budget(s)});
  st.prov->set_budgets(std::move(budgets));
}

// Sponge and biscale: each pipeline's SLO split by the query analyzer (pipelines/) so that the
// one-core instances it needs, sum of rate_i / T_i(budget_i), are fewest, at the stages'
// measured rates (1 each before any). The budgets go to the routing table with the next
// deployment; they change only when a stage's moves by more than 2% of the SLO.
void split_budgets(self_ptr self) {
  auto& st = self->state;
  bool changed = false;
  for (size_t pi = 0; pi < st.cfg->pipelines.size(); ++pi) {
    auto& p = st.cfg->pipelines[pi];
    std::vector<stage_info*> by_stage(p.stages.size(), nullptr);
    for (auto& s : st.stages)
      if (s.pipeline == pi) by_stage[s.stage] = &s;
    std::vector<double> rates;
    for (auto* s : by_stage) rates.push_back(s && s->last.rate > 0 ? s->last.rate : 1.0);
    auto split = dp_split(p, rates, [&](size_t k, double budget) {
      auto* s = by_stage[k];
      return s ? sched::one_core_throughput(s->l, budget, s->model->batch_limit()) : 0.0;
    });
    for (size_t k = 0; k < by_stage.size(); ++k) {
      if (!by_stage[k] || !(split.budget_ms[k] > 0)) continue;
      double& b = by_stage[k]->split_budget_ms;
      if (std::abs(split.budget_ms[k] - b) > 0.02 * p.slo_ms) b = split.budget_ms[k], changed = true;
    }
  }
  if (changed) route_budgets(st, [](const stage_info& s) { return s.split_budget_ms; });
}

// Brings the instances of a stage's model to `shape`: the newest go first, instance 0 is the
// oldest. Make before break: while an instance of the stage is starting (its model loading),
// instance 0 gives up no cores.
void reconcile(self_ptr self, stage_info& s) {
  auto& st = self->state;
  auto& name = s.model->name;
  std::vector<placed_instance> mine;
  for (auto& i : st.prov->instances())
    if (i.model == name) mine.push_back(i);
  while (static_cast<int>(mine.size()) > s.shape.instances) {
    st.prov->stop(mine.back().id);
    mine.pop_back();
    ++st.stats.horizontal_changes;
  }
  bool starting = static_cast<int>(mine.size()) < s.shape.instances ||
                  std::any_of(mine.begin(), mine.end(), [&](auto& i) { return !st.serving.count(i.id); });
  for (size_t k = 0; k < mine.size(); ++k) {
    int cores = k == 0 ? s.shape.cores : 1;
    int batch = k == 0 ? s.shape.batch : s.shape.horizontal_batch;
    if (k == 0 && starting && cores < mine[0].cores) cores = mine[0].cores, batch = mine[0].batch;
    if (mine[k].cores == cores && mine[k].batch == batch) continue;
    if (st.prov->resize(mine[k].id, cores, batch) != mine[k].cores) ++st.stats.vertical_changes;
  }
  while (static_cast<int>(mine.size()) < s.shape.instances) {
    bool first = mine.empty();
    auto id = st.prov->start(name, first ? s.shape.cores : 1, first ? s.shape.batch : s.shape.horizontal_batch);
    if (!id) {
      if (!std::exchange(s.told_no_room, true))
        spdlog::warn(
            "{}: scaler: no room for another instance of '{}' (free device slots, node cores or scaler "
            "limits)",
            st.net->self_name(), name);
      return;
    }
    mine.push_back({*id, name, {}, 0, 0, 0});
    ++st.stats.horizontal_changes;
  }
  s.told_no_room = false;
}

// Instances the controller has acknowledged serve from then on (a resize keeps them serving).
void mark_serving(scaler_state& st) {
  std::set<uint64_t> serving;
  for (auto& i : st.prov->instances())
    if (st.serving.count(i.id) || st.acknowledged.count({i.node, i.device, i.model})) serving.insert(i.id);
  st.serving = std::move(serving);
}

void apply(self_ptr self) {
  auto& st = self->state;
  for (auto& s : st.stages) reconcile(self, s);
  st.prov->commit();
}

// One look at the monitor's view. Every polls_per_tick-th is a vertical period (and every
// ticks_per_horizontal-th of those a horizontal one); in between, the vertical policies may
// only add capacity: a surge is met at the next load report, while capacity is taken away at
// most once a vertical period, sized for the largest rate of the last three periods and of the
// latest report.
void decide(self_ptr self, const cluster_load& load) {
  auto& st = self->state;
  auto& o = st.cfg->scaler;
  double headroom = 1 + st.cfg->scheduler.headroom;
  auto now = self->clock().now();
  double dt = std::chrono::duration<double>(now - st.last_tick).count();
  st.last_tick = now;
  mark_serving(st);
  auto instances = st.prov->instances();
  // Cost of what ran during the period that just ended.
  uint32_t n = static_cast<uint32_t>(instances.size()), cores = 0;
  for (auto& i : instances) cores += static_cast<uint32_t>(i.cores);
  st.stats.seconds += dt;
  st.stats.instance_seconds += n * dt;
  st.stats.core_seconds += cores * dt;
  bool full = ++st.polls % static_cast<uint64_t>(st.polls_per_tick) == 0;
  bool horizontal = full && ++st.ticks % static_cast<uint64_t>(st.ticks_per_horizontal) == 0;
  for (auto& s : st.stages) {
    sched::scale_stage in;
    in.l = s.l;
    in.max_batch = s.model->batch_limit();
    double rate = 0, budget_w = 0, budget_sum = 0;
    for (auto& x : load.sessions) {
      if (x.model != s.model->name) continue;
      rate += x.last_rate;
      budget_sum += x.budget_ms * x.last_rate;
      budget_w += x.last_rate;
    }
    // Instance 0's queue, for Sponge's EDF check.
    for (auto& i : instances)
      if (i.model == s.model->name) {
        for (auto& x : load.sessions)
          if (x.node == i.node && x.device == i.device && x.model == i.model)
            in.queued = static_cast<int>(x.queue_length);
        break;
      }
    in.budget_ms = budget_w > 0 ? budget_sum / budget_w : s.split_budget_ms;
    double sized = rate;
    s.poll_sum += rate;
    ++s.poll_count;
    if (full) {
      // The period's rate: the mean of its polls. It is sized for no less than this poll's
      // rate either: a surge that began within the period is not averaged away.
      rate = s.poll_sum / s.poll_count;
      sized = std::max(sized, rate);
      s.poll_sum = 0;
      s.poll_count = 0;
      s.predictor->observe(rate);
      s.recent.push_back(rate);
      while (static_cast<int>(s.recent.size()) > st.ticks_per_horizontal) s.recent.pop_front();
      for (size_t k = s.recent.size() >= 3 ? s.recent.size() - 3 : 0; k < s.recent.size(); ++k)
        sized = std::max(sized, s.recent[k]);
    }
    in.rate = sized * headroom;
    in.predicted = s.predictor->predict() * headroom;
    auto& p = st.cfg->pipelines[s.pipeline];
    for (size_t c = 0; c < p.stages.size(); ++c)
      for (auto parent : p.stages[c].parents)
        if (parent == s.stage) in.children.push_back(c);
    s.last = in;
  }
  std::vector<sched::stage_shape> before;
  for (auto& s : st.stages) before.push_back(s.shape);
  if (o.policy == scaler_policy::fa2 && horizontal) {
    // FA2 plans each pipeline's DAG at once; stage k of pipeline p is st.stages' entry with it.
    for (size_t pi = 0; pi < st.cfg->pipelines.size(); ++pi) {
      std::vector<size_t> idx(st.cfg->pipelines[pi].stages.size(), SIZE_MAX);
      for (size_t k = 0; k < st.stages.size(); ++k)
        if (st.stages[k].pipeline == pi) idx[st.stages[k].stage] = k;
      std::vector<sched::scale_stage> in;
      for (auto k : idx) in.push_back(st.stages[k].last);
      auto shapes = sched::fa2_shapes(in, st.cfg->pipelines[pi].slo_ms);
      for (size_t j = 0; j < idx.size(); ++j) st.stages[idx[j]].shape = shapes[j];
    }
    route_budgets(st, [](const stage_info& s) { return s.shape.budget_ms; });
  } else if (o.policy == scaler_policy::sponge || o.policy == scaler_policy::biscale) {
    if (horizontal) split_budgets(self);
    for (auto& s : st.stages) {
      sched::stage_shape next;
      if (o.policy == scaler_policy::sponge) {
        next = sched::sponge_shape(s.last, o.max_cores);
      } else {
        next = horizontal ? sched::biscale_horizontal(s.last, s.shape, sched::stable_load(s.recent, o.stable_band),
                                                      o.max_cores)
                          : s.shape;
        next = sched::biscale_vertical(s.last, next, o.max_cores);
      }
      // Between periods only a surge counts: a rate beyond what runs by more than a report's noise.
      bool surge = s.last.rate > 1.25 * sched::shape_capacity(s.l, s.shape) &&
                   sched::shape_capacity(s.l, next) > sched::shape_capacity(s.l, s.shape);
      if (full || surge) s.shape = next;
    }
  }
  for (size_t k = 0; k < st.stages.size(); ++k) {
    auto& s = st.stages[k];
    if (s.shape == before[k]) continue;
    spdlog::info(
        "{}: scaler {}: {}: {} instance(s), instance 0 at {} core(s) batch {}, others batch {} (rate {:.1f}/s, "
        "predicted {:.1f}/s, budget {:.1f} ms)",
        st.net->self_name(), o.policy, s.model->name, s.shape.instances, s.shape.cores, s.shape.batch,
        s.shape.horizontal_batch, s.last.rate, s.last.predicted, s.last.budget_ms);
  }
  apply(self);
  if (horizontal)
    spdlog::info("{}: scaler {}: {} instances, {} cores; so far {:.0f} instance-s, {:.0f} core-s over {:.0f} s",
                 st.net->self_name(), o.policy, n, cores, st.stats.instance_seconds, st.stats.core_seconds,
                 st.stats.seconds);
}

}  // namespace

scaler_actor spawn_scaler(caf::actor_system& sys, actor_args args) {
  return sys.spawn([args](self_ptr self) -> scaler_actor::behavior_type {
    auto& st = self->state;
    st.cfg = args.cfg;
    st.net = args.net;
    auto& o = st.cfg->scaler;
    st.ticks_per_horizontal = std::max(1, static_cast<int>(std::lround(o.horizontal_s / o.vertical_s)));
    st.polls_per_tick = std::max(1, static_cast<int>(std::lround(o.vertical_s * 1000 / st.cfg->runtime.beacon_ms)));
    st.prov = std::make_unique<local_provisioner>(*st.cfg, [self](deployment d) {
      if (auto ctl = self->state.net->local().controller) self->send(ctl, std::move(d));
    });
    for (size_t pi = 0; pi < st.cfg->pipelines.size(); ++pi) {
      auto& p = st.cfg->pipelines[pi];
      auto split = even_split(p);
      for (size_t k = 0; k < p.stages.size(); ++k) {
        stage_info s;
        s.pipeline = pi;
        s.stage = k;
        s.model = &st.cfg->models[p.stages[k].model_index];
        s.l = latency_of(*s.model);
        s.split_budget_ms = split.budget_ms[k];
        s.predictor = sched::make_rate_predictor(o.predictor);
        st.stages.push_back(std::move(s));
      }
    }
    st.last_tick = self->clock().now();
    return {
        [=](start_atom) {
          auto& st = self->state;
          if (std::exchange(st.started, true)) return;
          spdlog::info("{}: scaler {}: vertical every {} s, horizontal every {} s, predictor {}", st.net->self_name(),
                       st.cfg->scaler.policy, st.cfg->scaler.vertical_s, st.cfg->scaler.horizontal_s,
                       st.cfg->scaler.predictor);
          st.last_tick = self->clock().now();
          // Routed with the first deployment (once the workers are known).
          if (st.cfg->scaler.policy == scaler_policy::sponge || st.cfg->scaler.policy == scaler_policy::biscale)
            split_budgets(self);
          self->delayed_send(self, poll_period(*st.cfg), tick_atom::value);
        },
        [=](tick_atom) {
          auto& st = self->state;
          self->delayed_send(self, poll_period(*st.cfg), tick_atom::value);
          auto mon = st.net->local().monitor;
          if (!mon) return;
          self->request(mon, caf::infinite, stats_atom::value).then([=](const cluster_load& load) {
            decide(self, load);
          });
        },
        [=](worker_set& w) {
          auto& st = self->state;
          st.acknowledged = {w.acknowledged.begin(), w.acknowledged.end()};
          mark_serving(st);
          if (w.up == st.up) return;
          // Instances on workers that went away are gone; the shapes bring them back elsewhere.
          st.up = std::move(w.up);
          st.prov->set_workers_up(st.up);
          apply(self);
        },
        [=](stats_atom) {
          auto& st = self->state;
          auto out = st.stats;
          for (auto& i : st.prov->instances()) ++out.instances, out.cores += static_cast<uint32_t>(i.cores);
          return out;
        },
    };
  });
}

}  // namespace sloserve
