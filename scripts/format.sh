#!/usr/bin/env bash
# clang-format over the project's C++ sources (.clang-format at the root).
#   scripts/format.sh          rewrites the files in place
#   scripts/format.sh --check  lists the files that differ and fails if any does (CI)
set -euo pipefail
cd "$(dirname "$0")/.."
command -v clang-format >/dev/null || { echo "clang-format is missing (apt-get install clang-format)" >&2; exit 2; }
mapfile -t files < <(git ls-files --cached --others --exclude-standard '*.cpp' '*.hpp' '*.cu' '*.cpp.in')
if [[ "${1:-}" == "--check" ]]; then
  bad=0
  for f in "${files[@]}"; do
    if ! clang-format --dry-run --Werror "$f" >/dev/null 2>&1; then
      echo "not formatted: $f (scripts/format.sh fixes it)" >&2
      bad=1
    fi
  done
  exit $bad
fi
clang-format -i "${files[@]}"
