#include "actors/kserve_call.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <mutex>

#include "config/start_layer.hpp"
#include "gpu/image.hpp"
#include "ingress/shm_regions.hpp"
#include "messages/curve.hpp"
#include "messages/kserve_v2.hpp"
#include "pipelines/request_limits.hpp"

namespace sloserve::kserve {

bool invoked_per_row(const pipeline& p, size_t stage) {
  for (;;) {
    auto& s = p.stages[stage];
    if (s.fanout) return true;
    if (s.parents.size() != 1) return false;  // a root, or a join: invoked once
    stage = s.parents.front();
  }
}

expected<prepared_call> prepare_call(const cluster_config& cfg, const pipeline& p, std::vector<tensor> inputs,
                                     uint64_t request_id, call_parameters params) {
  auto& root = cfg.models[p.stages[p.roots().front()].model_index];
  auto started = start_model(cfg, p, params.start_layer, "start_layer");
  if (!started) return fail(started.error());
  const model_spec* from = *started;
  if (!limits::slo_in_range(params.slo_ms)) return fail(std::string("slo_ms must be in ") + limits::slo_range);
  if (inputs.size() != 1)
    return fail("pipeline '" + p.name + "' takes one input, '" + root.input_name + "'; the request has " +
                std::to_string(inputs.size()));
  auto& t = inputs.front();
  if (t.name != root.input_name)
    return fail("pipeline '" + p.name + "' has no input '" + t.name + "'; its input is '" + root.input_name + "'");
  prepared_call call;
  // Clients that batch say [N, ...]: the pipeline's tensors are one request each.
  auto& want = from->input.shape;
  call.batched = t.shape.size() == want.size() + 1 && t.shape.front() >= 1 &&
                 std::equal(want.begin(), want.end(), t.shape.begin() + 1);
  std::vector<tensor> items;
  if (call.batched) {
    auto n = t.shape.front();
    if (n > max_batch_items)
      return fail("input '" + t.name + "': a batch of " + std::to_string(n) + " items; at most " +
                  std::to_string(max_batch_items));
    if (auto whole = check_tensor_bytes(t); !whole)
      return fail("input '" + t.name + "': " + std::to_string(n) + " items of " +
                  tensor_spec{t.type, want}.to_string() + ": " + whole.error());
    for (int64_t i = 0; i < n; ++i) items.push_back(row_of(t, i));
  } else {
    items.push_back(std::move(t));
  }
  for (auto& x : items) {
    for (auto r : p.roots())
      if (auto ok = check_input(x, params.start_layer > 0 ? *from : cfg.models[p.stages[r].model_index]); !ok)
        return fail("input '" + x.name + "': " + ok.error());
    x.name = "input";
  }
  auto sig = signature_of(cfg, p);
  for (auto& name : params.outputs) {
    if (std::any_of(sig.outputs.begin(), sig.outputs.end(), [&](auto& o) { return o.name == name; })) continue;
    // NAME_rows: the rows of each item of a batch for a per-row output NAME (combine_replies).
    bool rows = std::any_of(sig.outputs.begin(), sig.outputs.end(), [&](auto& o) {
      return !o.spec.shape.empty() && o.spec.shape.front() < 0 && name == o.name + rows_suffix;
    });
    if (rows && call.batched) continue;
    if (rows)
      return fail("output '" + name + "' comes with a batched request (an input with a leading batch dimension)");
    std::string names;
    for (auto& o : sig.outputs) names += (names.empty() ? "'" : ", '") + o.name + "'";
    return fail("pipeline '" + p.name + "' has no output '" + name + "'; its outputs are " + names);
  }
  for (auto& [name, k] : params.classification) {
    auto o = std::find_if(sig.outputs.begin(), sig.outputs.end(), [&](auto& x) { return x.name == name; });
    if (o == sig.outputs.end())
      return fail("output '" + name + "' cannot be asked for as classes: it counts rows, it holds no scores");
    if (o->spec.type == dtype::bytes || o->spec.shape.empty())
      return fail("output '" + name + "' is " + o->spec.to_string() +
                  ": classification needs a vector of class scores");
  }
  call.outputs = std::move(params.outputs);
  call.classification = std::move(params.classification);
  for (auto& x : items) {
    msg::client_request r;
    r.pipeline = p.name;
    r.request_id = request_id++;
    r.start_layer = params.start_layer;
    r.slo_ms = params.slo_ms;
    r.version = params.version;
    r.inputs.push_back(std::move(x));
    call.requests.push_back(std::move(r));
  }
  return call;
}

namespace {

// The tensors of `parts` (each of `spec`'s shape) stacked along a new leading dimension.
tensor stacked(const std::string& name, const tensor_spec& spec, const std::vector<tensor*>& parts) {
  tensor t;
  t.name = name;
  t.type = spec.type;
  t.shape = spec.shape;
  t.shape.insert(t.shape.begin(), static_cast<int64_t>(parts.size()));
  size_t total = 0;
  for (auto* x : parts) total += x->data.size();
  char* out = nullptr;
  t.data = bytes::allocate(total, out);
  for (auto* x : parts) out = std::copy(x->data.begin(), x->data.end(), out);
  return t;
}

// shape_outputs for one item, without the client's batch dimension.
void shape_item(const cluster_config& cfg, const pipeline& p, const prepared_call& call, std::vector<tensor>& outputs) {
  // The leaves' results come named by their stage, one per invocation, in the order they ended.
  auto sig = signature_of(cfg, p);
  auto leaves = p.leaves();
  std::vector<tensor> shaped;
  for (size_t k = 0; k < leaves.size(); ++k) {
    auto& stage = p.stages[leaves[k]];
    auto& name = sig.outputs[k].name;
    if (!call.wants(name) && !call.wants(name + rows_suffix)) continue;
    std::vector<tensor*> parts;
    for (auto& o : outputs)
      if (o.name == stage.name) parts.push_back(&o);
    if (parts.size() == 1 && !invoked_per_row(p, leaves[k])) {
      shaped.push_back(std::move(*parts.front()));
      shaped.back().name = name;
    } else {
      // Invoked once per row of what came before (or, unexpectedly, not once): each invocation's
      // output one row of a [k, ...] tensor, k >= 0.
      shaped.push_back(stacked(name, cfg.models[stage.model_index].output, parts));
    }
  }
  outputs = std::move(shaped);
}

// `t` with its leading dimension padded with zero rows to `rows`.
tensor padded(const tensor& t, int64_t rows) {
  if (t.shape.empty() || t.shape.front() >= rows) return t;
  // Zero rows: zeros, or for bytes empty strings (a zero length each).
  auto row = tensor_spec{t.type, {t.shape.begin() + 1, t.shape.end()}}.zero_size().value_or(0);
  tensor out = t;
  out.shape.front() = rows;
  char* at = nullptr;
  auto added = row * static_cast<size_t>(rows - t.shape.front());
  out.data = bytes::allocate(t.data.size() + added, at);
  std::copy(t.data.begin(), t.data.end(), at);
  return out;
}

}  // namespace

void shape_outputs(const cluster_config& cfg, const pipeline& p, const prepared_call& call,
                   std::vector<tensor>& outputs) {
  shape_item(cfg, p, call, outputs);
  if (call.batched)
    for (auto& o : outputs) o.shape.insert(o.shape.begin(), 1);
}

namespace {

// The outputs `call` asks as classes, ranked and labelled (combine_replies).
void classify_outputs(const cluster_config& cfg, const pipeline& p, const prepared_call& call, msg::client_reply& r) {
  if (call.classification.empty() || r.code != msg::status::ok) return;
  auto sig = signature_of(cfg, p);
  for (auto& t : r.outputs) {
    auto k = call.classification.find(t.name);
    if (k == call.classification.end()) continue;
    auto o = std::find_if(sig.outputs.begin(), sig.outputs.end(), [&](auto& x) { return x.name == t.name; });
    static const std::vector<std::string> none;
    auto classes = classify(t, k->second, o == sig.outputs.end() ? none : cfg.models[o->model].label_names);
    if (!classes) {
      r.code = msg::status::error, r.reason = classes.error(), r.outputs.clear();
      return;
    }
    t = std::move(*classes);
  }
}

msg::client_reply combined(const cluster_config& cfg, const pipeline& p, const prepared_call& call,
                           std::vector<msg::client_reply> replies);

}  // namespace

msg::client_reply combine_replies(const cluster_config& cfg, const pipeline& p, const prepared_call& call,
                                  std::vector<msg::client_reply> replies) {
  auto r = combined(cfg, p, call, std::move(replies));
  classify_outputs(cfg, p, call, r);
  return r;
}

namespace {

msg::client_reply combined(const cluster_config& cfg, const pipeline& p, const prepared_call& call,
                           std::vector<msg::client_reply> replies) {
  auto n = replies.size();
  for (size_t i = 0; i < n; ++i)
    if (replies[i].code != msg::status::ok) {
      auto r = std::move(replies[i]);
      if (n > 1) r.reason = "item " + std::to_string(i) + " of " + std::to_string(n) + ": " + r.reason;
      r.outputs.clear();
      return r;
    }
  if (n == 0) return {};
  if (!call.batched) {
    auto out = std::move(replies.front());
    shape_outputs(cfg, p, call, out.outputs);
    return out;
  }
  for (auto& r : replies) shape_item(cfg, p, call, r.outputs);
  // Each output stacked over the items: [N, ...]; per-row leaves padded to the most rows.
  auto sig = signature_of(cfg, p);
  std::vector<tensor> stacked_outputs;
  for (size_t j = 0; j < replies.front().outputs.size(); ++j) {
    auto& first = replies.front().outputs[j];
    auto it = std::find_if(sig.outputs.begin(), sig.outputs.end(), [&](auto& o) { return o.name == first.name; });
    bool per_row = it != sig.outputs.end() && !it->spec.shape.empty() && it->spec.shape.front() < 0;
    int64_t most = 0;
    for (auto& r : replies) most = std::max(most, r.outputs[j].shape.empty() ? 0 : r.outputs[j].shape.front());
    std::vector<tensor> rows;
    std::vector<tensor*> parts;
    rows.reserve(n);
    for (auto& r : replies) rows.push_back(per_row && n > 1 ? padded(r.outputs[j], most) : r.outputs[j]);
    for (auto& x : rows) parts.push_back(&x);
    if (call.wants(first.name)) stacked_outputs.push_back(stacked(first.name, rows.front().spec(), parts));
    // The rows of each item: where items were padded (unless the request names outputs without
    // it), or where the request names it.
    bool named = !call.outputs.empty() && call.wants(first.name + rows_suffix);
    if (!per_row || (n == 1 && !named) || !call.wants(first.name + rows_suffix)) continue;
    tensor counts;
    counts.name = first.name + rows_suffix;
    counts.type = dtype::int64;
    counts.shape = {static_cast<int64_t>(n)};
    std::string data(n * sizeof(int64_t), '\0');
    for (size_t i = 0; i < n; ++i) {
      int64_t k = replies[i].outputs[j].shape.empty() ? 0 : replies[i].outputs[j].shape.front();
      std::memcpy(data.data() + i * sizeof(int64_t), &k, sizeof k);
    }
    counts.data = bytes(std::move(data));
    stacked_outputs.push_back(std::move(counts));
  }
  auto out = std::move(replies.front());
  out.outputs = std::move(stacked_outputs);
  // A batch is late on a path where any of its items is.
  for (size_t i = 1; i < n; ++i)
    for (auto& leaf : replies[i].late_paths)
      if (std::find(out.late_paths.begin(), out.late_paths.end(), leaf) == out.late_paths.end())
        out.late_paths.push_back(leaf);
  return out;
}

}  // namespace

bool admitted(const intake_admit& admit, msg::client_request& rq, double pipeline_slo_ms, const item_sink& sink) {
  if (!admit) return true;
  auto why = admit(rq, msg::slo_ms_of(rq, pipeline_slo_ms));
  if (why.empty()) return true;
  msg::client_reply r;
  r.request_id = rq.request_id;
  r.code = msg::status::overloaded;
  r.reason = std::move(why);
  (*sink)(std::move(r));
  return false;
}

std::function<item_sink(size_t)> gather_replies(size_t n, std::function<void(std::vector<msg::client_reply>)> done) {
  struct gathering {
    std::mutex m;
    std::vector<msg::client_reply> replies;
    std::vector<bool> got;
    size_t left = 0;
    std::function<void(std::vector<msg::client_reply>)> done;
  };
  auto g = std::make_shared<gathering>();
  g->replies.resize(n);
  g->got.assign(n, false);
  g->left = n;
  g->done = std::move(done);
  return [g](size_t i) {
    return std::make_shared<const std::function<void(msg::client_reply)>>([g, i](msg::client_reply r) {
      std::function<void(std::vector<msg::client_reply>)> fire;
      std::vector<msg::client_reply> all;
      {
        std::lock_guard lock(g->m);
        if (i >= g->got.size() || g->got[i]) return;
        g->got[i] = true;
        g->replies[i] = std::move(r);
        if (--g->left > 0) return;
        fire = std::move(g->done);
        all = std::move(g->replies);
      }
      fire(std::move(all));
    });
  };
}

expected<token_table> read_tokens(const security_options& sec) {
  token_table out;
  if (!sec.enabled()) return out;
  auto add = [&](const std::string& path, const std::string* tenant) -> status {
    auto token = read_token_file(path);
    if (!token) return fail(token.error());
    out.tokens.insert(*token);
    if (tenant) out.tenant_of[*token] = *tenant;
    return {};
  };
  for (auto& path : sec.tokens)
    if (auto s = add(path, nullptr); !s) return fail(s.error());
  for (auto& t : sec.tenants)
    for (auto& path : t.tokens)
      if (auto s = add(path, &t.name); !s) return fail("tenant '" + t.name + "': " + s.error());
  return out;
}

namespace {

// The token of "Bearer TOKEN"; none for anything else.
std::optional<std::string> bearer(const std::string* authorization) {
  if (!authorization || authorization->rfind("Bearer ", 0) != 0) return std::nullopt;
  return authorization->substr(7);
}

}  // namespace

std::string refused_token(const token_table& table, const std::string* authorization) {
  if (table.tokens.empty()) return {};
  auto token = bearer(authorization);
  if (token && table.tokens.count(*token)) return {};
  return !authorization ? "an authorization: Bearer token is required" : "the bearer token is not admitted";
}

std::string tenant_of(const token_table& table, const std::string* authorization, const std::string* named) {
  if (table.tokens.empty()) return named ? *named : std::string();
  auto token = bearer(authorization);
  if (!token) return {};
  auto it = table.tenant_of.find(*token);
  return it == table.tenant_of.end() ? std::string() : it->second;
}

std::string shm_owner(const token_table& table, const std::string* authorization) {
  if (table.tokens.empty()) return {};
  auto token = bearer(authorization);
  return token ? shm::owner_of_token(*token) : std::string();
}

expected<shared_outputs> take_shared_memory(const shm::registry* regions, const std::string& owner,
                                            std::vector<tensor>& inputs,
                                            const std::vector<std::pair<size_t, shm_ref>>& shm_inputs,
                                            const std::map<std::string, shm_ref>& outputs) {
  shared_outputs out;
  if (shm_inputs.empty() && outputs.empty()) return out;
  if (!regions) return fail(shm::off_reason);
  for (auto& [i, ref] : shm_inputs) {
    auto& t = inputs[i];
    auto read = regions->read_tensor(owner, t.name, t.type, t.shape, ref);
    if (!read) return fail(read.error());
    t = std::move(*read);
  }
  for (auto& [name, ref] : outputs) {
    auto w = regions->write(owner, ref);
    if (!w) return fail("output '" + name + "': " + w.error());
    out.refs[name] = ref;
    out.windows[name] = std::move(*w);
  }
  return out;
}

status write_shared_outputs(const shared_outputs& out, const std::vector<tensor>& outputs) {
  for (auto& t : outputs) {
    auto it = out.windows.find(t.name);
    if (it == out.windows.end()) continue;
    if (t.data.size() > it->second.size)
      return fail("output '" + t.name + "' has " + std::to_string(t.data.size()) +
                  " bytes, more than the shared_memory_byte_size " + std::to_string(it->second.size) + " of region '" +
                  out.refs.at(t.name).region + "'");
    if (auto ok = it->second.put(t.data.view()); !ok)
      return fail("output '" + t.name + "' into region '" + out.refs.at(t.name).region + "': " + ok.error());
  }
  return {};
}

}  // namespace sloserve::kserve
