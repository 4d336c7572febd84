#pragma once
// Triton's logging extension: a node's log settings, read and changed while it serves
// (GET/POST /v2/logging, gRPC LogSettings). They are the process's: the node that answers is the
// node that changes.
//
//   log_file           string  where the log goes; "" is standard error, as the node started
//   log_info           bool    info lines
//   log_warning        bool    warnings
//   log_error          bool    errors
//   log_verbose_level  uint32  0: none; 1: debug lines; 2 or more: trace lines too (needs log_info)
//   log_format         string  "default" ([12:34:56.789] [info] ...) or "ISO8601" (UTC timestamps)
//
// sloserve logs at or above one level, so the booleans can only turn off the lower levels first:
// a change that leaves errors off but warnings on (or warnings off and info on) is refused.

#include <cstdint>
#include <map>
#include <string>
#include <variant>

#include "pipelines/expected.hpp"

namespace sloserve::logs {

using value = std::variant<bool, uint32_t, std::string>;
using settings = std::map<std::string, value>;

// Every setting as the process logs now.
settings current();

// Applies `changes` (any of the names above) at once, or none of them: an unknown name, a value
// of the wrong type, a combination one level cannot express, or a log_file that cannot be opened
// (its folders are created) is refused with the reason. Returns every setting after the change.
expected<settings> update(const settings& changes);

// The settings as Triton's HTTP API writes them: a JSON object.
std::string to_json(const settings& s);
// A JSON object of settings as a client posts them; why not, for anything else (a value that is
// not a boolean, a non-negative integer or a string).
expected<settings> from_json(const std::string& text);

}  // namespace sloserve::logs
