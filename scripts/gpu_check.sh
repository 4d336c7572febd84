#!/usr/bin/env bash
# Builds the cuda device kind and checks it on a machine with an NVIDIA GPU: the executor tests on
# the cuda kind, the preprocessing kernel against the CPU path, bench_served and bench_prefix on
# cuda, and ResNet-50 end to end (stage "serve": `sloserve up` + `sloserve load` against raw
# PyTorch in the same run, float32 and JPEG requests, fp32 and fp16, SLO 100 and 15 ms), and Triton's
# CUDA shared-memory extension from a client process (stage "cudashm"). CI never
# runs this (CI has no GPU); it is how the CUDA path is checked when one is lent.
#
#   scripts/gpu_check.sh --fetch-deps DIR     on Debian 12: download sloserve's non-torch
#                                             dependencies (.deb files) into DIR
#   scripts/gpu_check.sh [DEPS_DIR] [OUT_DIR] on the GPU machine
#
# STAGES (default "build test bench serve cudashm") picks the steps, so that a short lease can build and test in
# one call and run the benchmarks in the next. SERVE_SECONDS (default 6) is each serve trial's length,
# SERVE_STEPS (default 4) its bisection steps after the doubling, and SERVE_PIPELINES the pipelines
# it measures (default all six).
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
  libk5crypto3 libkrb5support0 libkeyutils1 libcom-err2
  libcpp-httplib-dev libcpp-httplib0.11 libboost1.74-dev libssl-dev libssl3 libbrotli-dev libbrotli1
  libgrpc++-dev libgrpc++1.51 libgrpc-dev libgrpc29 libprotobuf-dev libprotobuf-lite32 libprotobuf32 libprotoc32
  protobuf-compiler protobuf-compiler-grpc libabsl-dev libabsl20220623 libre2-9 libre2-dev libc-ares-dev libc-ares2
  zlib1g-dev libturbojpeg0-dev libturbojpeg0 pkgconf pkgconf-bin libpkgconf3"

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
log() { echo "== $(date +%T) $*" | tee -a "$OUT_DIR/summary.txt"; }

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
  # gRPC and protobuf are found by pkg-config: their .pc files, under the prefix.
  export PKG_CONFIG_PATH="$D/usr/lib/x86_64-linux-gnu/pkgconfig:$D/usr/share/pkgconfig"
  export PKG_CONFIG_SYSROOT_DIR="$D"
  CMAKE_ARGS+=(-DCMAKE_PREFIX_PATH="$D/usr" -DCMAKE_LIBRARY_PATH="$D/usr/lib/x86_64-linux-gnu"
               -DCMAKE_CXX_FLAGS="-isystem $D/usr/include -include cstdint" -DCMAKE_BUILD_RPATH="$D/usr/lib/x86_64-linux-gnu"
               -DCMAKE_EXE_LINKER_FLAGS="-Wl,-rpath-link,$D/usr/lib/x86_64-linux-gnu:$D/lib/x86_64-linux-gnu")
fi

STAGES="${STAGES:-build test bench serve cudashm}"
has() { [[ " $STAGES " == *" $1 "* ]]; }
status=0

if has build; then
log "configure"
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSLOSERVE_WITH_CUDA=ON \
  -DSLOSERVE_CUDA_ARCHITECTURES="${CUDA_ARCHITECTURES:-90}" -DSLOSERVE_TORCH_ROOT="$TORCH_ROOT" \
  -DSLOSERVE_PYTHON="$(command -v "$PY")" "${CMAKE_ARGS[@]}" >"$OUT_DIR/configure.log" 2>&1 ||
  { tail -40 "$OUT_DIR/configure.log"; exit 1; }
log "build"
cmake --build "$BUILD" -j"$(nproc)" --target sloserve test_torch_executor test_preprocess bench_served bench_prefix -- -k 0 \
  >"$OUT_DIR/build.log" 2>&1 || { grep -E "error|undefined" "$OUT_DIR/build.log" | sort | uniq -c | sort -rn | head -40; exit 1; }
log "export ResNet-18 and its variants, and ResNet-50"
"$PY" tools/export_models.py --out "$BUILD/models" --only resnet18,resnet50,variants >"$OUT_DIR/export.log" 2>&1 ||
  { tail -20 "$OUT_DIR/export.log"; exit 1; }

fi

