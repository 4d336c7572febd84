#!/usr/bin/env bash
# Builds the cuda device kind and checks it on a machine with an NVIDIA GPU: the executor tests on
# the cuda kind, the preprocessing kernel against the CPU path, then bench_served and bench_prefix
# on cuda. CI never runs this (CI has no GPU); it is how the CUDA path is checked when one is lent.
#
#   scripts/gpu_check.sh --fetch-deps DIR     on Debian 12: download sloserve's non-torch
#                                             dependencies (.deb files) into DIR
#   scripts/gpu_check.sh [DEPS_DIR] [OUT_DIR] on the GPU machine
#
# STAGES (default "build test bench") picks the steps, so that a short lease can build and test in
# one call and run the benchmarks in the next.
#
# The GPU machine needs a CUDA-enabled PyTorch (its python3, or $PYTHON) and nvcc. Its LibTorch is
# linked directly (SLOSERVE_TORCH_ROOT): no TorchConfig. When DEPS_DIR is given, its .deb files are
# unpacked into a private prefix (/tmp/sloserve-deps), never into /, and the build uses them.
# Logs and the benchmark figures go to OUT_DIR (default build-cuda/gpu_check).
set -euo pipefail
cd "$(dirname "$0")/.."

DEB_PACKAGES="libcaf-dev libcaf-core0.17 libcaf-io0.17 libzmq3-dev libzmq5 libsodium23 libpgm-5.3-0 libnorm1
  cppzmq-dev capnproto libcapnp-dev libcapnp-0.9.2 libyaml-cpp-dev libyaml-cpp0.7 libspdlog-dev libspdlog1.10
  libfmt-dev libfmt9 libgtest-dev libcli11-dev nlohmann-json3-dev libbsd0 libmd0 libgssapi-krb5-2 libkrb5-3
  libk5crypto3 libkrb5support0 libkeyutils1 libcom-err2"

if [[ "${1:-}" == "--fetch-deps" ]]; then
  mkdir -p "$2"
  (cd "$2" && apt-get download $DEB_PACKAGES)
  exit 0
fi

DEPS_DIR="${1:-}"
OUT_DIR="${2:-build-cuda/gpu_check}"
PY="${PYTHON:-python3}"
BUILD=build-cuda
mkdir -p "$OUT_DIR"
log() { echo "== $*" | tee -a "$OUT_DIR/summary.txt"; }

nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT_DIR/gpu.txt" || true
TORCH_ROOT="${TORCH_ROOT:-$("$PY" -c 'import os, torch; print(os.path.dirname(torch.__file__))')}"
log "torch $("$PY" -c 'import torch; print(torch.__version__, "cuda", torch.version.cuda)') at $TORCH_ROOT"

CMAKE_ARGS=()
if [[ -n "$DEPS_DIR" ]]; then
  D=/tmp/sloserve-deps
  rm -rf "$D" && mkdir -p "$D"
  for f in "$DEPS_DIR"/*.deb; do dpkg -x "$f" "$D"; done
  # Debian's Cap'n Proto config names /usr for its tools and schemas, and wants OpenSSL for kj-tls,
  # which sloserve does not use.
  sed -i -e "s#/usr/bin/capnp#$D/usr/bin/capnp#g" \
         -e "s#set(CAPNP_INCLUDE_DIRECTORY /usr/include)#set(CAPNP_INCLUDE_DIRECTORY $D/usr/include)#" \
         -e "s/if (yes)  # WITH_OPENSSL/if (FALSE)  # WITH_OPENSSL/" \
         "$D"/usr/lib/x86_64-linux-gnu/cmake/CapnProto/CapnProtoConfig.cmake
  # Cap'n Proto 0.9's blob.h compares const char* with kj::StringPtr in an order GCC 13 rejects
  # in C++20 (fixed in Cap'n Proto 1.0): swap the operands.
  sed -i -e 's/{ return a == b.asString(); }/{ return b.asString() == a; }/' \
         -e 's/{ return a != b.asString(); }/{ return !(b.asString() == a); }/' "$D/usr/include/capnp/blob.h"
  LIBS="$D/usr/lib/x86_64-linux-gnu:$D/lib/x86_64-linux-gnu"
  export LD_LIBRARY_PATH="$LIBS${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export PATH="$D/usr/bin:$PATH"
  CMAKE_ARGS+=(-DCMAKE_PREFIX_PATH="$D/usr" -DCMAKE_LIBRARY_PATH="$D/usr/lib/x86_64-linux-gnu"
               -DCMAKE_CXX_FLAGS="-isystem $D/usr/include -include cstdint" -DCMAKE_BUILD_RPATH="$D/usr/lib/x86_64-linux-gnu"
               -DCMAKE_EXE_LINKER_FLAGS="-Wl,-rpath-link,$D/usr/lib/x86_64-linux-gnu:$D/lib/x86_64-linux-gnu")
fi

STAGES="${STAGES:-build test bench}"
has() { [[ " $STAGES " == *" $1 "* ]]; }
status=0

if has build; then
log "configure"
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSLOSERVE_WITH_CUDA=ON \
  -DSLOSERVE_CUDA_ARCHITECTURES="${CUDA_ARCHITECTURES:-90}" -DSLOSERVE_TORCH_ROOT="$TORCH_ROOT" \
  -DSLOSERVE_PYTHON="$(command -v "$PY")" "${CMAKE_ARGS[@]}" >"$OUT_DIR/configure.log" 2>&1 ||
  { tail -40 "$OUT_DIR/configure.log"; exit 1; }
log "build"
cmake --build "$BUILD" -j"$(nproc)" --target test_torch_executor test_preprocess bench_served bench_prefix -- -k 0 \
  >"$OUT_DIR/build.log" 2>&1 || { grep -E "error|undefined" "$OUT_DIR/build.log" | sort | uniq -c | sort -rn | head -40; exit 1; }
log "export ResNet-18 and its variants"
"$PY" tools/export_models.py --out "$BUILD/models" --only resnet18,variants >"$OUT_DIR/export.log" 2>&1 ||
  { tail -20 "$OUT_DIR/export.log"; exit 1; }

fi

if has test; then
log "tests on the cuda kind"
"$BUILD/tests/test_torch_executor" 2>&1 | tee "$OUT_DIR/test_torch_executor.log" | tail -4 || status=1
"$BUILD/tests/test_preprocess" 2>&1 | tee "$OUT_DIR/test_preprocess.log" | tail -4 || status=1
grep -h "SKIPPED\|FAILED" "$OUT_DIR"/test_*.log | tee -a "$OUT_DIR/summary.txt" || true

fi

if has bench; then
SECONDS_PER_TRIAL="${TRIAL_SECONDS:-4}"
log "bench_served cuda"
"$BUILD/bench/bench_served" "$BUILD/models" 1 "$SECONDS_PER_TRIAL" cuda 2>"$OUT_DIR/bench_served.trials" |
  tee -a "$OUT_DIR/summary.txt" || status=1
log "bench_prefix cuda"
"$BUILD/bench/bench_prefix" "$BUILD/models" 1 "$SECONDS_PER_TRIAL" cuda 2>"$OUT_DIR/bench_prefix.trials" |
  tee -a "$OUT_DIR/summary.txt" || status=1
fi
exit $status
