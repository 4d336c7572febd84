#!/usr/bin/env bash
# Sets up, checks the formatting, builds everything with warnings as errors (the flags demo.sh
# builds with: what it built is not built again), and runs the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/format.sh --check
SLOSERVE_WERROR=ON bash scripts/build.sh
cd build && ctest --output-on-failure -j"$(nproc)" --timeout 300
