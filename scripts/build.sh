#!/usr/bin/env bash
# Configures and builds sloserve into build/ (ccache when present): every target, or those named.
#   bash scripts/build.sh              everything: sloserve, the tests, the benches, the models
#   bash scripts/build.sh sloserve     the binary alone (installs only what it needs)
# Warnings are errors unless SLOSERVE_WERROR=OFF; demo.sh and test.sh build with the same flags,
# so that the tests' build reuses what the demo's built.
set -euo pipefail
cd "$(dirname "$0")/.."
if (($#)); then bash scripts/setup.sh serve; else bash scripts/setup.sh; fi
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE="${BUILD_TYPE:-Release}" -DSLOSERVE_WERROR="${SLOSERVE_WERROR:-ON}" >/dev/null
targets=()
for t in "$@"; do targets+=(--target "$t"); done
cmake --build build -j"$(nproc)" "${targets[@]}"
