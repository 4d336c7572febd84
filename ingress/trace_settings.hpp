#pragma once
// Triton's trace extension: which requests a frontend traces, and where the traces go. A traced
// request's timeline (its arrival and reply, and per stage the model, device and batch that ran
// it, when it was sent, its queueing and compute on the device, and when its result came back)
// is written as one JSON line to the trace file (actors/frontend_trace.cpp).
//
// Settings, as Triton's API names them, each a list of strings:
//   trace_level    ["OFF"] or ["TIMESTAMPS"]  (TENSORS is refused: sloserve traces no tensors)
//   trace_rate     ["N"]  one request of every N is traced (1000)
//   trace_count    ["N"]  this many traces, then no more; -1: no limit (-1)
//   log_frequency  ["N"]  the file is flushed every N traces; 0: after each (0)
//   trace_file     ["PATH"]  where the lines go (its folders are created); needed to trace
//   trace_mode     ["triton"]
// The global settings apply to every pipeline; a pipeline's own replace them setting by setting,
// until cleared. Thread-safe: the frontend samples and writes, the ingresses read and change.

#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "pipelines/expected.hpp"

namespace sloserve::tracing {

// Settings by name, each a list of strings.
using values = std::map<std::string, std::vector<std::string>>;
// Changes: a setting's new value, or nullopt to clear a pipeline's own (back to the global one).
using changes = std::map<std::string, std::optional<std::vector<std::string>>>;

class tracer {
 public:
  tracer();
  ~tracer();
  tracer(const tracer&) = delete;
  tracer& operator=(const tracer&) = delete;

  // The settings that hold for `pipeline` ("": the global ones).
  values settings(const std::string& pipeline) const;
  // Changes the settings of `pipeline` ("": the global ones), all or none: an unknown name, a
  // value that is not one, a file that cannot be opened, or TIMESTAMPS without a file is refused.
  // Clearing is for a pipeline's own settings only. Returns the settings that hold after it.
  expected<values> update(const std::string& pipeline, const changes& c);

  // Whether the request of `pipeline` arriving now is traced (every trace_rate-th while
  // trace_count lasts, at level TIMESTAMPS).
  bool sample(const std::string& pipeline);
  // Writes one trace of `pipeline`, a line of JSON, to its file.
  void write(const std::string& pipeline, const std::string& line);

 private:
  struct setting {
    std::optional<std::string> level, file;
    std::optional<uint64_t> rate, log_frequency;
    std::optional<int64_t> count;
  };
  struct scope {  // the global settings, or one pipeline's own, and what they have traced
    setting s;
    uint64_t seen = 0;       // requests since the settings last changed
    uint64_t traced = 0;     // traces taken under them
    uint64_t unflushed = 0;  // lines written since the last flush
  };
  // The scope that counts `pipeline`'s traces: its own where it set any setting, else the global.
  const scope& holding(const std::string& pipeline) const;
  scope& counting(const std::string& pipeline);
  setting effective(const std::string& pipeline) const;
  static values to_values(const setting& s);
  static bool unset(const setting& s);  // no setting of its own
  std::FILE* file(const std::string& path);

  mutable std::mutex mu_;
  scope global_;
  std::map<std::string, scope> own_;         // by pipeline
  std::map<std::string, std::FILE*> files_;  // open trace files, by path
};

// The settings as Triton's HTTP API writes them: trace_level a list, the others strings.
std::string to_json(const values& v);
// A posted object of changes: a string or a list of strings each, null to clear.
expected<changes> changes_from_json(const std::string& text);

}  // namespace sloserve::tracing
