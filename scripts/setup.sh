#!/usr/bin/env bash
# Installs the Debian packages sloserve needs, only those that are missing.
#   bash scripts/setup.sh serve   what building sloserve and serving need (demo.sh, the Dockerfile)
#   bash scripts/setup.sh         that, and what the test suite runs beside it (test.sh)
set -euo pipefail
# Building and serving: the compilers, the libraries sloserve links, the code generators.
serve=(build-essential cmake ninja-build ccache pkg-config python3
       libcaf-dev libzmq3-dev cppzmq-dev capnproto libcapnp-dev
       libyaml-cpp-dev libgtest-dev libgmock-dev libcli11-dev libspdlog-dev libfmt-dev
       nlohmann-json3-dev libtorch-dev libturbojpeg0-dev libcpp-httplib-dev libboost-dev libssl-dev openssl
       libgrpc++-dev protobuf-compiler-grpc)
# The tests: models exported with Debian's torch, sanitizer and fuzz builds, the format check,
# network namespaces and nftables, a Prometheus that scrapes a node, gRPC clients in Python.
tests=(python3-torch python3-yaml clang libclang-rt-14-dev clang-format iproute2 nftables
       prometheus python3-grpcio python3-grpc-tools)
case "${1:-test}" in
  serve) pkgs=("${serve[@]}") ;;
  test) pkgs=("${serve[@]}" "${tests[@]}") ;;
  *) echo "setup: '$1' is neither 'serve' nor 'test'" >&2; exit 2 ;;
esac
SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
[ "${1:-test}" = serve ] && exit 0
# The Kubernetes API schemas the deployment test validates the manifests against (npm's
# kubernetes-models), in the build tree.
cd "$(dirname "$0")/.."
if ! command -v npm > /dev/null; then
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends nodejs npm
fi
if [ ! -f build/npm/node_modules/kubernetes-models/package.json ]; then
  # Without it only the schema check fails (deploy_manifests says so); serving needs none of it.
  npm install --prefix build/npm --no-audit --no-fund --silent kubernetes-models@4.5.1 ||
    echo "setup: could not install kubernetes-models from npm; the Kubernetes schema check will fail" >&2
fi