if has test; then
log "tests on the cuda kind"
"$BUILD/tests/test_torch_executor" 2>&1 | tee "$OUT_DIR/test_torch_executor.log" | tail -4 || status=1
"$BUILD/tests/test_preprocess" 2>&1 | tee "$OUT_DIR/test_preprocess.log" | tail -4 || status=1
grep -h "SKIPPED\|FAILED" "$OUT_DIR"/test_*.log | tee -a "$OUT_DIR/summary.txt" || true
# How the cuda device decodes JPEGs (nvJPEG, found at run time, or CPU threads, and why).
grep -h "cuda device: " "$OUT_DIR/test_torch_executor.log" | sort -u | tee -a "$OUT_DIR/summary.txt" || true

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
if has serve; then
SERVE="$OUT_DIR/serve"
mkdir -p "$SERVE/images"
log "raw PyTorch ResNet-50, a host-to-device copy per batch"
"$PY" - "$BUILD/models/resnet50.pt" "$SERVE/images" >"$SERVE/raw.txt" 2>&1 <<'PYEOF' || status=1
import sys, time, torch, torchvision
m = torch.jit.load(sys.argv[1]).cuda().eval()
for i in range(16):  # JPEG requests for the served side: 480x640 noise, quality 90
    img = (torch.rand(3, 480, 640) * 255).to(torch.uint8)
    torchvision.io.write_jpeg(img, "%s/%02d.jpg" % (sys.argv[2], i), quality=90)
for name, dtype in (("fp32", torch.float32), ("fp16", torch.float16)):
    mm = m.half() if dtype == torch.float16 else m.float()
    best = 0
    for b in (8, 16, 32, 64):
        host = torch.randn(b, 3, 224, 224).pin_memory()
        with torch.inference_mode():
            for _ in range(5): mm(host.cuda(non_blocking=True).to(dtype)).float().cpu()
            torch.cuda.synchronize(); t = time.perf_counter(); n = 50
            for _ in range(n): mm(host.cuda(non_blocking=True).to(dtype)).float().cpu()
            torch.cuda.synchronize(); rate = n * b / (time.perf_counter() - t)
        print("raw %s batch %d: %.0f img/s" % (name, b, rate)); best = max(best, rate)
    print("raw %s best %.0f" % (name, best))
