#include "control/scaler_core.hpp"

#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <cmath>

#include "config/knob_format.hpp"
#include "gpu/lstm_predictor.hpp"
#include "scheduling/ipa.hpp"
#include "scheduling/policies/ipa/config.hpp"
#include "scheduling/query_analyzer.hpp"

namespace sloserve {
namespace {

// One stage's rate predictor (scaler.predictor); the LSTM predicts the largest rate of the next
// `window` observed periods. A binary without LibTorch has no LSTM: it says so and predicts
// with the recent maximum.
std::unique_ptr<sched::rate_predictor> make_predictor(predictor_kind kind, double window) {
  if (kind != predictor_kind::lstm) return sched::make_rate_predictor(kind);
  lstm_options lo;
  lo.window = std::max(1.0, std::round(window));
  if (auto lstm = make_lstm_predictor(lo)) return lstm;
  spdlog::error("scaler.predictor lstm needs LibTorch, which this binary was built without: recent_max predicts");
  return sched::make_rate_predictor(predictor_kind::recent_max);
}

}  // namespace

// Hands the provisioner every stage's budget, `budget(stage)`, for the next deployment's table.
void scaler_core::route_budgets(const std::function<double(const stage_info&)>& budget) {
  std::vector<msg::stage_budget> budgets;
  for (auto& s : stages_)
    budgets.push_back({cfg_->pipelines[s.pipeline].name, cfg_->pipelines[s.pipeline].stages[s.stage].name, budget(s),
                       s.model->name, s.cascading ? s.first_share : 0});
  prov_->set_budgets(std::move(budgets));
}

bool scaler_core::is_variant_of(const stage_info& s, const std::string& model) const {
  return std::any_of(s.variants.begin(), s.variants.end(), [&](const model_spec* m) { return m->name == model; });
}

// Brings the instances of `model` to `shape`: the newest go first, instance 0 is the oldest.
// Make before break: while an instance of it is starting (its model loading), instance 0 gives
// up no cores.
bool scaler_core::bring_to(const model_spec& model, const sched::stage_shape& shape, bool& told) {
  auto& name = model.name;
  std::vector<placed_instance> mine;
  for (auto& i : prov_->instances())
    if (i.model == name) mine.push_back(i);
  while (static_cast<int>(mine.size()) > shape.instances) {
    prov_->stop(mine.back().id);
    mine.pop_back();
    ++stats_.horizontal_changes;
  }
  bool starting = static_cast<int>(mine.size()) < shape.instances ||
                  std::any_of(mine.begin(), mine.end(), [&](auto& i) { return !serving_.count(i.id); });
  auto in_place = static_cast<size_t>(std::max(1, shape.in_place()));
  for (size_t k = 0; k < mine.size(); ++k) {
    int cores = k < in_place ? shape.cores : shape.horizontal_cores;
    int batch = k < in_place ? shape.batch : shape.horizontal_batch;
    // Cores given back only once every instance serves (biscale: instances grown in place
    // shrink once the one-core instances that replace them are up).
    if (starting && cores < mine[k].cores) cores = mine[k].cores, batch = mine[k].batch;
    if (mine[k].cores == cores && mine[k].batch == batch) continue;
    if (prov_->resize(mine[k].id, cores, batch) != mine[k].cores) ++stats_.vertical_changes;
  }
  while (static_cast<int>(mine.size()) < shape.instances) {
    bool grown = mine.size() < in_place;
    auto id =
        prov_->start(name, grown ? shape.cores : shape.horizontal_cores, grown ? shape.batch : shape.horizontal_batch);
    if (!id) {
      if (!std::exchange(told, true))
        spdlog::warn(
            "{}: scaler: no room for another instance of '{}' (free device slots, node cores or scaler "
            "limits)",
            name_, name);
      return false;
    }
    mine.push_back({*id, name, {}, 0, 0, 0});
    ++stats_.horizontal_changes;
  }
  told = false;
  return std::all_of(mine.begin(), mine.end(), [&](auto& i) { return serving_.count(i.id); });
}

// Brings a stage's models to their shapes (a cascade's second too, while the stage cascades).
// Instances of the models it ran before (another variant, or the cascade's first once its second
// runs alone) stop only once every instance of what it runs now serves.
void scaler_core::reconcile(stage_info& s) {
  bool serves = bring_to(*s.model, s.shape, s.told_no_room);
  bool second = s.second && s.cascading;
  if (second) {
    // The second, which ran alone before, keeps its replicas until the first serves.
    auto shape = s.second_shape;
    if (!serves) {
      auto all = prov_->instances();
      auto running = std::count_if(all.begin(), all.end(), [&](auto& i) { return i.model == s.second->name; });
      shape.instances = std::max(shape.instances, static_cast<int>(running));
    }
    serves = bring_to(*s.second, shape, s.told_no_room_second) && serves;
  }
  std::vector<placed_instance> before;
  for (auto& i : prov_->instances())
    if (is_variant_of(s, i.model) && i.model != s.model->name && !(second && i.model == s.second->name))
      before.push_back(i);
  if (before.empty() || !serves) return;
  for (auto& i : before) prov_->stop(i.id), ++stats_.horizontal_changes;
  spdlog::info("{}: scaler {}: '{}' serves; {} instance(s) of the variant before it stopped", name_,
               cfg_->scaler.policy, s.model->name, before.size());
}

// Instances the controller has acknowledged serve from then on (a resize keeps them serving).
void scaler_core::mark_serving() {
  std::set<uint64_t> serving;
  for (auto& i : prov_->instances())
    if (serving_.count(i.id) || acknowledged_.count({i.node, i.device, i.model})) serving.insert(i.id);
  serving_ = std::move(serving);
}

void scaler_core::apply() {
  for (auto& s : stages_) reconcile(s);
  prov_->commit();
}

// One look at the monitor's view. Every polls_per_tick-th is a vertical period (and every
// ticks_per_horizontal-th of those a horizontal one); in between, the vertical policies may
// only add capacity: a surge is met at the next load report, while capacity is taken away at
// most once a vertical period, sized for the largest rate of the last three periods and of the
// latest report.
void scaler_core::observe(stage_info& s, const cluster_load& load, const std::vector<placed_instance>& instances,
                          bool full, double dt) {
  auto& o = cfg_->scaler;
  double headroom = 1 + cfg_->scheduler.headroom;
  sched::scale_stage in;
  in.l = s.l;
  in.max_batch = s.model->batch_limit();
  double rate = 0, budget_w = 0, budget_sum = 0, fell = 0;
  for (auto& x : load.sessions) {
    if (!is_variant_of(s, x.model)) continue;  // a stage's traffic, whichever variant serves it
    // A cascade's second, while the stage cascades, serves what falls through: not more traffic.
    if (s.second && s.cascading && x.model == s.second->name) {
      fell += x.last_rate;
      continue;
    }
    rate += x.last_rate;
    budget_sum += x.budget_ms * x.last_rate;
    budget_w += x.last_rate;
    if (o.per_request_budgets)
      s.arrivals.insert(s.arrivals.end(), x.arrival_budgets_ms.begin(), x.arrival_budgets_ms.end());
  }
  while (s.arrivals.size() > stage_info::arrivals_kept) s.arrivals.pop_front();
  // The fraction that falls through, smoothed over reports once the stage sees a request a second.
  if (s.second && s.cascading && rate >= 1) {
    double f = std::clamp(fell / rate, 0.0, 1.0);
    s.fallthrough = s.fallthrough < 0 ? f : 0.8 * s.fallthrough + 0.2 * f;
  }
  in.arrival_budgets_ms.assign(s.arrivals.begin(), s.arrivals.end());
  // Instance 0's queue, for Sponge's EDF check.
  for (auto& i : instances)
    if (i.model == s.model->name) {
      for (auto& x : load.sessions)
        if (x.node == i.node && x.device == i.device && x.model == i.model) {
          in.queued = static_cast<int>(x.queue_length);
          if (o.per_request_budgets) in.queue_budgets_ms = x.queue_budgets_ms;
        }
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
    while (static_cast<int>(s.recent.size()) > ticks_per_horizontal_) s.recent.pop_front();
    for (size_t k = s.recent.size() >= 3 ? s.recent.size() - 3 : 0; k < s.recent.size(); ++k)
      sized = std::max(sized, s.recent[k]);
  }
  // A lull keeps what the recent peak needed (as the scheduler's epochs do), released slowly.
  // Not IPA's: it trades accuracy for load, and gives the accuracy back when the load goes
  // (devices it frees stay loaded as spares meanwhile).
  double half_life = o.policy == scaler_policy::ipa ? 0 : cfg_->scheduler.peak_half_life_s;
  s.peak = std::max(sized, half_life > 0 ? s.peak * std::exp2(-dt / half_life) : 0.0);
  in.rate = s.peak * headroom;
  in.predicted = std::max(s.predictor->predict(), half_life > 0 ? s.peak : 0.0) * headroom;
  auto& p = cfg_->pipelines[s.pipeline];
  for (size_t c = 0; c < p.stages.size(); ++c)
    for (auto parent : p.stages[c].parents)
      if (parent == s.stage) in.children.push_back(c);
  if (p.stages[s.stage].children.empty() && p.stages[s.stage].slo_ms) in.slo_ms = path_slo_ms(p, s.stage);
  s.last = in;
}

void scaler_core::choose_shapes(bool full, bool horizontal, bool surge) {
  auto& o = cfg_->scaler;
  // FA2 re-plans every horizontal period, and at once for a surge (not left to the next period).
  if (o.policy == scaler_policy::fa2 && (horizontal || surge)) {
    fa2_plan();
  } else if (o.policy == scaler_policy::ipa) {
    // Every interval, and at once for a surge.
    if (horizontal || polls_ == 1 || surge) ipa_shapes();
  } else if (o.policy == scaler_policy::sponge || o.policy == scaler_policy::biscale) {
    if (horizontal) split_budgets();
    for (auto& s : stages_) {
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
      bool grows = s.last.rate > 1.25 * sched::shape_capacity(s.l, s.shape) &&
                   sched::shape_capacity(s.l, next) > sched::shape_capacity(s.l, s.shape);
      if (full || grows) s.shape = next;
    }
  }
}

void scaler_core::decide(const cluster_load& load, double dt) {
  auto& o = cfg_->scaler;
  mark_serving();
  auto instances = prov_->instances();
  // Cost of what ran during the period that just ended.
  uint32_t n = static_cast<uint32_t>(instances.size()), cores = 0;
  for (auto& i : instances) cores += static_cast<uint32_t>(i.cores);
  stats_.seconds += dt;
  stats_.instance_seconds += n * dt;
  stats_.core_seconds += cores * dt;
  bool full = ++polls_ % static_cast<uint64_t>(polls_per_tick_) == 0;
  bool horizontal = full && ++ticks_ % static_cast<uint64_t>(ticks_per_horizontal_) == 0;
  for (auto& s : stages_) observe(s, load, instances, full, dt);
  std::vector<sched::stage_shape> before;
  for (auto& s : stages_) before.push_back(s.shape);
  // A stage whose rate outgrows what its instances carry by more than a report's noise.
  bool surge = std::any_of(stages_.begin(), stages_.end(), [](const stage_info& s) {
    return s.last.rate > 1.25 * sched::shape_capacity(s.l, s.shape) && s.last.rate > 1;
  });
  choose_shapes(full, horizontal, surge);
  for (size_t k = 0; k < stages_.size(); ++k) {
    auto& s = stages_[k];
    if (s.shape == before[k]) continue;
    spdlog::info(
        "{}: scaler {}: {}: {} instance(s), {} at {} core(s) batch {}, others batch {} (rate {:.1f}/s, "
        "predicted {:.1f}/s, budget {:.1f} ms)",
        name_, o.policy, s.model->name, s.shape.instances,
        s.shape.in_place() > 1 ? std::to_string(s.shape.in_place()) + " in place" : std::string("instance 0"),
        s.shape.cores, s.shape.batch, s.shape.horizontal_batch, s.last.rate, s.last.predicted, s.last.budget_ms);
  }
  apply();
  if (horizontal)
    spdlog::info("{}: scaler {}: {} instances, {} cores; so far {:.0f} instance-s, {:.0f} core-s over {:.0f} s", name_,
                 o.policy, n, cores, stats_.instance_seconds, stats_.core_seconds, stats_.seconds);
}

void scaler_core::set_periods() {
  auto& o = cfg_->scaler;
  double horizontal_s =
      o.policy == scaler_policy::ipa ? cfg_->scheduler.section_as<sched::ipa::options>().interval_s : o.horizontal_s;
  ticks_per_horizontal_ = std::max(1, static_cast<int>(std::lround(horizontal_s / o.vertical_s)));
  polls_per_tick_ = std::max(1, static_cast<int>(std::lround(o.vertical_s * 1000 / cfg_->runtime.beacon_ms)));
}

// The plan holds for the horizontal period; IPA's forecasts the next 20 s (its thesis). The
// predictor observes one rate per vertical period.
double scaler_core::horizon() const {
  auto& o = cfg_->scaler;
  return (o.policy == scaler_policy::ipa ? 20.0 : o.horizontal_s) / o.vertical_s;
}

void scaler_core::retune(const cluster_config& cfg) {
  auto was_predictor = cfg_->scaler.predictor;
  auto was_horizon = horizon();
  cfg_ = &cfg;
  prov_->rebind(cfg);
  set_periods();
  if (cfg.scaler.predictor != was_predictor || horizon() != was_horizon)
    for (auto& s : stages_) s.predictor = make_predictor(cfg.scaler.predictor, horizon());
  spdlog::info("{}: scaler {}: knobs applied: vertical every {} s, horizontal every {} s, predictor {}", name_,
               cfg.scaler.policy, cfg.scaler.vertical_s, cfg.scaler.horizontal_s, cfg.scaler.predictor);
}

scaler_core::scaler_core(const cluster_config& cfg, std::unique_ptr<provisioner> prov, std::string name)
    : cfg_(&cfg), models_(cfg.models), prov_(std::move(prov)), name_(std::move(name)) {
  auto& o = cfg_->scaler;
  set_periods();
  if (auto th = cfg_->scheduler.section_as<sched::ipa::options>().base_rps; o.policy == scaler_policy::ipa && th > 0)
    if (auto set = apply_base_allocation(models_, cfg_->pipelines, th, o.max_cores); !set.empty())
      spdlog::info("{}: scaler ipa: base allocations at {:g} requests/s: {}", name_, th, fmt::join(set, ", "));
  for (size_t pi = 0; pi < cfg_->pipelines.size(); ++pi) {
    auto& p = cfg_->pipelines[pi];
    auto split = even_split(p);
    for (size_t k = 0; k < p.stages.size(); ++k) {
      auto& st = p.stages[k];
      // The models the stage runs side by side: its versions with weight, the largest first (the
      // stage's model_index); else its model.
      std::vector<size_t> runs{st.model_index};
      for (auto& v : st.versions)
        if (v.weight > 0 && v.model_index != st.model_index) runs.push_back(v.model_index);
      for (size_t j = 0; j < runs.size(); ++j) {
        stage_info s;
        s.pipeline = pi;
        s.stage = k;
        s.primary = j == 0;
        s.model = &models_[runs[j]];
        if (st.versions.empty()) {
          for (auto m : stage_models(st)) s.variants.push_back(&models_[m]);
        } else {
          s.variants = {s.model};
        }
        if (auto& c = st.cascade) {
          s.second = &models_[c->second_index];
          s.cascading = true;
          s.second_shape.instances = 1;
        }
        s.l = latency_of(*s.model);
        s.split_budget_ms = split.budget_ms[k];
        s.predictor = make_predictor(o.predictor, horizon());
        stages_.push_back(std::move(s));
      }
    }
  }
}

std::chrono::milliseconds scaler_core::poll_period() const {
  auto per = std::max<long>(1, std::lround(cfg_->scaler.vertical_s * 1000));
  auto polls = std::max<long>(1, std::lround(cfg_->scaler.vertical_s * 1000 / cfg_->runtime.beacon_ms));
  return std::chrono::milliseconds(std::max<long>(1, per / polls));
}

void scaler_core::start() {
  spdlog::info("{}: scaler {}: vertical every {} s, horizontal every {} s, predictor {}", name_, cfg_->scaler.policy,
               cfg_->scaler.vertical_s, cfg_->scaler.horizontal_s, cfg_->scaler.predictor);
  // Routed with the first deployment (once the workers are known).
  if (cfg_->scaler.policy == scaler_policy::sponge || cfg_->scaler.policy == scaler_policy::biscale) split_budgets();
}

void scaler_core::rescale(const std::string& model, double scale) {
  if (!sched::rescale_model(models_, scales_, model, scale)) return;
  for (auto& s : stages_)
    if (s.model->name == model) s.l = latency_of(*s.model);
  spdlog::info("{}: scaler {}: {} sized at {:.2f}x its profile from now on (measured while serving)", name_,
               cfg_->scaler.policy, model, scale);
}

void scaler_core::on_workers(const worker_set& w) {
  acknowledged_ = {w.acknowledged.begin(), w.acknowledged.end()};
  mark_serving();
  if (w.up == up_) return;
  // Instances on workers that went away are gone; the shapes bring them back elsewhere.
  up_ = w.up;
  prov_->set_workers_up(up_);
  apply();
}

scaler_stats scaler_core::stats() const {
  auto out = stats_;
  for (auto& i : prov_->instances()) ++out.instances, out.cores += static_cast<uint32_t>(i.cores);
  return out;
}

}  // namespace sloserve
