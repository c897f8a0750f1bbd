#!/usr/bin/env bash
# deps.sh [bench|test] — make sure what building cgjit needs is installed (Debian/Ubuntu):
# gcc and cmake always, Criterion for the tests, jemalloc's PIC archive for cgjit's own host
# memory (without it cgjit falls back to malloc). Missing packages are installed with apt; if
# that is impossible (no network, no root), the script goes on as long as nothing *required*
# is missing. The CUDA toolkit is expected at /usr/local/cuda (override with CUDA_HOME).
set -euo pipefail
mode=${1:-test}
required=(build-essential cmake)
[ "$mode" = test ] && required+=(libcriterion-dev)
optional=(pkg-config libjemalloc-dev)
installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }
missing=()
for p in "${required[@]}" "${optional[@]}"; do installed "$p" || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "deps: installing ${missing[*]}"
  { $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}"; } ||
    echo "deps: warning: apt could not install ${missing[*]}" >&2
fi
for p in "${required[@]}"; do
  if ! installed "$p"; then
    # build-essential/cmake may come from elsewhere: what matters is the commands.
    case "$p" in
    build-essential) command -v gcc >/dev/null && continue ;;
    cmake) command -v cmake >/dev/null && continue ;;
    esac
    echo "deps: $p is required and could not be installed" >&2
    exit 1
  fi
done
cuda=${CUDA_HOME:-/usr/local/cuda}
if [ ! -x "$cuda/bin/nvcc" ]; then
  echo "deps: no CUDA toolkit at $cuda (set CUDA_HOME)" >&2
  exit 1
fi
