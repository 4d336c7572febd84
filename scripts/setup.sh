#!/usr/bin/env bash
# Installs the Debian packages sloserve builds with, only those that are missing.
set -euo pipefail
pkgs=(build-essential cmake ninja-build ccache pkg-config
      libcaf-dev libzmq3-dev cppzmq-dev capnproto libcapnp-dev
      libyaml-cpp-dev libgtest-dev libgmock-dev libcli11-dev libspdlog-dev libfmt-dev
      nlohmann-json3-dev libtorch-dev python3-torch
      clang libclang-rt-14-dev clang-format iproute2 libturbojpeg0-dev libcpp-httplib-dev libboost-dev libssl-dev python3-yaml openssl
      prometheus libgrpc++-dev protobuf-compiler-grpc python3-grpcio python3-grpc-tools nftables)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
# The Kubernetes API schemas the deployment test validates the manifests against (npm's
# kubernetes-models), in the build tree.
cd "$(dirname "$0")/.."
if ! command -v npm > /dev/null; then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends nodejs npm
fi
if [ ! -f build/npm/node_modules/kubernetes-models/package.json ]; then
  # Without it only the schema check fails (deploy_manifests says so); serving needs none of it.
  npm install --prefix build/npm --no-audit --no-fund --silent kubernetes-models@4.5.1 ||
    echo "setup: could not install kubernetes-models from npm; the Kubernetes schema check will fail" >&2
fi
