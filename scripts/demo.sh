#!/usr/bin/env bash
# Sets up what building and serving need, builds the sloserve binary alone, and serves the
# embedded default pipeline under load from the built-in client.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh sloserve
exec build/sloserve run --load "${RATE:-200}" --duration "${DURATION:-10}" --arrival poisson
