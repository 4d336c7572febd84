#include "actors/device_sessions.hpp"

#include <algorithm>

namespace sloserve {

void device_sessions::rebind(const cluster_config& cfg) {
  cfg_ = &cfg;
  for (auto& s : sessions_)
    if (auto* m = cfg.find_model(s.model->name)) s.model = m;
}

void device_sessions::apply(const msg::device_schedule& ds, device_clock::time_point now) {
  for (auto& s : sessions_) s.draining = true;
  for (auto& ss : ds.sessions) {
    auto* m = cfg_->find_model(ss.model);
    if (!m) continue;
    auto it =
        std::find_if(sessions_.begin(), sessions_.end(), [&](const session& x) { return x.model->name == m->name; });
    if (it == sessions_.end()) {
      it = sessions_.emplace(sessions_.end());
      it->model = m;
      it->load.model = m->name;
      it->load.device = device_;
      it->last_arrival = now;
    }
    it->model = m;
    it->draining = false;
    it->batch = std::clamp<int>(static_cast<int>(ss.batch), 1, m->batch_limit());
    it->latency_scale = ss.latency_scale > 0 ? ss.latency_scale : 1;
    it->collect = std::min(static_cast<int>(ss.collect), it->batch);
    it->collect_ms = ss.collect_ms;
  }
  for (auto& s : sessions_)
    if (s.draining) s.last_arrival = std::max(s.last_arrival, now);  // the idle clock starts now
}

void device_sessions::prune(device_clock::time_point now, std::chrono::nanoseconds idle,
                            const std::function<bool(const model_spec*)>& running) {
  std::erase_if(sessions_, [&](const session& s) {
    return s.draining && s.queue.empty() && !running(s.model) && now - s.last_arrival > idle;
  });
}

session* device_sessions::find(const std::string& model) {
  for (auto& s : sessions_)
    if (s.model->name == model) return &s;
  return nullptr;
}

std::vector<msg::session_load> device_sessions::take_load(device_clock::time_point now) {
  std::vector<msg::session_load> out;
  for (auto& s : sessions_) {
    auto l = s.load;
    l.queue_length = static_cast<uint32_t>(s.queue.size());
    l.queue_budgets_ms = s.queue.budgets_ms(now, sched::budget_sample::capacity);
    l.arrival_budgets_ms = s.budgets.take();
    l.mean_latency_ms = l.completed ? s.latency_sum_ms / static_cast<double>(l.completed) : 0;
    l.mean_budget_ms = l.arrived ? s.budget_sum_ms / static_cast<double>(l.arrived) : 0;
    out.push_back(std::move(l));
    s.load.arrived = s.load.completed = s.load.dropped = 0;
    s.load.exec_ms = s.load.expected_exec_ms = 0;
    s.load.exec_batches = 0;
    s.latency_sum_ms = s.budget_sum_ms = 0;
  }
  return out;
}

std::chrono::nanoseconds model_loads::wait(const std::vector<load>& needed, device_clock::time_point now,
                                           std::vector<load>& started) {
  std::map<const model_spec*, device_clock::time_point> still;
  std::chrono::nanoseconds wait{0};
  for (auto& l : needed) {
    if (l.delay_ms <= 0) continue;
    auto it = ready_at_.find(l.model);
    if (it == ready_at_.end()) started.push_back(l);
    auto ready =
        it != ready_at_.end() ? it->second : now + std::chrono::nanoseconds(static_cast<int64_t>(l.delay_ms * 1e6));
    still[l.model] = ready;
    wait = std::max(wait, std::chrono::duration_cast<std::chrono::nanoseconds>(ready - now));
  }
  ready_at_ = std::move(still);
  return wait;
}

}  // namespace sloserve
