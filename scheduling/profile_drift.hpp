#pragma once
// Online profile refresh: how long a model's batches take while serving, against what its
// profile says, and when to plan with a refreshed profile.
//
// Devices report, per session, the time their batches took and the time the profile gave for
// the same batches. The times add up per model until the profile's share reaches `min_work_ms`:
// one window, whose ratio (took / said) is the model's measured slowness. A window whose ratio
// departs from the adopted scale by more than `threshold` (either way, as a factor), and whose
// batches are off by `min_gap_ms` each on average (a model of microseconds is not judged by the
// scheduling delays around it), counts; `windows` such windows in a row adopt their mean ratio
// as the model's new scale, and one that does not ends the run (hysteresis: a passing hiccup
// changes nothing, a lasting drift does).
// The planner then runs the model at its profile × scale.

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "pipelines/model.hpp"

namespace sloserve::sched {

struct drift_options {
  double threshold = 0.25;   // a window counts when its ratio / scale passes 1.25 or falls under 1/1.25
  int windows = 3;           // counting windows in a row that adopt a new scale
  double min_work_ms = 200;  // profile time a window gathers before it is judged
  double min_gap_ms = 0.5;   // and only when its batches are off by this much each, on average
};

class profile_drift {
 public:
  explicit profile_drift(drift_options o = {}) : o_(o) {}

  // `batches` batches of `model` took `took_ms` where the profile said `said_ms`.
  void add(const std::string& model, double took_ms, double said_ms, double batches);
  // The models whose scale changed since the last call, with the new scale.
  std::vector<std::pair<std::string, double>> take_changes();
  // The adopted scale of `model` (1: as profiled).
  double scale(const std::string& model) const;

 private:
  struct model_state {
    double took = 0, said = 0, batches = 0;  // the open window
    double scale = 1;
    int counting = 0;      // windows in a row beyond the threshold
    double ratio_sum = 0;  // their ratios
  };
  drift_options o_;
  std::map<std::string, model_state> models_;
  std::vector<std::pair<std::string, double>> changes_;
};

// Brings `model` of `models` to its profile × `scale`, from the scale `scales` holds for it (1
// when none), and records the new one: the scale it had, when this changed it; nullopt for a
// model not there, a scale not positive, or the same scale.
std::optional<double> rescale_model(std::vector<model_spec>& models, std::map<std::string, double>& scales,
                                    const std::string& model, double scale);

}  // namespace sloserve::sched
