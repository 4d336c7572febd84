#include "pipelines/pipeline.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>

namespace sloserve {

std::vector<size_t> stage_models(const stage& s) {
  auto out = s.variant_indices;
  if (s.cascade) out.push_back(s.cascade->second_index);
  for (auto& v : s.versions)
    if (std::find(out.begin(), out.end(), v.model_index) == out.end()) out.push_back(v.model_index);
  return out;
}

std::vector<int> model_priorities(const std::vector<pipeline>& pipes, size_t models) {
  std::vector<int> out(models, 0);
  std::vector<bool> seen(models, false);
  for (auto& p : pipes)
    for (auto& s : p.stages)
      for (auto m : stage_models(s))
        if (m < models) out[m] = seen[m] ? std::max(out[m], p.priority) : p.priority, seen[m] = true;
  return out;
}

std::vector<uint32_t> pipeline_versions(const pipeline& p) {
  std::vector<uint32_t> out{1};
  for (auto& s : p.stages)
    for (auto& v : s.versions) out.push_back(static_cast<uint32_t>(v.version));
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

size_t pick_version(const std::vector<stage_version>& vs, uint32_t version, std::mt19937_64& rng) {
  double total = 0;
  for (auto& v : vs) {
    if (version > 0 && static_cast<uint32_t>(v.version) == version) return v.model_index;
    total += v.weight;
  }
  double at = std::uniform_real_distribution<double>(0, total)(rng);
  for (auto& v : vs) {
    if (at < v.weight) return v.model_index;
    at -= v.weight;
  }
  for (auto it = vs.rbegin(); it != vs.rend(); ++it)
    if (it->weight > 0) return it->model_index;
  return vs.front().model_index;
}

std::vector<size_t> pipeline::roots() const {
  std::vector<size_t> r;
  for (size_t i = 0; i < stages.size(); ++i)
    if (stages[i].after.empty()) r.push_back(i);
  return r;
}

std::vector<size_t> pipeline::leaves() const {
  std::vector<size_t> r;
  for (size_t i = 0; i < stages.size(); ++i)
    if (stages[i].children.empty()) r.push_back(i);
  return r;
}

std::optional<size_t> pipeline::find_stage(const std::string& n) const {
  for (size_t i = 0; i < stages.size(); ++i)
    if (stages[i].name == n) return i;
  return std::nullopt;
}

namespace {

// The model `name` names: the model of that name, else the lowest version of that file name.
std::optional<size_t> find_model(const std::vector<model_spec>& models, const std::string& name) {
  auto m = std::find_if(models.begin(), models.end(), [&](const model_spec& ms) { return ms.name == name; });
  if (m != models.end()) return static_cast<size_t>(m - models.begin());
  std::optional<size_t> lowest;
  for (size_t i = 0; i < models.size(); ++i)
    if (models[i].family() == name && (!lowest || models[i].version < models[*lowest].version)) lowest = i;
  return lowest;
}

// Stage `i`'s versions: each a version of its model, weights not negative and not all zero; the
// stage plans with the version of the largest weight.
void resolve_versions(stage& s, size_t i, const std::vector<model_spec>& models, std::vector<pipeline_issue>& issues) {
  double total = 0, largest = -1;
  for (auto& v : s.versions) {
    auto m = std::find_if(models.begin(), models.end(),
                          [&](const model_spec& ms) { return ms.family() == s.model && ms.version == v.version; });
    if (m == models.end()) {
      issues.push_back({i, "stage '" + s.name + "' names version " + std::to_string(v.version) + " of model '" +
                               s.model + "', which the file does not have"});
      continue;
    }
    if (!(v.weight >= 0)) issues.push_back({i, "stage '" + s.name + "' has a negative version weight"});
    v.model_index = static_cast<size_t>(m - models.begin());
    total += v.weight;
    if (v.weight > largest) largest = v.weight, s.model_index = v.model_index;
  }
  if (!(total > 0)) issues.push_back({i, "stage '" + s.name + "' gives its versions no weight"});
  s.variant_indices = {s.model_index};
}

// Stage `i`'s cascade: two models that take and give the same tensors; the first runs as the
// stage's model.
// `cascade.skew`: WEG's hyper-parameters in range, the compact model's figures one per class
// count, and the oracle's accuracy, which the estimate compares with.
void check_skew(const stage& s, size_t i, const model_spec& oracle, std::vector<pipeline_issue>& issues) {
  auto& k = *s.cascade->skew;
  auto bad = [&](const std::string& what) { issues.push_back({i, "stage '" + s.name + "' cascade skew " + what}); };
  if (k.window < 2) bad("window must be at least 2");
  if (k.min_count < 1) bad("min_count must be at least 1");
  if (k.tau_r < 0) bad("tau_r cannot be negative");
  if (!(k.epsilon >= 0 && k.epsilon <= 1)) bad("epsilon must be in [0, 1]");
  if (!(k.tau_fp > 0)) bad("tau_fp must be positive");
  if (!(std::abs(k.tau_a) < 1)) bad("tau_a must be in (-1, 1)");
  if (k.classes.empty() || k.a_in.size() != k.classes.size() || k.e_in_out.size() != k.classes.size() ||
      k.a_out.size() != k.classes.size())
    bad("needs classes, a_in, e_in_out and a_out of one length (one figure per class count)");
  if (!std::is_sorted(k.classes.begin(), k.classes.end()) ||
      std::adjacent_find(k.classes.begin(), k.classes.end()) != k.classes.end() ||
      std::any_of(k.classes.begin(), k.classes.end(), [](double n) { return !(n >= 1); }))
    bad("classes must be ascending class counts of at least 1");
  for (auto* v : {&k.a_in, &k.e_in_out, &k.a_out})
    if (std::any_of(v->begin(), v->end(), [](double x) { return !(x >= 0 && x <= 1); }))
      bad("a_in, e_in_out and a_out are fractions in [0, 1]");
  if (!oracle.accuracy) bad("compares with the oracle's accuracy: '" + oracle.name + "' needs 'accuracy'");
}

void resolve_cascade(stage& s, size_t i, const std::vector<model_spec>& models, std::vector<pipeline_issue>& issues) {
  auto find = [&](const std::string& name) { return find_model(models, name); };
  auto& c = *s.cascade;
  if (c.models.size() != 2) {
    issues.push_back({i, "stage '" + s.name + "' cascade needs exactly two models: [first, second]"});
  } else {
    auto first = find(c.models[0]), second = find(c.models[1]);
    for (auto& m : c.models)
      if (!find(m)) issues.push_back({i, "stage '" + s.name + "' cascade has unknown model '" + m + "'"});
    if (first && second) {
      auto &a = models[*first], &b = models[*second];
      if (a.input.type != b.input.type || a.input.shape != b.input.shape || a.output.type != b.output.type ||
          a.output.shape != b.output.shape)
        issues.push_back({i, "stage '" + s.name + "' cascade: '" + b.name + "' takes " + b.input.to_string() +
                                 " and gives " + b.output.to_string() + ", but '" + a.name + "' takes " +
                                 a.input.to_string() + " and gives " + a.output.to_string()});
      if (*first == *second) issues.push_back({i, "stage '" + s.name + "' cascade names '" + a.name + "' twice"});
      if (!(c.confidence > 0 && c.confidence <= 1))
        issues.push_back({i, "stage '" + s.name + "' cascade confidence must be in (0, 1]"});
      if (!a.pass_rate && a.path.empty())
        issues.push_back({i, "stage '" + s.name + "' cascade: '" + a.name +
                                 "' has no outputs to judge (no 'path'): it needs 'pass_rate', the fraction "
                                 "it answers itself"});
      if (c.skew) check_skew(s, i, b, issues);
      s.model = a.name;
      s.model_index = *first;
      s.variant_indices = {*first};
      c.second_index = *second;
    }
  }
}

// Stage `i`'s variants: models that take and give the same tensors (images may differ in size),
// each with an accuracy; it starts with the most accurate.
void resolve_variants(stage& s, size_t i, const std::vector<model_spec>& models, std::vector<pipeline_issue>& issues) {
  auto find = [&](const std::string& name) { return find_model(models, name); };
  for (auto& v : s.variants) {
    auto m = find(v);
    if (!m) {
      issues.push_back({i, "stage '" + s.name + "' has unknown variant '" + v + "'"});
      continue;
    }
    if (std::find(s.variant_indices.begin(), s.variant_indices.end(), *m) != s.variant_indices.end()) {
      issues.push_back({i, "stage '" + s.name + "' lists variant '" + v + "' twice"});
      continue;
    }
    auto& first = models[s.variant_indices.empty() ? *m : s.variant_indices.front()];
    auto& mv = models[*m];
    auto same = [](const tensor_spec& a, const tensor_spec& b) { return a.type == b.type && a.shape == b.shape; };
    // Variants that take images may differ in size: the device resizes what a request carries.
    bool images = mv.preprocess && first.preprocess && mv.input.type == first.input.type &&
                  mv.input.shape.size() == first.input.shape.size() && !mv.input.shape.empty() &&
                  mv.input.shape[0] == first.input.shape[0];
    if (!(same(mv.input, first.input) || images) || !same(mv.output, first.output))
      issues.push_back({i, "stage '" + s.name + "': variant '" + v + "' takes " + mv.input.to_string() + " and gives " +
                               mv.output.to_string() + ", but variant '" + first.name + "' takes " +
                               first.input.to_string() + " and gives " + first.output.to_string()});
    if (!mv.accuracy)
      issues.push_back({i, "stage '" + s.name + "': variant '" + v + "' declares no 'accuracy' to choose by"});
    s.variant_indices.push_back(*m);
  }
  // It starts with the most accurate (the first listed among equals).
  if (!s.variant_indices.empty()) {
    s.model_index = s.variant_indices.front();
    for (auto m : s.variant_indices)
      if (models[m].accuracy.value_or(0) > models[s.model_index].accuracy.value_or(0)) s.model_index = m;
    s.model = models[s.model_index].name;
  }
}

// Each stage's parents and children from its `after`.
void link_stages(pipeline& p, const std::map<std::string, size_t>& by_name, std::vector<pipeline_issue>& issues) {
  for (size_t i = 0; i < p.stages.size(); ++i) {
    auto& s = p.stages[i];
    for (auto& a : s.after) {
      auto it = by_name.find(a);
      if (it == by_name.end()) {
        issues.push_back({i, "stage '" + s.name + "' comes after unknown stage '" + a + "'"});
        continue;
      }
      if (it->second == i) {
        issues.push_back({i, "stage '" + s.name + "' comes after itself (a cycle)"});
        continue;
      }
      s.parents.push_back(it->second);
      p.stages[it->second].children.push_back(i);
    }
  }
}

// The stages in topological order (Kahn's algorithm); a stage left out is on a cycle or hangs
// below one, and is reported so.
void order_stages(pipeline& p, std::vector<pipeline_issue>& issues) {
  std::vector<size_t> indeg(p.stages.size());
  for (size_t i = 0; i < p.stages.size(); ++i) indeg[i] = p.stages[i].parents.size();
  p.topo.clear();
  std::vector<size_t> ready;
  for (size_t i = 0; i < p.stages.size(); ++i)
    if (indeg[i] == 0) ready.push_back(i);
  while (!ready.empty()) {
    auto v = ready.back();
    ready.pop_back();
    p.topo.push_back(v);
    for (auto c : p.stages[v].children)
      if (--indeg[c] == 0) ready.push_back(c);
  }
  if (p.topo.size() != p.stages.size()) {
    // A stage on a cycle reaches itself; one that does not only hangs below a cycle.
    std::vector<bool> done(p.stages.size());
    for (auto v : p.topo) done[v] = true;
    for (size_t i = 0; i < p.stages.size(); ++i) {
      if (done[i]) continue;
      std::vector<size_t> stack{p.stages[i].children.begin(), p.stages[i].children.end()};
      std::vector<bool> seen(p.stages.size());
      bool on_cycle = false;
      while (!stack.empty() && !on_cycle) {
        auto v = stack.back();
        stack.pop_back();
        if (v == i) on_cycle = true;
        if (seen[v]) continue;
        seen[v] = true;
        for (auto c : p.stages[v].children) stack.push_back(c);
      }
      issues.push_back({i, on_cycle ? "stage '" + p.stages[i].name + "' is on a cycle"
                                    : "stage '" + p.stages[i].name + "' is unreachable: it depends on a cycle"});
    }
  }
}

// A data-dependent fan-out reads its parent's output: named as the parent's model names it,
// float32 rows of at least a score column. The planning estimate is its `expect`.
void check_items(pipeline& p, size_t i, const std::vector<model_spec>& models, std::vector<pipeline_issue>& issues) {
  auto& s = p.stages[i];
  if (!s.items) return;
  auto& it = *s.items;
  s.fanout = it.expect.value_or(1);
  if (it.expect && !(*it.expect > 0)) issues.push_back({i, "stage '" + s.name + "' fanout expect must be positive"});
  if (!std::isfinite(it.score_above))
    issues.push_back({i, "stage '" + s.name + "' fanout score_above must be a number"});
  if (s.parents.empty()) {
    issues.push_back({i, "stage '" + s.name + "' fans out from_output but has no parent"});
    return;
  }
  auto& parent = p.stages[s.parents.front()];
  auto& m = models[parent.model_index];
  auto rows = "'" + m.name + "' (stage '" + parent.name + "')";
  if (it.from_output != m.output_name) {
    issues.push_back({i, "stage '" + s.name + "' fanout from_output '" + it.from_output + "' is not an output of " +
                             rows + ": its output is '" + m.output_name + "'"});
    return;
  }
  if (m.output.type != dtype::float32 || m.output.shape.size() != 2)
    issues.push_back({i, "stage '" + s.name + "' fans out from the output of " + rows +
                             ", which must be float32 [items, columns] with a score column"});
  else if (it.score_column < 0 || it.score_column >= m.output.shape[1])
    issues.push_back({i, "stage '" + s.name + "' fanout score_column " + std::to_string(it.score_column) +
                             " is outside the " + std::to_string(m.output.shape[1]) + " columns of " + rows});
}

}  // namespace

std::vector<pipeline_issue> resolve(pipeline& p, const std::vector<model_spec>& models) {
  std::vector<pipeline_issue> issues;
  std::map<std::string, size_t> by_name;
  for (size_t i = 0; i < p.stages.size(); ++i) {
    auto& s = p.stages[i];
    s.parents.clear();
    s.children.clear();
    if (!by_name.emplace(s.name, i).second)
      issues.push_back({i, "duplicate stage name '" + s.name + "' in pipeline '" + p.name + "'"});
    s.variant_indices.clear();
    if (s.cascade) {
      resolve_cascade(s, i, models, issues);
    } else if (!s.versions.empty()) {
      resolve_versions(s, i, models, issues);
    } else if (s.variants.empty()) {
      if (auto m = find_model(models, s.model)) {
        s.model_index = *m;
        s.variant_indices = {*m};
      } else {
        issues.push_back({i, "stage '" + s.name + "' uses unknown model '" + s.model + "'"});
      }
    } else {
      resolve_variants(s, i, models, issues);
    }
    if (s.fanout && !(*s.fanout > 0)) issues.push_back({i, "stage '" + s.name + "' has a non-positive fanout"});
  }
  link_stages(p, by_name, issues);
  if (issues.empty())
    for (size_t i = 0; i < p.stages.size(); ++i) check_items(p, i, models, issues);
  if (p.stages.empty()) issues.push_back({0, "pipeline '" + p.name + "' has no stages"});
  order_stages(p, issues);
  return issues;
}

}  // namespace sloserve
