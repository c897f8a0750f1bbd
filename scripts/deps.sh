#!/usr/bin/env bash
# deps.sh — install what building and testing cgjit needs on a Debian/Ubuntu machine:
# gcc, cmake, Criterion (tests) and jemalloc. The CUDA toolkit is expected at /usr/local/cuda
# (override with CUDA_HOME). Packages already present are not reinstalled.
set -euo pipefail
pkgs=(build-essential cmake pkg-config libcriterion-dev libjemalloc-dev)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "deps: installing ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}"
fi
cuda=${CUDA_HOME:-/usr/local/cuda}
if [ ! -x "$cuda/bin/nvcc" ]; then
  echo "deps: no CUDA toolkit at $cuda (set CUDA_HOME)" >&2
  exit 1
fi
