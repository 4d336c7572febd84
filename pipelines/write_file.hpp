#pragma once
// Files that commands and benches write (--json, --report, --out, --write-config, P4 programs):
// their folders are created, and a file that cannot be written is an error that names it.

#include <string>
#include <string_view>

#include "pipelines/expected.hpp"

namespace sloserve {

// Writes `text` to `path` (replacing what was there), creating the folders it names that do not
// exist. The error names the path and the reason ("cannot write out/a.json: Permission denied").
status write_file(const std::string& path, std::string_view text);

}  // namespace sloserve
