// The scaler (scaler: in the cluster file): on its timer it asks the monitor for the current
// view and hands it to its scaler_core (control/scaler_core.hpp), which decides the shape of
// every stage and has the provisioner realise it: instances started, stopped and resized in place.

#include <spdlog/spdlog.h>

#include "actors/roles.hpp"
#include "control/provisioner.hpp"
#include "control/scaler_core.hpp"

namespace sloserve {
namespace {

using clock_time = caf::actor_clock::time_point;

struct scaler_state {
  static inline const char* name = "scaler";
  std::shared_ptr<const cluster_config> cfg;
  std::shared_ptr<link> net;
  std::unique_ptr<scaler_core> core;
  clock_time last_tick;
  bool started = false;
};

using self_ptr = scaler_actor::stateful_pointer<scaler_state>;

}  // namespace

scaler_actor spawn_scaler(caf::actor_system& sys, actor_args args) {
  return sys.spawn([args](self_ptr self) -> scaler_actor::behavior_type {
    auto& st = self->state;
    st.cfg = args.cfg;
    st.net = args.net;
    auto prov = std::make_unique<local_provisioner>(*st.cfg, [self](deployment d) {
      if (auto ctl = self->state.net->local().controller) self->send(ctl, std::move(d));
    });
    st.core = std::make_unique<scaler_core>(*st.cfg, std::move(prov), st.net->self_name());
    st.last_tick = self->clock().now();
    return {
        [=](start_atom) {
          auto& st = self->state;
          if (std::exchange(st.started, true)) return;
          st.last_tick = self->clock().now();
          st.core->start();
          self->delayed_send(self, st.core->poll_period(), tick_atom::value);
        },
        [=](tick_atom) {
          auto& st = self->state;
          self->delayed_send(self, st.core->poll_period(), tick_atom::value);
          auto mon = st.net->local().monitor;
          if (!mon) return;
          self->request(mon, caf::infinite, stats_atom::value).then([=](const cluster_load& load) {
            auto& st = self->state;
            auto now = self->clock().now();
            double dt = std::chrono::duration<double>(now - st.last_tick).count();
            st.last_tick = now;
            st.core->decide(load, dt);
          });
        },
        [=](worker_set& w) { self->state.core->on_workers(w); },
        [=](new_config& c) {
          auto& st = self->state;
          st.cfg = c.cfg;
          st.core->retune(*st.cfg);
        },
        [=](profile_scales& p) {
          for (auto& [model, scale] : p.scales) self->state.core->rescale(model, scale);
        },
        [=](stats_atom) { return self->state.core->stats(); },
    };
  });
}

}  // namespace sloserve
