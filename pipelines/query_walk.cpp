#include "pipelines/query_walk.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string_view>

namespace sloserve {
namespace {

// A stage whose declared input differs from what its parent emits gets a tensor of its own
// declared shape derived from the parent's row (it stands in for crop-and-resize).
tensor adapt(const tensor& t, const tensor_spec& spec) {
  if (t.type == spec.type && t.shape == spec.shape) return t;
  return make_tensor(spec, sample_fingerprint(t.data), t.name);
}

// A uniform draw in [0, 1) from the query and stage.
double draw(uint64_t query_id, size_t stage) {
  uint64_t h =
      fingerprint(std::string_view(reinterpret_cast<const char*>(&query_id), 8)) ^ (stage * 0x9e3779b97f4a7c15ULL);
  return static_cast<double>(h >> 11) / static_cast<double>(1ULL << 53);
}

}  // namespace

int top_class(const std::vector<tensor>& outputs) {
  if (outputs.empty()) return -1;
  auto& t = outputs.front();
  if (t.type != dtype::float32 || t.shape.empty() || !check_tensor_bytes(t) || t.shape.back() < 1) return -1;
  auto classes = static_cast<size_t>(t.shape.back());
  if (t.data.size() < classes * sizeof(float)) return -1;
  std::vector<float> x(classes);
  std::memcpy(x.data(), t.data.data(), classes * sizeof(float));
  return static_cast<int>(std::max_element(x.begin(), x.end()) - x.begin());
}

double least_top_probability(const tensor& t) {
  if (t.type != dtype::float32 || t.shape.empty() || !check_tensor_bytes(t)) return 0;
  auto classes = static_cast<size_t>(t.shape.back());
  size_t n = t.data.size() / sizeof(float);
  if (classes == 0 || n == 0 || n % classes) return 0;
  double least = 1;
  for (size_t row = 0; row < n / classes; ++row) {
    std::vector<float> x(classes);
    std::memcpy(x.data(), t.data.data() + row * classes * sizeof(float), classes * sizeof(float));
    float top = *std::max_element(x.begin(), x.end());
    if (!std::isfinite(top)) return 0;
    double sum = 0;
    for (float v : x) sum += std::exp(static_cast<double>(v) - top);
    least = std::min(least, 1 / sum);  // softmax of the top class: e^0 / sum
  }
  return least;
}

bool cascade_confident(const model_spec& first, const cascade_spec& c, const std::vector<tensor>& outputs,
                       uint64_t query_id, size_t stage) {
  if (first.pass_rate) return draw(query_id, stage) < *first.pass_rate;
  return !outputs.empty() && least_top_probability(outputs.front()) >= c.confidence;
}

double cascade_first_share(const model_spec& first, const model_spec& second) {
  double a = first.profile.latency_ms_at(1), b = second.profile.latency_ms_at(1);
  return a + b > 0 ? a / (a + b) : 0.5;
}

double declared_fallthrough(const model_spec& first) {
  return first.pass_rate ? 1 - *first.pass_rate : 0.5;
}

int64_t stage_finish_ns(const pipeline& p, const slo_split& split, size_t stage, int64_t span_ns) {
  auto at = static_cast<int64_t>(static_cast<double>(span_ns) * split.finish_offset_ms[stage] / p.slo_ms);
  return std::min(span_ns, at);
}

int64_t path_deadline_ns(const pipeline& p, size_t leaf, int64_t span_ns) {
  auto at = static_cast<int64_t>(static_cast<double>(span_ns) * path_slo_ms(p, leaf) / p.slo_ms);
  return std::min(span_ns, at);
}

bool path_late(const pipeline& p, size_t stage, int64_t elapsed_ns, int64_t span_ns) {
  auto& s = p.stages[stage];
  return s.slo_ms && s.children.empty() && elapsed_ns > path_deadline_ns(p, stage, span_ns);
}

int64_t first_model_finish_ns(const pipeline& p, const std::vector<model_spec>& models, const slo_split& split,
                              size_t stage, int64_t span_ns) {
  auto at = stage_finish_ns(p, split, stage, span_ns);
  auto& c = p.stages[stage].cascade;
  if (!c) return at;
  double share = stage < split.first_share.size() && split.first_share[stage] > 0
                     ? split.first_share[stage]
                     : cascade_first_share(models[p.stages[stage].model_index], models[c->second_index]);
  double first_ms = split.finish_offset_ms[stage] - split.budget_ms[stage] * (1 - share);
  return std::min(at, static_cast<int64_t>(static_cast<double>(span_ns) * first_ms / p.slo_ms));
}

std::vector<tensor> output_items_of(const tensor& t, const output_items& items, const tensor_spec& spec) {
  std::vector<tensor> out;
  if (t.type != dtype::float32 || t.shape.size() != 2 || !check_tensor_bytes(t)) return out;
  auto g = t.shape[0], f = t.shape[1];
  auto c = items.score_column;
  if (c < 0 || c >= f) return out;
  auto width = static_cast<size_t>(f - 1);
  bool fills = spec.type == dtype::float32 && spec.elements() == width;
  for (int64_t r = 0; r < g; ++r) {
    const char* row = t.data.data() + static_cast<size_t>(r * f) * sizeof(float);
    float score = 0;
    std::memcpy(&score, row + static_cast<size_t>(c) * sizeof(float), sizeof(float));
    if (!(score > items.score_above)) continue;
    tensor item;
    item.name = t.name;
    item.type = dtype::float32;
    item.shape = {static_cast<int64_t>(width)};
    char* at = nullptr;
    item.data = bytes::allocate(width * sizeof(float), at);
    auto before = static_cast<size_t>(c) * sizeof(float);
    std::memcpy(at, row, before);
    std::memcpy(at + before, row + before + sizeof(float), (width - static_cast<size_t>(c)) * sizeof(float));
    if (fills)
      item.shape = spec.shape;
    else
      item = adapt(item, spec);
    out.push_back(std::move(item));
  }
  return out;
}

int64_t drawn_items(uint64_t query_id, size_t stage, double score_above, int64_t rows) {
  int64_t k = 0;
  for (int64_t r = 0; r < rows; ++r)
    if (draw(query_id * 0x100000001b3ULL + static_cast<uint64_t>(r), stage) >= score_above) ++k;
  return k;
}

int64_t fanout_rows(uint64_t query_id, size_t stage, double f, int64_t rows) {
  double u = draw(query_id, stage);
  auto k = static_cast<int64_t>(std::floor(f)) + (u < f - std::floor(f) ? 1 : 0);
  return std::min(k, rows);
}

query_walk::query_walk(const pipeline& p, const std::vector<model_spec>& models, uint64_t query_id)
    : p_(&p),
      models_(&models),
      query_id_(query_id),
      outstanding_(p.stages.size(), 0),
      finished_(p.stages.size(), 0),
      joined_(p.stages.size(), 0),
      first_output_(p.stages.size()) {}

std::vector<query_walk::spawn> query_walk::start(std::vector<tensor> inputs) {
  std::vector<spawn> out;
  auto roots = p_->roots();
  for (size_t i = 0; i < roots.size(); ++i) {
    ++outstanding_[roots[i]];
    out.push_back({roots[i], i + 1 == roots.size() ? std::move(inputs) : inputs, next_item_++});
  }
  return out;
}

void query_walk::spawn_from(size_t stage, const tensor& src, std::vector<spawn>& out) {
  auto& s = p_->stages[stage];
  auto& spec = (*models_)[s.model_index].input;
  auto add = [&](tensor t) {
    ++outstanding_[stage];
    out.push_back({stage, {std::move(t)}, next_item_++});
  };
  if (s.items) {
    for (auto& t : output_items_of(src, *s.items, spec)) add(std::move(t));
  } else if (!s.fanout) {
    add(adapt(src, spec));
  } else {
    auto k = fanout_rows(query_id_, stage, *s.fanout, row_count(src));
    for (int64_t i = 0; i < k; ++i) add(adapt(row_of(src, i), spec));
  }
}

std::vector<tensor> query_walk::take_results() {
  std::stable_sort(results_.begin(), results_.end(), [](auto& a, auto& b) { return a.first < b.first; });
  std::vector<tensor> out;
  out.reserve(results_.size());
  for (auto& r : results_) out.push_back(std::move(r.second));
  results_.clear();
  return out;
}

std::vector<query_walk::spawn> query_walk::on_result(size_t stage, std::vector<tensor> outputs, uint32_t item) {
  std::vector<spawn> out;
  auto& s = p_->stages[stage];
  if (outstanding_[stage]) --outstanding_[stage];
  if (first_output_[stage].empty()) first_output_[stage] = outputs;
  for (auto c : s.children)
    if (p_->stages[c].parents.size() == 1 && !outputs.empty()) spawn_from(c, outputs.front(), out);  // joins: settle
  if (s.children.empty())
    for (auto& t : outputs) {
      t.name = s.name;
      results_.emplace_back(item, std::move(t));
    }
  settle(out);
  return out;
}

void query_walk::settle(std::vector<spawn>& out) {
  bool all = true;
  for (auto v : p_->topo) {
    if (finished_[v]) continue;
    auto& s = p_->stages[v];
    bool parents_done = std::all_of(s.parents.begin(), s.parents.end(), [&](size_t u) { return finished_[u] != 0; });
    bool join = s.parents.size() > 1;
    if (join && parents_done && !joined_[v]) {
      joined_[v] = 1;
      auto& src = first_output_[s.parents.front()];
      if (!src.empty()) spawn_from(v, src.front(), out);
    }
    if (parents_done && outstanding_[v] == 0 && (!join || joined_[v])) finished_[v] = 1;
    all &= finished_[v] != 0;
  }
  done_ = all;
}

}  // namespace sloserve
