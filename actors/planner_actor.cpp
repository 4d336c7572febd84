// The planner: scheduler epochs, one request at a time, off the controller's thread.

#include "actors/parallel_for.hpp"
#include "actors/roles.hpp"

namespace sloserve {

plan_request epoch_request(const cluster_config& cfg, std::shared_ptr<const std::vector<model_spec>> models,
                           const sched::pipeline_rates& rates, std::shared_ptr<const planned_epoch> previous,
                           const std::function<bool(const std::string&)>& up, bool surge) {
  plan_request r;
  r.input = planning_input(cfg, *models);
  std::erase_if(r.input.slots, [&](const sched::device_slot& s) { return !up(s.node); });
  sched::set_measured_load(r.input, rates, cfg.scheduler.headroom, surge, previous ? &previous->planned : nullptr);
  r.planning = sched::planning_rates(rates, surge);
  r.capacity = sched::nothing_to_plan_for(rates);
  for (auto& p : rates.pipelines) r.running.push_back(p.rate);
  r.models = std::move(models);
  r.previous = std::move(previous);
  return r;
}

planned_epoch run_plan_request(plan_request& r) {
  planned_epoch out;
  out.capacity = r.capacity;
  out.running = r.running;
  out.models = r.models;
  out.previous = r.previous;
  r.input.parallel = parallel_for;
  auto* previous = r.previous ? &r.previous->result : nullptr;
  auto planned = sched::plan_for_load(r.input, previous, r.capacity, r.planning);
  if (planned) {
    out.result = std::move(planned->plan.result);
    out.scale = planned->plan.scale;
    out.degraded = std::move(planned->plan.degraded);
    out.variants_fit = planned->plan.variants_fit;
    out.planned = std::move(planned->planned);
  } else {
    out.error = planned.error();
  }
  out.input = std::move(r.input);
  return out;
}

planner_actor spawn_planner(caf::actor_system& sys, bool detached) {
  auto behavior = []() -> planner_actor::behavior_type {
    return {[](plan_request& r) { return run_plan_request(r); }};
  };
  if (detached) return sys.spawn<caf::detached>(behavior);
  return sys.spawn(behavior);
}

}  // namespace sloserve
