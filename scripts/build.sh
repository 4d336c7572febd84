#!/usr/bin/env bash
# Configures and builds sloserve into build/ (ccache when present).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE="${BUILD_TYPE:-Release}" -DSLOSERVE_WERROR="${SLOSERVE_WERROR:-OFF}" >/dev/null
cmake --build build -j"$(nproc)"
