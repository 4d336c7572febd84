#include "sim/simulator.hpp"

#include "sim/engine.hpp"

namespace sloserve::sim {
namespace detail {

status engine::setup() {
  for (size_t m = 0; m < cfg_.models.size(); ++m) {
    model_id_[cfg_.models[m].name] = static_cast<uint32_t>(m);
    auto& shape = cfg_.models[m].output.shape;
    rows_.push_back(shape.empty() ? 1 : shape.front());
  }
  for (size_t n = 0; n < cfg_.nodes.size(); ++n) {
    node_id_[cfg_.nodes[n].name] = static_cast<uint32_t>(n);
    nodes_.push_back({cfg_.nodes[n].name, true, true, {}, {}});
  }
  bool have_frontend = false;
  for (size_t n = 0; n < cfg_.nodes.size() && !have_frontend; ++n)
    if (cfg_.nodes[n].has_role(role::frontend)) frontend_ = static_cast<uint32_t>(n), have_frontend = true;
  if (!have_frontend) return fail("the cluster has no frontend node");
  for (auto& slot : device_slots(cfg_)) {
    auto n = node_id_.at(slot.node);
    auto& by = nodes_[n].by_number;
    if (by.size() <= slot.device) by.resize(slot.device + 1, none);
    by[slot.device] = static_cast<uint32_t>(devices_.size());
    nodes_[n].devices.push_back(static_cast<uint32_t>(devices_.size()));
    devices_.push_back({n, slot.device, {}, 0, false, {}, 0, 0, 1, slot.type, slot.share});
  }
  for (auto& name : o_.pipelines) {
    auto* p = cfg_.find_pipeline(name);
    if (!p) return fail("no pipeline '" + name + "' in the cluster file");
    traffic_.push_back(static_cast<uint32_t>(p - cfg_.pipelines.data()));
  }
  if (o_.pipelines.empty())
    for (size_t p = 0; p < cfg_.pipelines.size(); ++p) traffic_.push_back(static_cast<uint32_t>(p));
  if (traffic_.empty()) return fail("the cluster file has no pipeline");
  for (auto& t : o_.tenants) {
    auto* known = cfg_.security.find_tenant(t.name);
    if (!known) return fail("no tenant '" + t.name + "' in the cluster file's security.tenants");
    tenant_of_.push_back(static_cast<int>(known - cfg_.security.tenants.data()));
    tenant_shares_.push_back(t.share);
  }
  if (!o_.tenants.empty()) tenant_pick_.emplace(tenant_shares_.begin(), tenant_shares_.end());
  by_tenant_.assign(cfg_.security.tenants.size(), {});
  admission_.configure(cfg_, 1);
  splits_.assign(cfg_.pipelines.size(), std::nullopt);
  routes_.assign(cfg_.models.size(), {});
  route_pos_.assign(cfg_.models.size(), {});
  for (auto& m : cfg_.models) accuracy_.push_back(m.accuracy.value_or(100) / 100);
  models_ = cfg_.models;
  exec_.assign(cfg_.models.size(), {});
  if (cfg_.scheduler.profile_drift > 0) {
    sched::drift_options d;
    d.threshold = cfg_.scheduler.profile_drift;
    d.windows = cfg_.scheduler.profile_drift_windows;
    drift_.emplace(d);
  }
  for (auto& p : cfg_.pipelines) {
    std::vector<uint32_t> ms;
    for (auto& s : p.stages) ms.push_back(static_cast<uint32_t>(s.model_index));
    stage_model_.push_back(std::move(ms));
    window_stages_.emplace_back(p.stages.size(), 0);
    window_fallthroughs_.emplace_back(p.stages.size(), 0);
  }
  window_queries_.assign(cfg_.pipelines.size(), 0);
  window_shed_.assign(cfg_.pipelines.size(), 0);
  load_ = std::make_unique<sched::pipeline_load>(pipeline_load_of(cfg_));
  std::vector<failure> fails = o_.failures;
  for (auto& f : fails) {
    auto n = node_id_.find(f.node);
    if (n == node_id_.end()) return fail("--fail: no node '" + f.node + "' in the cluster file");
    post(to_ns(f.at_s * 1000), kind::fail, n->second);
    if (f.back_s >= 0) post(to_ns(f.back_s * 1000), kind::back, n->second);
  }
  return {};
}

void engine::start() {
  adopt(0, static_placement(cfg_, epoch_), true);
  // A cluster that starts plans for what its devices hold, as the controller does once its
  // workers are up (their models loaded at start, as the static placement's are).
  if (plans_epochs() && !unprofiled_model(cfg_, cfg_.models)) {
    plan(0, false, true);
  }
  if (cfg_.scaler.enabled()) {
    auto prov = std::make_unique<local_provisioner>(cfg_, [this](deployment d) {
      auto p = deployment_placement(cfg_, d, ++epoch_, budgets_, &placed_);
      adopt(now_, std::move(p), false, d.instances);
    });
    scaler_ = std::make_unique<scaler_core>(cfg_, std::move(prov), "sim");
    scaler_->start();
    tell_scaler();
    post(std::chrono::nanoseconds(scaler_->poll_period()).count(), kind::scale);
  }
  if (o_.trace.empty() || o_.trace[0] > 0) {
    post(0, kind::send);
  } else if (double at = next_arrival_s(*gaps_, o_.trace, 1, -static_cast<double>(warmup_) / 1e9 - 1e-9);
             at < static_cast<double>(end_send_ - warmup_) / 1e9) {  // it starts silent
    post(warmup_ + static_cast<ns>(at * 1e9), kind::send);
  }
  post(cfg_.runtime.beacon_ms * ns_per_ms, kind::beacon);
}

void engine::dispatch(const event& e) {
  switch (e.what) {
    case kind::send:
      on_send(e.t);
      break;
    case kind::arrival:
      on_arrival(e.t, e.a);
      break;
    case kind::invoke:
      on_invoke(e.t, e.a);
      break;
    case kind::batch_done:
      on_batch_done(e.t, e.a, e.b);
      break;
    case kind::result:
      on_result(e.t, e.a, static_cast<msg::status>(e.b));
      break;
    case kind::beacon:
      on_beacon(e.t);
      break;
    case kind::scale:
      on_scale(e.t);
      break;
    case kind::apply:
      on_apply(e.t, e.a);
      break;
    case kind::fail:
      on_fail(e.t, e.a);
      break;
    case kind::back:
      on_back(e.t, e.a);
      break;
    case kind::detect:
      on_detect(e.t, e.a);
      break;
    case kind::wake:
      if (wake_at_.size() > e.a && wake_at_[e.a] == e.t) wake_at_[e.a] = 0;
      start_next(e.t, e.a);
      break;
    case kind::dummy:
      on_dummy(e.t, e.a, e.b);
      break;
    case kind::pad:
      if (e.a < routes_.size()) pad(e.t, e.a, routes_[e.a].budget);
      break;
    case kind::expire:
      if (queries_[e.a].qid == e.b && !queries_[e.a].answered)
        finish(e.t, e.a, msg::status::error, "no reply by the deadline and runtime.reply_grace_ms");
      break;
  }
}

result engine::results(double duration) {
  result out;
  out.summary = merge_lanes(lanes_, duration);
  out.summary.dummies = dummies_sent_;
  out.events = events_run_;
  out.plans = plans_;
  out.accuracy = accuracy_n_ ? accuracy_sum_ / static_cast<double>(accuracy_n_) : 0;
  out.devices = devices_.size();
  out.peak_devices_used = peak_used_;
  if (budget_) out.budget_spent = budget_->spent();
  out.refreshes = refreshes_;
  for (size_t pi = 0; pi < by_pipeline_.size() && pi < cfg_.pipelines.size(); ++pi)
    out.pipelines[cfg_.pipelines[pi].name] = by_pipeline_[pi];
  for (auto t : tenant_of_)
    out.tenants[cfg_.security.tenants[static_cast<size_t>(t)].name] = by_tenant_[static_cast<size_t>(t)];
  for (size_t m = 0; m < batch_sizes_.size() && m < cfg_.models.size(); ++m)
    for (size_t b = 1; b < batch_sizes_[m].size(); ++b)
      if (batch_sizes_[m][b]) out.batches[cfg_.models[m].name][b] = batch_sizes_[m][b];
  if (scaler_) out.scaling = scaler_->stats();
  auto& d = out.described;
  for (auto p : traffic_) d.pipeline += (d.pipeline.empty() ? "" : ",") + cfg_.pipelines[p].name;
  d.address = "sim";
  d.arrival = o_.arrival;
  d.rate = o_.rate;
  d.slo_ms = cfg_.pipelines[traffic_.front()].slo_ms;
  d.duration_s = duration;
  return out;
}

expected<result> engine::run() {
  if (auto ok = setup(); !ok) return fail(ok.error());
  double duration = o_.trace.empty() ? o_.duration_s : static_cast<double>(o_.trace.size());
  warmup_ = to_ns(o_.warmup_s * 1000);
  end_send_ = warmup_ + to_ns(duration * 1000);
  lanes_.emplace_back(static_cast<size_t>(std::ceil(duration)));
  gaps_ = std::make_unique<arrivals>(o_.arrival, o_.cv, o_.seed);
  start();
  event e;
  while (next_event(e)) {
    ++events_run_;
    now_ = e.t;
    dispatch(e);
  }
  return results(duration);
}

}  // namespace detail

expected<result> simulate(const cluster_config& cfg, const options& o) {
  detail::engine e(cfg, o);
  return e.run();
}

expected<tenant_traffic> parse_tenant(const std::string& text) {
  tenant_traffic t;
  auto colon = text.rfind(':');
  t.name = text.substr(0, colon);
  if (colon != std::string::npos) {
    try {
      size_t used = 0;
      t.share = std::stod(text.substr(colon + 1), &used);
      if (used != text.size() - colon - 1) throw std::invalid_argument("share");
    } catch (const std::exception&) {
      t.share = -1;
    }
  }
  if (t.name.empty() || !(t.share > 0) || !std::isfinite(t.share))
    return fail("'" + text + "': expected TENANT or TENANT:SHARE with a share above 0");
  return t;
}

expected<failure> parse_failure(const std::string& text) {
  auto at_sign = text.find('@');
  if (at_sign == std::string::npos || at_sign == 0) return fail("'" + text + "': expected NODE@SECONDS[-SECONDS]");
  failure f;
  f.node = text.substr(0, at_sign);
  auto times = text.substr(at_sign + 1);
  auto dash = times.find('-');
  try {
    size_t used = 0;
    f.at_s = std::stod(times.substr(0, dash), &used);
    if (used != (dash == std::string::npos ? times.size() : dash)) throw std::invalid_argument("at");
    if (dash != std::string::npos) {
      f.back_s = std::stod(times.substr(dash + 1), &used);
      if (used != times.size() - dash - 1 || f.back_s <= f.at_s) throw std::invalid_argument("back");
    }
  } catch (const std::exception&) {
    return fail("'" + text + "': expected NODE@SECONDS[-SECONDS] with the return after the failure");
  }
  if (f.at_s < 0) return fail("'" + text + "': the failure time must not be negative");
  return f;
}

}  // namespace sloserve::sim