PYEOF
tee -a "$OUT_DIR/summary.txt" <"$SERVE/raw.txt"
R50="$(realpath "$BUILD/models/resnet50.pt")"
cat >"$SERVE/cluster.yaml" <<YAML
nodes:
  - {name: fe, address: tcp://127.0.0.1:0, roles: [controller, frontend]}
  - {name: gpu, address: tcp://127.0.0.1:0, roles: [worker], devices: [{kind: cuda, count: 1}]}
models:
  - {name: r50, path: $R50, input: {dtype: float32, shape: [3, 224, 224]}, output: {dtype: float32, shape: [1000]}, max_batch: 64}
  - {name: r50jpeg, path: $R50, input: {dtype: float32, shape: [3, 224, 224]}, output: {dtype: float32, shape: [1000]}, max_batch: 64, preprocess: {from: image}}
  - {name: r50fp16, path: $R50, input: {dtype: float32, shape: [3, 224, 224]}, output: {dtype: float32, shape: [1000]}, max_batch: 64, precision: fp16}
pipelines:
  - {name: fp32_100, slo_ms: 100, stages: [{name: s, model: r50}]}
  - {name: fp32_15, slo_ms: 15, stages: [{name: s, model: r50}]}
  - {name: jpeg_100, slo_ms: 100, stages: [{name: s, model: r50jpeg}]}
  - {name: jpeg_15, slo_ms: 15, stages: [{name: s, model: r50jpeg}]}
  - {name: fp16_100, slo_ms: 100, stages: [{name: s, model: r50fp16}]}
  - {name: fp16_15, slo_ms: 15, stages: [{name: s, model: r50fp16}]}
runtime: {threads: 4}
# Each pipeline is measured alone, one after another: without this, the peak of one measured
# before keeps its share of the one device for minutes (what a lull should keep).
scheduler: {peak_half_life_s: 0}
YAML
"$BUILD/sloserve" up -c "$SERVE/cluster.yaml" --write-config "$SERVE/resolved.yaml" >"$SERVE/up.log" 2>&1 &
UP=$!
for _ in $(seq 600); do grep -q "cluster up" "$SERVE/up.log" && break; sleep 0.5; done
grep -E "measured|disagreed|JPEG inputs are decoded" "$SERVE/up.log" | tee -a "$OUT_DIR/summary.txt" || true
# PIPELINE RATE [load args]: prints the attainment and the generator's late fraction.
attain() {
  local p=$1 r=$2
  shift 2
  "$BUILD/sloserve" --log-level warn load -c "$SERVE/resolved.yaml" --pipeline "$p" --rate "$r" --duration "${SERVE_SECONDS:-6}" \
    --arrival poisson --warmup 1 --json "$SERVE/$p-$r.json" "$@" >"$SERVE/$p-$r.txt" 2>&1 || true
  "$PY" -c "import json,sys; d=json.load(open(sys.argv[1])); print(d['attainment'], d['generator_late_fraction'])" \
    "$SERVE/$p-$r.json" 2>/dev/null || echo "0 0"
}
# The highest Poisson rate with >= 99% attainment: doubling from 250, then SERVE_STEPS bisection steps.
max_rate() {
  local p=$1 lo=0 hi=250 a late mid
  shift
  while :; do
    read -r a late < <(attain "$p" "$hi" "$@")
    echo "  $p $hi req/s: attainment $a (generator late $late)" >>"$SERVE/trials.txt"
    grep -E "^(sent|attainment|where|  [0-9]+x)" "$SERVE/$p-$hi.txt" | sed 's/^/      /' >>"$SERVE/trials.txt" || true
    if awk "BEGIN{exit !($a >= 0.99)}"; then lo=$hi; hi=$((hi * 2)); [[ $hi -gt 32000 ]] && break; else break; fi
  done
  for _ in $(seq "${SERVE_STEPS:-4}"); do
    mid=$(((lo + hi) / 2))
    read -r a late < <(attain "$p" "$mid" "$@")
    echo "  $p $mid req/s: attainment $a (generator late $late)" >>"$SERVE/trials.txt"
    grep -E "^(sent|attainment|where|  [0-9]+x)" "$SERVE/$p-$mid.txt" | sed 's/^/      /' >>"$SERVE/trials.txt" || true
    if awk "BEGIN{exit !($a >= 0.99)}"; then lo=$mid; else hi=$mid; fi
  done
  echo "$lo"
}
# Past the rate found, twice it: what is answered in time should stay near that rate (the rest
# refused or dropped with reasons), not collapse.
overload() {
  local p=$1 r=$2
  shift 2
  attain "$p" "$r" "$@" >/dev/null
  grep -E "^(sent|attainment|where|  [0-9]+x)" "$SERVE/$p-$r.txt" | sed 's/^/      /' >>"$SERVE/trials.txt" || true
  "$PY" -c "import json,sys; d=json.load(open(sys.argv[1])); print('%.0f req/s in time, attainment %.3f, lost %d' % (d['goodput_rps'], d['attainment'], d['lost']))" \
    "$SERVE/$p-$r.json" 2>/dev/null || echo "no summary"
}
PIPES="${SERVE_PIPELINES:-fp32_100 fp32_15 fp16_100 fp16_15 jpeg_100 jpeg_15}"
for p in $PIPES; do
  args=()
  what="float32 requests"
  [[ $p == jpeg_* ]] && args=(--images "$SERVE/images") && what="JPEG requests, decoded on the worker"
  r=$(max_rate "$p" "${args[@]}")
  log "served $p: $r req/s at >= 99% ($what)"
  if [[ $r -gt 0 ]]; then log "served $p at twice that, $((2 * r)) req/s: $(overload "$p" $((2 * r)) "${args[@]}")"; fi
done
kill "$UP" 2>/dev/null || true
wait "$UP" 2>/dev/null || true
log "ratios: each served rate over the raw best of its precision above (JPEG against raw fp32)"
fi

if has cudashm; then
# Triton's CUDA shared-memory extension end to end: a client process puts a 224x224 tensor in its
# GPU memory, exports it (cudaIpcGetMemHandle), registers it and an output buffer over HTTP, and
# the node answers into the GPU buffer the outputs it answers a request with the bytes.
SHM="$OUT_DIR/cudashm"
mkdir -p "$SHM"
R50="$(realpath "$BUILD/models/resnet50.pt")"
PORT=$("$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cat >"$SHM/cluster.yaml" <<YAML
nodes:
  - {name: one, address: tcp://127.0.0.1:0, http: "127.0.0.1:$PORT", roles: [controller, frontend, worker], devices: [{kind: cuda, count: 1}]}
models:
  - {name: r50, path: $R50, input: {dtype: float32, shape: [3, 224, 224]}, output: {dtype: float32, shape: [1000]}, max_batch: 16}
pipelines:
  - {name: r50, slo_ms: 200, stages: [{name: s, model: r50}]}
runtime: {client_shared_memory: true}
YAML
"$BUILD/sloserve" up -c "$SHM/cluster.yaml" >"$SHM/up.log" 2>&1 &
UP=$!
for _ in $(seq 600); do grep -q "cluster up" "$SHM/up.log" && break; sleep 0.5; done
grep -h "CUDA shared memory" "$SHM/up.log" | tee -a "$OUT_DIR/summary.txt" || true
"$PY" - "$PORT" >"$SHM/client.txt" 2>&1 <<'PYEOF' || status=1
import base64, ctypes, glob, json, os, sys, time, urllib.request
import numpy as np, torch
site = os.path.dirname(os.path.dirname(torch.__file__))
libs = sorted(glob.glob(site + "/nvidia/cuda_runtime/lib/libcudart.so*")) + ["/usr/local/cuda/lib64/libcudart.so"]
rt = ctypes.CDLL(libs[0])
url = "http://127.0.0.1:%s" % sys.argv[1]
def call(path, body=None):
    data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
    req = urllib.request.Request(url + path, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req) as r: return r.status, r.read()
    except urllib.error.HTTPError as e: return e.code, e.read()
def gpu_buffer(n):
    p = ctypes.c_void_p(); assert rt.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(n)) == 0
    h = (ctypes.c_char * 64)(); assert rt.cudaIpcGetMemHandle(h, p) == 0
    return p, base64.b64encode(bytes(h)).decode()
x = np.random.default_rng(7).standard_normal((3, 224, 224)).astype(np.float32)
inp, inp_h = gpu_buffer(x.nbytes); out, out_h = gpu_buffer(4000)
assert rt.cudaMemcpy(inp, x.ctypes.data_as(ctypes.c_void_p), ctypes.c_size_t(x.nbytes), 1) == 0
print("metadata", call("/v2")[1].decode())
for name, h, n in (("in", inp_h, x.nbytes), ("out", out_h, 4000)):
    print("register", name, call("/v2/cudasharedmemory/region/%s/register" % name, {"raw_handle": {"b64": h}, "device_id": 0, "byte_size": n}))
print("status", call("/v2/cudasharedmemory/status")[1].decode())
shm = {"inputs": [{"name": "input", "datatype": "FP32", "shape": [3, 224, 224], "parameters": {"shared_memory_region": "in", "shared_memory_byte_size": x.nbytes}}],
       "outputs": [{"name": "output", "parameters": {"shared_memory_region": "out", "shared_memory_byte_size": 4000}}]}
code, body = call("/v2/models/r50/infer", shm); print("infer through GPU memory", code, body[:200])
got = np.empty(1000, np.float32)
assert rt.cudaMemcpy(got.ctypes.data_as(ctypes.c_void_p), out, ctypes.c_size_t(4000), 2) == 0
ref = json.loads(call("/v2/models/r50/infer", {"inputs": [{"name": "input", "datatype": "FP32", "shape": [3, 224, 224], "data": x.ravel().tolist()}]})[1])
want = np.array(ref["outputs"][0]["data"], np.float32)
print("outputs agree with the JSON request's:", bool(np.allclose(got, want, atol=1e-3)), "max diff %.2e" % float(np.abs(got - want).max()))
for kind, body in (("cuda", json.dumps(shm).encode()),):
    t = time.perf_counter(); n = 200
    for _ in range(n): assert call("/v2/models/r50/infer", body)[0] == 200
    print("%d sequential requests through GPU memory: %.0f req/s" % (n, n / (time.perf_counter() - t)))
print("unregister", call("/v2/cudasharedmemory/unregister", b"{}"), "status", call("/v2/cudasharedmemory/status")[1].decode())
PYEOF
tee -a "$OUT_DIR/summary.txt" <"$SHM/client.txt"
grep -q "outputs agree with the JSON request's: True" "$SHM/client.txt" || status=1
kill "$UP" 2>/dev/null || true
wait "$UP" 2>/dev/null || true
fi
exit $status
