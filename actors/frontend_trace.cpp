// Triton's trace extension in the frontend: a sampled query's timeline as one JSON line.

#include <nlohmann/json.hpp>

#include "actors/frontend_state.hpp"
#include "actors/link.hpp"
#include "ingress/trace_settings.hpp"

namespace sloserve::frontend_impl {

bool traced(const frontend_state& st, const std::string& pipeline) {
  return st.net && st.net->tracer && st.net->tracer->sample(pipeline);
}

// {"id", "pipeline", "version", "status", "reason" (when not ok), "timestamps": [REQUEST_START,
// REQUEST_END as {"name", "ns"}], "stages": [{"stage", "model", "version", "node", "device",
// "batch", "sent_ns", "queue_ns", "compute_ns", "result_ns"}]}; times in ns since the epoch
// (the frontend's wall clock), durations in ns as the device measured them.
void write_trace(const frontend_state& st, const query& q, const msg::client_reply& r, clock_time now) {
  auto now_ns = st.wall_us ? st.wall_us() * 1000 : 0;
  auto wall = [&](clock_time t) {
    return now_ns - std::chrono::duration_cast<std::chrono::nanoseconds>(now - t).count();
  };
  nlohmann::json line = {
      {"id", q.request_id},
      {"pipeline", q.pipe().name},
      {"status", std::string(msg::status_name(r.code))},
      {"timestamps",
       {{{"name", "REQUEST_START"}, {"ns", wall(q.arrival)}}, {{"name", "REQUEST_END"}, {"ns", now_ns}}}}};
  if (q.version) line["version"] = q.version;
  if (r.code != msg::status::ok) line["reason"] = r.reason;
  auto& stages = line["stages"] = nlohmann::json::array();
  for (size_t i = 0; i < q.timings.size(); ++i) {
    auto& t = q.timings[i];
    nlohmann::json s = {{"stage", t.stage},
                        {"model", t.model},
                        {"version", t.version},
                        {"node", t.node},
                        {"device", t.device},
                        {"batch", t.batch},
                        {"queue_ns", static_cast<int64_t>(t.queue_ms * 1e6)},
                        {"compute_ns", static_cast<int64_t>(t.exec_ms * 1e6)}};
    if (i < q.spans.size()) s["sent_ns"] = wall(q.spans[i].first), s["result_ns"] = wall(q.spans[i].second);
    stages.push_back(std::move(s));
  }
  st.net->tracer->write(q.pipe().name, line.dump());
}

}  // namespace sloserve::frontend_impl
