// A device's schedules: each loads its models (a file that will not load is left out, and
// said), waits for the emulated cold start of those it lacks, and answers with what would not
// load; the memory of what it serves is reported; an apply's new files load in place.

#include "actors/device_state.hpp"

namespace sloserve::device_impl {

// The memory of the models this device now serves: what the executor measured of each loaded
// model, else what the file declares; and the device's own, where the file limits it.
void report_memory(self_ptr self) {
  auto& st = self->state;
  std::map<std::string, double> bytes;
  for (auto& s : st.sessions.all()) {
    double mb = st.executor->memory_mb(s.model->name);
    bytes[s.model->name] = (mb > 0 ? mb : s.model->memory_mb) * 1024 * 1024;
  }
  double limit = 0;
  if (auto* node = st.cfg->find_node(st.net->self_name()))
    if (auto* g = node->group_of(static_cast<int>(st.index))) limit = g->memory_mb * 1024 * 1024;
  st.net->metrics.device_memory(metric_name(st), std::move(bytes), limit);
}

void on_schedule(self_ptr self, msg::device_schedule& ds) {
  auto& st = self->state;
  // New models load (and warm up) before anything the old schedule ran starts to drain.
  std::vector<std::string> failed;
  // A schedule of the same models as the last one (it comes again with each epoch that keeps
  // them) does not try again the files that would not load under it.
  std::vector<std::string> models;
  for (auto& ss : ds.sessions) models.push_back(ss.model);
  std::sort(models.begin(), models.end());
  auto before = std::move(st.load_failures);
  if (models != st.last_models) before.clear();
  st.last_models = models;
  st.load_failures.clear();
  for (auto& ss : ds.sessions) {
    auto* m = st.cfg->find_model(ss.model);
    if (!m) continue;
    if (auto f = before.find(m->name); f != before.end()) {
      failed.push_back(ss.model);
      st.load_failures.insert(*f);
      continue;
    }
    if (auto loaded = st.executor->load(*m); !loaded) {
      spdlog::error("{}: device {}: {}", st.net->self_name(), st.index, loaded.error());
      failed.push_back(ss.model);
      st.load_failures[ss.model] = loaded.error();
    }
  }
  std::erase_if(ds.sessions,
                [&](auto& ss) { return std::find(failed.begin(), failed.end(), ss.model) != failed.end(); });
  st.sessions.apply(ds, self->clock().now());
  report_memory(self);
  run_next(self);
}

// How long this device must still wait before `ds` can run: a model it holds no session of takes
// the executor's load delay (an emulated cold start; 0 on a real device, whose load() is the
// wait). Loads the new schedule no longer asks for are abandoned; one already under way goes on.
nanoseconds cold_start(self_ptr self, const msg::device_schedule& ds) {
  auto& st = self->state;
  std::vector<model_loads::load> needed, started;
  for (auto& ss : ds.sessions)
    if (auto* m = st.cfg->find_model(ss.model); m && !st.sessions.find(m->name))
      needed.push_back({m, st.executor->load_delay_ms(*m)});
  auto wait = st.loads.wait(needed, self->clock().now(), started);
  for (auto& l : started)
    spdlog::info("{}: device {}: loading '{}' ({:.0f} ms)", st.net->self_name(), st.index, l.model->name, l.delay_ms);
  return wait;
}

// Runs `ds` and answers every schedule that waited for it with what would not load.
std::vector<msg::unloaded_model> apply_schedule(self_ptr self, msg::device_schedule& ds) {
  auto& st = self->state;
  on_schedule(self, ds);
  st.loading.reset();
  st.loads.clear();
  std::vector<msg::unloaded_model> failed;
  for (auto& [model, why] : st.load_failures) failed.push_back({st.net->self_name(), st.index, model, why});
  for (auto& p : st.owed) p.deliver(failed);
  st.owed.clear();
  return failed;
}

// An apply: a model held under the same name with another file gets the new file in its place
// (the device runs nothing while it loads); the old stays if it fails, and the answer says so.
std::vector<std::string> reload_files(self_ptr self, new_config& c) {
  auto& st = self->state;
  st.last_models.clear();  // an apply: its files may load now
  std::vector<std::string> problems;
  for (auto& s : st.sessions.all())
    if (auto* next = c.cfg->find_model(s.model->name); next && next->path != s.model->path) {
      auto kept = st.kept_files.find(next->name);
      auto running = kept != st.kept_files.end() ? kept->second : s.model->path;
      if (next->path == running) {  // back to the file it kept: nothing to load
        st.kept_files.erase(next->name);
        continue;
      }
      spdlog::info("{}: device {}: loading '{}' from {} in place of {}", st.net->self_name(), st.index, next->name,
                   next->path, running);
      if (auto loaded = st.executor->reload(*next); !loaded) {
        spdlog::error("{}: device {}: kept the file it ran: {}", st.net->self_name(), st.index, loaded.error());
        problems.push_back(
            fmt::format("device {} kept {} for model '{}': {}", st.index, running, next->name, loaded.error()));
        st.kept_files[next->name] = running;
      } else {
        st.kept_files.erase(next->name);
      }
    }
  st.cfg = c.cfg;
  st.sessions.rebind(*st.cfg);
  return problems;
}

}  // namespace sloserve::device_impl
