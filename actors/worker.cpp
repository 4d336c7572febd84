// A worker node: applies the controller's schedules and resizes to its devices, registers every
// beacon and reports per-session load. Invocations do not pass through it: the node hands them
// straight to their device.

#include <spdlog/spdlog.h>

#include <map>

#include "actors/roles.hpp"

namespace sloserve {
namespace {

struct worker_state {
  static inline const char* name = "worker";

  std::shared_ptr<const cluster_config> cfg;
  std::shared_ptr<link> net;
  const node_spec* node = nullptr;
  uint64_t incarnation = 0;
  std::vector<device_actor> devices;
  uint64_t schedule_epoch = 0;
  std::string serving;                                            // what the schedule applied last runs, as logged
  std::map<uint32_t, std::vector<msg::unloaded_model>> unloaded;  // per device, of the schedule it runs
  caf::actor_clock::time_point last_report;
  bool leaving = false;
};

using self_ptr = worker_actor::stateful_pointer<worker_state>;

void register_self(self_ptr self) {
  auto& st = self->state;
  auto* ctl = st.cfg->controller();
  if (!ctl) return;
  msg::register_node r;
  r.node = st.node->name;
  r.roles = {std::string(knob_name(role::worker))};  // the node's frontend registers for itself
  r.devices = static_cast<uint32_t>(st.devices.size());
  r.incarnation = st.incarnation;
  r.schedule_epoch = st.schedule_epoch;
  r.leaving = st.leaving;
  r.config_revision = st.net->config ? st.net->config->revision() : 0;
  for (auto& [device, models] : st.unloaded) r.unloaded.insert(r.unloaded.end(), models.begin(), models.end());
  for (auto& m : st.cfg->models)
    if (m.measured)
      r.profiles.push_back(
          {m.name, {m.profile.batch.begin(), m.profile.batch.end()}, m.profile.latency_ms, m.profile.step});
  st.net->to_node(ctl->name, {{}, std::move(r)});
}

void report_load(self_ptr self) {
  auto& st = self->state;
  auto* ctl = st.cfg->controller();
  if (!ctl || st.devices.empty()) return;
  auto now = self->clock().now();
  auto window = std::chrono::duration<double>(now - st.last_report).count();
  st.last_report = now;
  auto report = std::make_shared<msg::load_report>();
  report->node = st.node->name;
  report->window_s = window;
  auto remaining = std::make_shared<size_t>(st.devices.size());
  for (auto& d : st.devices)
    self->request(d, caf::infinite, stats_atom::value).then([=](device_load& l) {
      for (auto& s : l.sessions) report->sessions.push_back(std::move(s));
      if (--*remaining == 0) self->state.net->to_node(ctl->name, {{}, std::move(*report)});
    });
}

}  // namespace

std::vector<device_actor> spawn_devices(caf::actor_system& sys, const actor_args& args) {
  std::vector<device_actor> out;
  auto* node = args.cfg->find_node(args.net->self_name());
  uint32_t index = 0;
  for (auto& g : node->devices)
    for (int i = 0; i < g.instances(); ++i) out.push_back(spawn_device(sys, args, index++, g.kind));
  return out;
}

worker_actor spawn_worker(caf::actor_system& sys, actor_args args, std::vector<device_actor> devices) {
  return sys.spawn([args, devices](self_ptr self) -> worker_actor::behavior_type {
    auto& st = self->state;
    st.cfg = args.cfg;
    st.net = args.net;
    st.incarnation = args.incarnation;
    st.node = st.cfg->find_node(st.net->self_name());
    st.devices = devices;
    for (auto& d : st.devices) self->link_to(d);  // devices stop with their worker
    st.last_report = self->clock().now();
    return {
        [=](start_atom) {
          register_self(self);
          self->delayed_send(self, std::chrono::milliseconds(self->state.cfg->runtime.beacon_ms), beacon_atom::value);
        },
        [=](leave_atom) {
          // Every registration from now on says so, in case the controller misses one.
          self->state.leaving = true;
          register_self(self);
        },
        [=](msg::resize& r) {
          auto& st = self->state;
          if (r.device < st.devices.size())
            self->send(st.devices[r.device], std::move(r));
          else
            spdlog::warn("{}: resize of device {}, which it does not have", st.node->name, r.device);
        },
        [=](msg::schedule& s) {
          auto& st = self->state;
          // Acknowledge the epoch only once every device has loaded what it now runs, so that
          // no frontend routes to a model still loading.
          auto epoch = s.epoch;
          auto sessions = std::make_shared<std::vector<std::pair<uint32_t, std::string>>>();
          for (auto& ds : s.devices)
            for (auto& x : ds.sessions) sessions->emplace_back(ds.device, x.model);
          auto remaining = std::make_shared<size_t>(0);
          for (auto& ds : s.devices) *remaining += ds.device < st.devices.size();
          std::erase_if(st.unloaded, [&](auto& kv) {  // a device the schedule leaves out runs nothing
            return std::none_of(s.devices.begin(), s.devices.end(), [&](auto& ds) { return ds.device == kv.first; });
          });
          auto applied = [=] {
            auto& st = self->state;
            // What it serves: the schedule's sessions less those whose model did not load.
            std::string serving, failed;
            for (auto& [device, model] : *sessions) {
              auto it = st.unloaded.find(device);
              bool out = it != st.unloaded.end() &&
                         std::any_of(it->second.begin(), it->second.end(), [&](auto& u) { return u.model == model; });
              auto& to = out ? failed : serving;
              to += (to.empty() ? "" : ", ") + model + " on device " + std::to_string(device);
            }
            if (serving.empty()) serving = "nothing";
            if (!failed.empty()) serving += "; not " + failed + ", which could not load";
            // Said when what it serves changes; an epoch that leaves it as it was is not news.
            if (epoch != st.schedule_epoch)
              spdlog::log(serving != st.serving ? spdlog::level::info : spdlog::level::debug,
                          "{}: applied schedule epoch {}: serving {}", st.node->name, epoch, serving);
            st.serving = serving;
            st.schedule_epoch = epoch;
            register_self(self);  // tells the controller at once that the schedule is in place
          };
          if (*remaining == 0) return applied();
          for (auto& ds : s.devices)
            if (ds.device < st.devices.size())
              self->request(st.devices[ds.device], caf::infinite, ds)
                  .then([=, device = ds.device](std::vector<msg::unloaded_model>& failed) {
                    auto& st = self->state;
                    if (failed.empty())
                      st.unloaded.erase(device);
                    else
                      st.unloaded[device] = std::move(failed);
                    if (--*remaining == 0) applied();
                  });
        },
        [=](beacon_atom) {
          register_self(self);
          report_load(self);
          self->delayed_send(self, std::chrono::milliseconds(self->state.cfg->runtime.beacon_ms), beacon_atom::value);
        },
        [=](peer_up_atom, const std::string& node) {
          auto* ctl = self->state.cfg->controller();
          if (ctl && ctl->name == node) register_self(self);
        },
        [=](peer_down_atom, const std::string&) {},
        [=](new_config& c) {
          auto& st = self->state;
          st.cfg = c.cfg;
          st.node = st.cfg->find_node(st.node->name);
          // Every device loads what changed for it; once all have answered, the controller
          // hears what did not load (an apply's acknowledgement).
          struct fan_in {
            size_t left;
            std::vector<std::string> problems;
          };
          auto acks = std::make_shared<fan_in>(fan_in{st.devices.size(), {}});
          auto revision = c.revision;
          auto net = st.net;
          auto done = [acks, revision, net] {
            if (--acks->left == 0) acknowledge_config(*net, revision, std::move(acks->problems));
          };
          if (st.devices.empty()) acknowledge_config(*net, revision, {});
          for (size_t i = 0; i < st.devices.size(); ++i)
            self->request(st.devices[i], caf::infinite, c)
                .then(
                    [acks, done](std::vector<std::string>& problems) {
                      for (auto& p : problems) acks->problems.push_back(std::move(p));
                      done();
                    },
                    [acks, done, i](caf::error& e) {
                      acks->problems.push_back("device " + std::to_string(i) + " did not answer: " + to_string(e));
                      done();
                    });
        },
    };
  });
}

}  // namespace sloserve
