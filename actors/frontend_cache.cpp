// The frontend's response cache: replies of the pipelines that keep them, outputs of the models
// that keep theirs (actors/response_cache.hpp).
#include <chrono>

#include "actors/frontend_state.hpp"

namespace sloserve::frontend_impl {

namespace {

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

void report(frontend_state& st) {
  auto& c = st.cache.counted();
  st.net->metrics.cache_state(c.insertions, c.evictions, c.too_large, st.cache.bytes(), st.cache.entries());
}

}  // namespace

void configure_cache(frontend_state& st) {
  st.cache.clear();
  st.cache.resize(static_cast<uint64_t>(std::max(0L, st.cfg->runtime.response_cache_mb)) << 20);
  st.models_cache = std::any_of(st.cfg->models.begin(), st.cfg->models.end(), [](auto& m) { return m.response_cache; });
  if (st.models_cache ||
      std::any_of(st.cfg->pipelines.begin(), st.cfg->pipelines.end(), [](auto& p) { return p.response_cache; }))
    report(st);
}

bool reply_from_cache(self_ptr self, size_t pi, ingress& in, std::optional<cache_key>& key) {
  auto& st = self->state;
  auto& p = st.cfg->pipelines[pi];
  if (!p.response_cache || st.cache.capacity() == 0) return false;
  auto& rq = in.request;
  auto started = std::chrono::steady_clock::now();
  // The same inputs give the same outputs from the same layer and version of its models.
  auto k = st.cache.key_of(
      "pipeline " + p.name + " " + std::to_string(rq.start_layer) + " " + std::to_string(rq.version), rq.inputs);
  auto hit = st.cache.find(k);
  if (!hit) {
    key = k;
    st.net->metrics.cache_lookup(p.name, true, false, seconds_since(started));
    return false;
  }
  msg::client_reply r;
  r.request_id = rq.request_id;
  r.code = msg::status::ok;
  r.outputs = std::move(*hit);
  auto seconds = seconds_since(started);
  r.total_ms = seconds * 1e3;
  st.net->metrics.cache_lookup(p.name, true, true, seconds);
  ++st.stats.ok;
  if (in.sink)
    (*in.sink)(std::move(r));
  else
    st.net->to_client(in.client, std::move(r));
  count_reply(self, &p.name, msg::status::ok, seconds, true);
  return true;
}

bool stage_from_cache(self_ptr self, query& q, in_flight& f) {
  auto& st = self->state;
  // Every invocation passes here: no lookup of its model where none keeps outputs.
  if (!st.models_cache || st.cache.capacity() == 0 || !f.chain.empty()) return false;
  auto* spec = q.cfg->find_model(f.model);
  if (!spec || !spec->response_cache) return false;
  auto started = std::chrono::steady_clock::now();
  auto k = st.cache.key_of("model " + f.model + " " + std::to_string(spec->version), f.inputs);
  auto hit = st.cache.find(k);
  st.net->metrics.cache_lookup(f.model, false, hit.has_value(), seconds_since(started));
  if (!hit) {
    f.cached_as = k;
    return false;
  }
  // In flight as any invocation (an apply or the query's end finds it there), and answered by a
  // result this frontend sends itself: the walk goes on after what runs now, as for a device's.
  auto id = st.next_invocation++;
  f.from_cache = true;
  f.node.clear();
  f.sent = self->clock().now();
  q.invocations.push_back(id);
  st.invocations.emplace(id, std::move(f));
  msg::invocation_result r;
  r.id = id;
  r.code = msg::status::ok;
  r.outputs = std::move(*hit);
  self->send(self, std::move(r));
  return true;
}

void keep_in_cache(self_ptr self, const cache_key& key, const std::vector<tensor>& outputs) {
  auto& st = self->state;
  if (st.cache.insert(key, outputs) != response_cache::kept::off) report(st);
}

}  // namespace sloserve::frontend_impl
